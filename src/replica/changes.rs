//! A delta from the rows learning changed ([`Model::take_changes`]), read
//! from the model as it stands: what a learner publishes between full
//! versions, at a cost that follows the rows changed, not the model's size
//! (no image of the whole model is kept or compared). Its layout is the
//! scoring image's ([`super::image::scoring_image`]), so a replica puts it
//! in place as it would a delta between two images.

use crate::checkpoint::{member_to_pb, pb, stack_to_pb};
use crate::model::member::ADDED;
use crate::model::{Model, NaiveBayes, State, Task, Weights};

use pb::model_state::State as PbState;

/// What a delta from changed rows assumes of the version before it: the
/// same labels (or, sparse weights without fusion, more labels after the
/// same ones: a new class has no weights outside the buckets learning
/// touched), task and weight layout, no rescale since (the budget's
/// pruning goes in the delta: [`delta_of_changes`]).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Shape {
    task: Option<Task>,
    labels: Vec<String>,
    layout: Option<(bool, bool, bool, bool)>,
    fused: bool,
    /// Which added members of the stack it holds.
    added: [bool; ADDED],
    scale: f64,
}

/// Weights `m` holds ([`crate::model::Weights::held`]; 1 for naive
/// Bayes): what a full version's size follows.
pub(super) fn weights_held(m: &Model) -> usize {
    match &m.state {
        State::Linear(w) => w.held(),
        State::NaiveBayes(_) => 1,
    }
}

impl Shape {
    pub(super) fn of(m: &Model) -> Self {
        let (layout, scale) = match &m.state {
            State::Linear(w) => {
                let (a, g, mirrored) = w.layout();
                (Some((a, g, mirrored, w.is_sparse())), w.scale())
            }
            State::NaiveBayes(_) => (None, 1.0),
        };
        Shape {
            task: m.task(),
            labels: m.labels().names().to_vec(),
            layout,
            fused: m.fusion.is_some(),
            added: std::array::from_fn(|i| m.added().get(i).is_some()),
            scale,
        }
    }

    /// Why a delta of changed rows cannot lead from a version of shape
    /// `self` to `now` (for the log), or "" when it can: the rows learning
    /// left alone are the same in both (a rescale moves them all: the
    /// scale only goes down between two rescales).
    pub(super) fn departure(&self, now: &Shape) -> &'static str {
        let sparse = matches!(self.layout, Some((.., true))) && !self.fused;
        if self.task != now.task {
            "task changed"
        } else if self.labels != now.labels && !(sparse && now.labels.starts_with(&self.labels)) {
            "labels changed"
        } else if self.layout != now.layout || self.fused != now.fused || self.added != now.added {
            "layout changed"
        } else if now.scale > self.scale {
            "weights rescaled"
        } else {
            ""
        }
    }
}

/// What changed outside the model's rows: each added member's slots,
/// ascending, by registry index.
#[derive(Debug, Default)]
pub(super) struct Members([Vec<u32>; ADDED]);

impl Members {
    /// What changed in `m`'s added members since they were last asked.
    pub(super) fn take(m: &mut Model) -> Self {
        Members(m.take_added_changes().map(Option::unwrap_or_default))
    }
}

/// The rows of `buckets` of the linear weights `w` (their sparse
/// entries when sparse, with the budget's pruning at `pruned_at`).
fn linear_rows(w: &Weights, buckets: &[u32], pruned_at: Option<f32>) -> PbState {
    let stride = w.scoring_stride() as u32;
    let (averaged, _, mirrored) = w.layout();
    let (mut ids, mut keys, mut values) = (Vec::new(), Vec::new(), Vec::new());
    for (i, &b) in buckets.iter().enumerate() {
        if w.is_sparse() {
            w.prefetch_entries(buckets, i);
            w.scoring_entries(b as usize, &mut keys, &mut values);
        } else {
            ids.push(b);
            w.scoring_row(b as usize, &mut values);
        }
    }
    let (rows, entries) = if w.is_sparse() {
        let e = pb::Entries {
            stride,
            keys: Vec::new(),
            key_gaps: into_gaps(keys),
            values,
            count: 0,
            prune_at_or_below: pruned_at,
            rows: pruned_at.map_or_else(Vec::new, |_| buckets.to_vec()),
        };
        (None, Some(e))
    } else {
        (
            Some(pb::Rows {
                stride,
                rows: ids,
                values,
            }),
            None,
        )
    };
    PbState::Linear(pb::LinearState {
        rows,
        entries,
        scale: w.scale(),
        bsum: w.bsum(),
        steps: w.steps(),
        averaged,
        adagrad: false,
        mirrored,
    })
}

/// The delta that sets `buckets` (ascending) to their rows in `m`, and
/// the members' changes `members` to their values, with every
/// scalar of `m`; `pruned_at`: the budget dropped the sparse weights at
/// or below it since the version before (a replica replays it, and the
/// rows of `buckets` are then replaced whole).
pub(super) fn delta_of_changes(
    m: &Model,
    buckets: &[u32],
    members: &Members,
    pruned_at: Option<f32>,
) -> pb::ModelState {
    let state = match &m.state {
        State::Linear(w) => linear_rows(w, buckets, pruned_at),
        State::NaiveBayes(nb) => PbState::NaiveBayes(nb_rows(nb, buckets)),
    };
    pb::ModelState {
        task: match m.task() {
            None => String::new(),
            Some(Task::SingleLabel) => "single-label".into(),
            Some(Task::MultiLabel) => "multi-label".into(),
        },
        labels: m.labels().names().to_vec(),
        version: m.version(),
        state: Some(state),
        sketch: Vec::new(),
        sketch_offered: m.sketch().offered(),
        personal_switch: None,
        stack: m.stack().map(stack_to_pb),
        fusion: m.fusion.as_ref().map(|f| pb::FusionState {
            naive_bayes: Some(nb_rows(&f.nb, buckets)),
            weight: f.weight,
            sum_sq: f.sum_sq,
        }),
        members: (m.added().iter())
            .map(|(i, a)| member_to_pb(a, members.0[i].clone(), a.values_of(&members.0[i])))
            .collect(),
        doc_freq: m.doc_freq().map(|d| pb::DocFreq {
            docs: d.docs,
            buckets: buckets.to_vec(),
            counts: buckets.iter().map(|&b| m.doc_count(b)).collect(),
        }),
        ..pb::ModelState::default()
    }
}

/// Ascending keys as gaps (`Entries.key_gaps`): the first, then each
/// one's difference from the one before, in place.
pub(super) fn into_gaps(mut keys: Vec<u64>) -> Vec<u64> {
    for i in (1..keys.len()).rev() {
        // The keys ascend (buckets in order, a bucket's classes in
        // order): no difference wraps. Were one to, the replica's sum
        // would overflow, and it refuses the delta.
        keys[i] = keys[i].wrapping_sub(keys[i - 1]);
    }
    keys
}

/// Naive Bayes counts of `buckets` (those in its range), with its scalars.
fn nb_rows(nb: &NaiveBayes, buckets: &[u32]) -> pb::NaiveBayesState {
    let k = nb.classes;
    let inside: Vec<u32> = buckets.iter().copied().filter(|&b| (b as usize) < nb.buckets).collect();
    let rows = |buf: &[f32], stride: usize| pb::Rows {
        stride: stride as u32,
        rows: inside.clone(),
        values: inside
            .iter()
            .flat_map(|&b| buf[b as usize * stride..(b as usize + 1) * stride].iter().copied())
            .collect(),
    };
    let multilabel = !nb.totals.is_empty();
    pb::NaiveBayesState {
        counts: Some(rows(&nb.counts, k)),
        totals: multilabel.then(|| rows(&nb.totals, 1)),
        class_mass: nb.class_mass.clone(),
        class_docs: nb.class_docs.clone(),
        docs: nb.docs,
        mass: nb.mass,
        vocabulary: nb.vocabulary,
        multilabel,
    }
}
