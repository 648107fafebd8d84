//! The change between two scoring images, row by row, and its merge into
//! the older: the reference the tests hold the published deltas
//! ([`super::changes`]) and their application in place
//! ([`super::apply_delta`]) to. A delta is the image's rows that changed
//! since another image of the same layout (same labels, task and weight
//! slots), with every scalar of the new one; applying it to the old image
//! gives the new one, row for row.

use super::ReplicaError;
use crate::checkpoint::pb;

use pb::model_state::State;

/// Sparse rows: sorted row ids and `stride` values per row.
struct Sparse<'a, T, I = u32> {
    ids: &'a [I],
    values: &'a [T],
    stride: usize,
}

impl<'a, T, I> Sparse<'a, T, I> {
    fn row(&self, i: usize) -> &'a [T] {
        &self.values[i * self.stride..(i + 1) * self.stride]
    }
}

/// Walks two row sets, both sorted by id, in id order: `f(id, a's row,
/// b's row)` for every id in either.
fn walk<'a, T, I: Copy + Ord>(
    a: &Sparse<'a, T, I>,
    b: &Sparse<'a, T, I>,
    mut f: impl FnMut(I, Option<&'a [T]>, Option<&'a [T]>),
) {
    let (mut i, mut j) = (0, 0);
    loop {
        match (a.ids.get(i), b.ids.get(j)) {
            (Some(&x), Some(&y)) if x == y => {
                f(x, Some(a.row(i)), Some(b.row(j)));
                (i, j) = (i + 1, j + 1);
            }
            (Some(&x), Some(&y)) if y < x => {
                f(y, None, Some(b.row(j)));
                j += 1;
            }
            (Some(&x), _) => {
                f(x, Some(a.row(i)), None);
                i += 1;
            }
            (None, Some(&y)) => {
                f(y, None, Some(b.row(j)));
                j += 1;
            }
            (None, None) => return,
        }
    }
}

/// The rows of `new` that differ from `old` (rows gone from `new` come as
/// zeros). Both sorted by id, with the same stride.
fn diff<T: Copy + PartialEq + Default, I: Copy + Ord>(
    old: Sparse<'_, T, I>,
    new: Sparse<'_, T, I>,
) -> (Vec<I>, Vec<T>) {
    let (mut ids, mut values) = (Vec::new(), Vec::new());
    let zeros = vec![T::default(); new.stride];
    walk(&old, &new, |id, o, n| {
        let row = match (o, n) {
            (Some(o), Some(n)) if o == n => return,
            (_, Some(n)) => n,
            (_, None) => &zeros[..],
        };
        ids.push(id);
        values.extend_from_slice(row);
    });
    (ids, values)
}

/// `base` with `delta`'s rows in place of its own (all-zero rows dropped).
fn merge<T: Copy + PartialEq + Default, I: Copy + Ord>(
    base: Sparse<'_, T, I>,
    delta: Sparse<'_, T, I>,
) -> (Vec<I>, Vec<T>) {
    let (mut ids, mut values) = (
        Vec::with_capacity(base.ids.len()),
        Vec::with_capacity(base.values.len()),
    );
    let zero = T::default();
    walk(&base, &delta, |id, b, d| {
        if let Some(row) = d.or(b)
            && row.iter().any(|v| *v != zero)
        {
            ids.push(id);
            values.extend_from_slice(row);
        }
    });
    (ids, values)
}

/// A protobuf row set: ids strictly increasing, `stride` values each.
/// Dense rows are keyed by bucket, sparse entries by (bucket, class).
trait RowSet: Sized {
    type Id: Copy + Ord;
    fn view(&self) -> Sparse<'_, f32, Self::Id>;
    fn build(stride: u32, ids: Vec<Self::Id>, values: Vec<f32>) -> Self;

    /// Whether the set is well formed.
    fn valid(&self) -> bool {
        let v = self.view();
        v.values.len() == v.ids.len() * v.stride && v.ids.windows(2).all(|w| w[0] < w[1])
    }
}

impl RowSet for pb::Rows {
    type Id = u32;
    fn view(&self) -> Sparse<'_, f32, u32> {
        Sparse {
            ids: &self.rows,
            values: &self.values,
            stride: self.stride as usize,
        }
    }
    fn build(stride: u32, rows: Vec<u32>, values: Vec<f32>) -> Self {
        pb::Rows { stride, rows, values }
    }
}

impl RowSet for pb::Entries {
    type Id = u64;
    fn view(&self) -> Sparse<'_, f32, u64> {
        Sparse {
            ids: &self.keys,
            values: &self.values,
            stride: self.stride as usize,
        }
    }
    fn build(stride: u32, keys: Vec<u64>, values: Vec<f32>) -> Self {
        pb::Entries {
            stride,
            keys,
            values,
            ..Default::default()
        }
    }
}

/// The rows of `new` that differ from `old`, or `None` when the two do
/// not share a layout.
fn diff_rows<R: RowSet>(old: Option<&R>, new: Option<&R>) -> Option<Option<R>> {
    let (Some(old), Some(new)) = (old, new) else {
        // Absent on both sides (no classes yet): nothing changed.
        return (old.is_none() && new.is_none()).then_some(None);
    };
    let stride = new.view().stride;
    if old.view().stride != stride {
        return None;
    }
    let (ids, values) = diff(old.view(), new.view());
    Some(Some(R::build(stride as u32, ids, values)))
}

fn merge_rows<R: RowSet>(base: &mut Option<R>, delta: Option<R>) -> Result<(), ReplicaError> {
    match (base.as_mut(), delta) {
        (_, None) => Ok(()),
        (Some(b), Some(d)) if b.view().stride == d.view().stride && d.valid() && b.valid() => {
            let (ids, values) = merge(b.view(), d.view());
            *b = R::build(d.view().stride as u32, ids, values);
            Ok(())
        }
        (None, Some(d)) if d.valid() => {
            *base = Some(d);
            Ok(())
        }
        _ => Err("a delta's rows do not fit the model's".into()),
    }
}

/// An added member's slots, `width` values each.
fn member_sparse(m: &pb::MemberState) -> Sparse<'_, f32> {
    Sparse {
        ids: &m.slots,
        values: &m.values,
        stride: m.width as usize,
    }
}

/// The change from `old`'s added members to `new`'s: `None` unless both
/// hold the same members, of the same widths, in the same order.
fn members_delta(old: &[pb::MemberState], new: &[pb::MemberState]) -> Option<Vec<pb::MemberState>> {
    if old.len() != new.len() {
        return None;
    }
    (old.iter().zip(new))
        .map(|(o, n)| {
            (o.name == n.name && o.width == n.width && n.width > 0).then(|| {
                let (slots, values) = diff(member_sparse(o), member_sparse(n));
                pb::MemberState {
                    name: n.name.clone(),
                    width: n.width,
                    slots,
                    values,
                }
            })
        })
        .collect()
}

fn df_sparse(d: &pb::DocFreq) -> Sparse<'_, u32> {
    Sparse {
        ids: &d.buckets,
        values: &d.counts,
        stride: 1,
    }
}

/// The change from `old` to `new`, or `None` when only a whole image
/// will do (other labels, task or weight layout).
pub(super) fn delta(old: &pb::ModelState, new: &pb::ModelState) -> Option<pb::ModelState> {
    if old.task != new.task || old.labels != new.labels {
        return None;
    }
    let state = match (&old.state, &new.state) {
        (Some(State::Linear(o)), Some(State::Linear(n))) => {
            if (o.averaged, o.adagrad, o.mirrored) != (n.averaged, n.adagrad, n.mirrored)
                || o.entries.is_some() != n.entries.is_some()
            {
                return None;
            }
            State::Linear(pb::LinearState {
                rows: diff_rows(o.rows.as_ref(), n.rows.as_ref())?,
                entries: diff_rows(o.entries.as_ref(), n.entries.as_ref())?,
                scale: n.scale,
                bsum: n.bsum,
                steps: n.steps,
                averaged: n.averaged,
                adagrad: n.adagrad,
                mirrored: n.mirrored,
            })
        }
        (Some(State::NaiveBayes(o)), Some(State::NaiveBayes(n))) => State::NaiveBayes(nb_delta(o, n)?),
        _ => return None,
    };
    let fusion = both(&old.fusion, &new.fusion, |o, n| {
        Some(pb::FusionState {
            naive_bayes: Some(nb_delta(o.naive_bayes.as_ref()?, n.naive_bayes.as_ref()?)?),
            weight: n.weight,
            sum_sq: n.sum_sq,
        })
    })?;
    let doc_freq = both(&old.doc_freq, &new.doc_freq, |o, n| {
        let (buckets, counts) = diff(df_sparse(o), df_sparse(n));
        Some(pb::DocFreq {
            docs: n.docs,
            buckets,
            counts,
        })
    })?;
    let members = members_delta(&old.members, &new.members)?;
    Some(pb::ModelState {
        task: new.task.clone(),
        labels: new.labels.clone(),
        version: new.version,
        state: Some(state),
        sketch: Vec::new(),
        sketch_offered: new.sketch_offered,
        doc_freq,
        fusion,
        members,
        personal_switch: new.personal_switch,
        stack: new.stack.clone(),
        ..pb::ModelState::default()
    })
}

/// The change `f` finds between two parts of a model, `Some(None)` when
/// neither has the part; `None` (only a whole image will do) when one
/// has it and the other not, or `f` finds no delta.
fn both<T, U>(old: &Option<T>, new: &Option<T>, f: impl FnOnce(&T, &T) -> Option<U>) -> Option<Option<U>> {
    match (old, new) {
        (None, None) => Some(None),
        (Some(o), Some(n)) => f(o, n).map(Some),
        _ => None,
    }
}

/// The change between two naive Bayes states of one layout.
fn nb_delta(o: &pb::NaiveBayesState, n: &pb::NaiveBayesState) -> Option<pb::NaiveBayesState> {
    if o.multilabel != n.multilabel {
        return None;
    }
    Some(pb::NaiveBayesState {
        counts: diff_rows(o.counts.as_ref(), n.counts.as_ref())?,
        totals: diff_rows(o.totals.as_ref(), n.totals.as_ref())?,
        class_mass: n.class_mass.clone(),
        class_docs: n.class_docs.clone(),
        docs: n.docs,
        mass: n.mass,
        vocabulary: n.vocabulary,
        multilabel: n.multilabel,
    })
}

/// Applies an [`nb_delta`].
fn nb_apply(b: &mut pb::NaiveBayesState, n: pb::NaiveBayesState) -> Result<(), ReplicaError> {
    if b.multilabel != n.multilabel {
        return Err("a delta for another naive Bayes layout".into());
    }
    merge_rows(&mut b.counts, n.counts)?;
    merge_rows(&mut b.totals, n.totals)?;
    b.class_mass = n.class_mass;
    b.class_docs = n.class_docs;
    (b.docs, b.mass, b.vocabulary) = (n.docs, n.mass, n.vocabulary);
    Ok(())
}

/// Applies a [`delta`] to the image it was taken against. The image keeps
/// its feature-name sketch (deltas carry none). On error `base` may be
/// half changed: the caller applies to a copy and keeps the old one.
pub(super) fn apply(base: &mut pb::ModelState, d: pb::ModelState) -> Result<(), ReplicaError> {
    if base.task != d.task || base.labels != d.labels {
        return Err("a delta for other labels".into());
    }
    match (&mut base.state, d.state) {
        (Some(State::Linear(b)), Some(State::Linear(n))) => {
            if (b.averaged, b.adagrad, b.mirrored) != (n.averaged, n.adagrad, n.mirrored)
                || (b.entries.is_some() && n.rows.is_some())
                || (b.rows.is_some() && n.entries.is_some())
            {
                return Err("a delta for another weight layout".into());
            }
            merge_rows(&mut b.rows, n.rows)?;
            merge_rows(&mut b.entries, n.entries)?;
            (b.scale, b.bsum, b.steps) = (n.scale, n.bsum, n.steps);
        }
        (Some(State::NaiveBayes(b)), Some(State::NaiveBayes(n))) => nb_apply(b, n)?,
        _ => return Err("a delta for another learner".into()),
    }
    if base.personal_switch.is_some() != d.personal_switch.is_some() {
        return Err("a delta with and without a personal switch".into());
    }
    base.personal_switch = d.personal_switch;
    if base.stack.is_some() != d.stack.is_some() {
        return Err("a delta with and without a stack".into());
    }
    base.stack = d.stack;
    match (&mut base.fusion, d.fusion) {
        (None, None) => {}
        (Some(b), Some(n)) => {
            match (&mut b.naive_bayes, n.naive_bayes) {
                (Some(b), Some(n)) => nb_apply(b, n)?,
                _ => return Err("a fusion delta without its counts".into()),
            }
            (b.weight, b.sum_sq) = (n.weight, n.sum_sq);
        }
        _ => return Err("a delta with and without a fusion".into()),
    }
    match (&mut base.doc_freq, d.doc_freq) {
        (None, None) => {}
        (Some(b), Some(n)) => {
            let ok = |x: &pb::DocFreq| x.buckets.len() == x.counts.len() && x.buckets.windows(2).all(|w| w[0] < w[1]);
            if !ok(b) || !ok(&n) {
                return Err("document frequencies out of order".into());
            }
            let (buckets, counts) = merge(df_sparse(b), df_sparse(&n));
            (b.buckets, b.counts, b.docs) = (buckets, counts, n.docs);
        }
        _ => return Err("a delta with and without document frequencies".into()),
    }
    if base.members.len() != d.members.len() {
        return Err("a delta with other added members of the stack".into());
    }
    for (b, n) in base.members.iter_mut().zip(d.members) {
        let ok = |m: &pb::MemberState| {
            m.width > 0 && m.values.len() == m.width as usize * m.slots.len() && m.slots.windows(2).all(|w| w[0] < w[1])
        };
        if b.name != n.name || b.width != n.width || !ok(b) || !ok(&n) {
            return Err(format!("a delta's member {:?} does not fit the model's", n.name).into());
        }
        (b.slots, b.values) = merge(member_sparse(b), member_sparse(&n));
    }
    base.version = d.version;
    base.sketch_offered = d.sketch_offered;
    Ok(())
}
