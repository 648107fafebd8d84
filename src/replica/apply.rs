//! A delta put into the model a replica serves, in place: the rows it
//! changes and its scalars, nothing else, so that a predictor's cost per
//! version follows the delta's size, not the model's. Everything is
//! checked first ([`check`]); only a delta that fits is put, so a bad one
//! leaves the model as it was.

use super::ReplicaError;
use crate::checkpoint::pb;
use crate::model::member;
use crate::model::stack::Stack;
use crate::model::{Model, NaiveBayes, State, Task};

use pb::model_state::State as PbState;

/// Puts `d` (a delta, [`super::changes`], against the version `m` is) into
/// `m`; `Err` (and `m` unchanged) when it does not fit. Its key gaps, if
/// any, are summed into keys first.
pub fn apply_delta(m: &mut Model, d: &mut pb::ModelState) -> Result<(), ReplicaError> {
    if let Some(PbState::Linear(pb::LinearState { entries: Some(e), .. })) = &mut d.state {
        expand_gaps(e)?;
    }
    // An older learner's delta carries its members in their own fields.
    crate::checkpoint::legacy_members(d)?;
    let d = &*d;
    check(m, d)?;
    // New classes (sparse weights only: `check` saw to it), with no
    // weights but those the delta brings.
    for name in &d.labels[m.labels.len()..] {
        m.intern(name)
            .map_err(|e| format!("a delta's new class {name:?}: {e}"))?;
    }
    match (&mut m.state, &d.state) {
        (State::Linear(w), Some(PbState::Linear(l))) => {
            if let Some(r) = &l.rows {
                w.put_compact_rows(&r.rows, &r.values);
            }
            if let Some(e) = &l.entries {
                if let Some(t) = e.prune_at_or_below {
                    // A pass over the whole arena: the one part of a delta
                    // whose cost follows the model (docs/scaling.md).
                    let started = std::time::Instant::now();
                    w.mirror_pruning(t, &e.rows, &e.keys);
                    tracing::debug!(
                        ms = started.elapsed().as_millis() as u64,
                        "a learner's pruning replayed"
                    );
                }
                w.set_entries(&e.keys, &e.values);
                w.tidy();
            }
            w.set_scalars(l.scale, l.bsum, l.steps);
        }
        (State::NaiveBayes(nb), Some(PbState::NaiveBayes(n))) => put_nb(nb, n),
        _ => {}
    }
    if let (Some(s), Some(n)) = (&mut m.stack, &d.stack) {
        // Checked: a stack this build reads.
        if let Some(stack) = Stack::from_parts(&n.weights, &n.sum_sq, n.bound) {
            *s = stack;
        }
    }
    if let (Some(f), Some(n)) = (&mut m.fusion, &d.fusion) {
        if let Some(counts) = &n.naive_bayes {
            put_nb(&mut f.nb, counts);
        }
        (f.weight, f.sum_sq) = (n.weight, n.sum_sq);
    }
    for n in &d.members {
        // Checked: a member the model holds, its slots and values fit.
        if let Some(a) = member::index_of(&n.name).and_then(|i| m.added.get_mut(i)) {
            a.put(&n.slots, &n.values);
        }
    }
    if let (true, Some(n)) = (m.doc_freq.is_some(), &d.doc_freq) {
        for (&b, &c) in n.buckets.iter().zip(&n.counts) {
            m.set_doc_count(b, c);
        }
        m.set_docs(n.docs);
    }
    m.version = d.version;
    Ok(())
}

/// Sums `e.key_gaps` (format 5) into `e.keys`, in place; `Err` when it
/// carries both or a sum overflows. The keys' order is checked later,
/// as any delta's is.
pub(super) fn expand_gaps(e: &mut pb::Entries) -> Result<(), ReplicaError> {
    if e.key_gaps.is_empty() {
        return Ok(());
    }
    if !e.keys.is_empty() {
        return Err("a delta with both keys and key gaps".into());
    }
    let mut key = 0u64;
    for g in &mut e.key_gaps {
        key = key.checked_add(*g).ok_or("a delta's key gaps overflow")?;
        *g = key;
    }
    e.keys = std::mem::take(&mut e.key_gaps);
    Ok(())
}

fn task_name(t: Option<Task>) -> &'static str {
    match t {
        None => "",
        Some(Task::SingleLabel) => "single-label",
        Some(Task::MultiLabel) => "multi-label",
    }
}

/// Whether `d` fits `m`: the same labels (or more after them, for sparse
/// weights without fusion, within `--max-classes`), task and layout, every
/// row in range with its stride (new classes counted).
fn check(m: &Model, d: &pb::ModelState) -> Result<(), ReplicaError> {
    let known = m.labels.names();
    let sparse = matches!(&m.state, State::Linear(w) if w.is_sparse()) && m.fusion.is_none();
    let labels = d.labels.as_slice() == known
        || (sparse && d.labels.starts_with(known) && d.labels.len() <= m.limits().max_classes && distinct(&d.labels));
    if d.task != task_name(m.task) || !labels {
        return Err("a delta for other labels".into());
    }
    let fits = match (&m.state, &d.state) {
        (State::Linear(w), Some(PbState::Linear(l))) => {
            w.has_layout(l.averaged, l.adagrad, l.mirrored)
                && l.scale.is_finite()
                && l.scale > 0.0
                && l.rows
                    .as_ref()
                    .is_none_or(|r| w.rows_fit(r.stride as usize, &r.rows, r.values.len()))
                && l.entries.as_ref().is_none_or(|e| {
                    w.entries_fit(e.stride as usize, &e.keys, e.values.len(), d.labels.len())
                        && prune_fits(e, w.buckets())
                })
        }
        (State::NaiveBayes(nb), Some(PbState::NaiveBayes(n))) => nb_fits(nb, n),
        _ => false,
    };
    if !fits {
        return Err("a delta for another weight layout, or rows out of range".into());
    }
    let fusion_fits = match (&m.fusion, &d.fusion) {
        (None, None) => true,
        (Some(f), Some(n)) => n.naive_bayes.as_ref().is_some_and(|c| nb_fits(&f.nb, c)),
        _ => false,
    };
    let df_fits = match (&m.doc_freq, &d.doc_freq) {
        (None, None) => true,
        (Some(_), Some(n)) => {
            n.buckets.len() == n.counts.len() && n.buckets.iter().all(|&b| (b as usize) < m.doc_buckets())
        }
        _ => false,
    };
    // The members the model holds, each once, in the registry's order.
    let held: Vec<&str> = m.added.iter().map(|(_, a)| a.name()).collect();
    let named: Vec<&str> = d.members.iter().map(|n| n.name.as_str()).collect();
    let members_fit = held == named
        && (d.members.iter()).all(|n| {
            (m.added.named(&n.name)).is_some_and(|a| a.width() == n.width as usize && a.fits(&n.slots, &n.values))
        });
    let stack_fits = match (&m.stack, &d.stack) {
        (None, None) => true,
        (Some(_), Some(n)) => Stack::from_parts(&n.weights, &n.sum_sq, n.bound).is_some(),
        _ => false,
    };
    if !fusion_fits || !df_fits || !members_fit || !stack_fits {
        return Err(
            "a delta with or without a fusion, an added member of the stack, document frequencies or a stack \
             the model lacks or has"
                .into(),
        );
    }
    Ok(())
}

/// Whether a delta that replays pruning names its rows and keys in
/// ascending order (they are then matched in one walk), every row among
/// the `buckets` and every key's bucket among the rows; one that does not
/// prune names no rows.
fn prune_fits(e: &pb::Entries, buckets: usize) -> bool {
    let Some(t) = e.prune_at_or_below else {
        return e.rows.is_empty();
    };
    let ascending = |a: &[u32]| a.windows(2).all(|p| p[0] < p[1]);
    !t.is_nan()
        && ascending(&e.rows)
        && e.rows.last().is_none_or(|&b| (b as usize) < buckets)
        && e.keys.windows(2).all(|p| p[0] < p[1])
        && e.keys
            .iter()
            .all(|&k| e.rows.binary_search(&((k >> 32) as u32)).is_ok())
}

/// Whether no label comes twice.
fn distinct(labels: &[String]) -> bool {
    let mut seen = std::collections::HashSet::new();
    labels.iter().all(|l| seen.insert(l.as_str()))
}

/// Whether rows of `stride` floats fit a `[bucket][stride]` buffer.
fn rows_fit(r: Option<&pb::Rows>, buckets: usize, stride: usize) -> bool {
    r.is_none_or(|r| {
        (r.rows.is_empty() || r.stride as usize == stride)
            && r.rows.len().checked_mul(stride) == Some(r.values.len())
            && r.rows.iter().all(|&b| (b as usize) < buckets)
    })
}

fn nb_fits(nb: &NaiveBayes, n: &pb::NaiveBayesState) -> bool {
    // A multi-label model keeps per-bucket totals.
    n.multilabel != nb.totals.is_empty()
        && n.class_mass.len() == nb.classes
        && n.class_docs.len() == nb.classes
        && rows_fit(n.counts.as_ref(), nb.buckets, nb.classes)
        && (!n.multilabel || rows_fit(n.totals.as_ref(), nb.buckets, 1))
}

fn put_rows(buf: &mut [f32], r: Option<&pb::Rows>, stride: usize) {
    if let Some(r) = r {
        for (&b, v) in r.rows.iter().zip(r.values.chunks_exact(stride.max(1))) {
            let b = b as usize;
            buf[b * stride..(b + 1) * stride].copy_from_slice(v);
        }
    }
}

fn put_nb(nb: &mut NaiveBayes, n: &pb::NaiveBayesState) {
    put_rows(&mut nb.counts, n.counts.as_ref(), nb.classes);
    if n.multilabel {
        put_rows(&mut nb.totals, n.totals.as_ref(), 1);
    }
    nb.class_mass.clone_from(&n.class_mass);
    nb.class_docs.clone_from(&n.class_docs);
    (nb.docs, nb.mass, nb.vocabulary) = (n.docs, n.mass, n.vocabulary);
}
