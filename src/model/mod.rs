//! The online learners and the model that wraps them.
//!
//! A [`Model`] holds the hyperparameters ([`Hyper`], validated once), the
//! label set discovered from the stream, the learned state (linear weights
//! or naive Bayes counts), and a bounded sketch of feature names for
//! `inspect`. Learners: perceptron, logistic regression and hinge share the
//! linear machinery (lazy L2, lazy averaging, learning-rate schedules) and
//! differ only in their gradient (one file each); naive Bayes keeps counts.
//! Multi-label tasks run one binary learner per label (one-vs-rest) in the
//! same buffers.

mod arow;
mod doc_counts;
mod explain;
pub mod fusion;
mod hinge;
mod hyper;
mod lesson;
mod limits;
mod logistic;
pub mod member;
mod naive_bayes;
mod perceptron;
pub mod sketch;
pub mod stack;
mod step;
pub mod weights;

use foldhash::HashMap;

pub use hyper::{Hyper, HyperChoice, Learner, Schedule};
pub use lesson::{Few, Lesson};
pub use limits::Limits;
pub use logistic::{sigmoid, softmax};
pub use naive_bayes::NaiveBayes;
pub use sketch::NameSketch;
pub use step::SOFTMAX_CUTOFF;
pub use weights::Weights;

use crate::features::{DocFreq, FeatureConfig, SparseVec};

/// Single-label (one class per example) or multi-label (a set per example).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Task {
    SingleLabel,
    MultiLabel,
}

/// Why the model refused an example or a configuration.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("invalid hyperparameter: {0}")]
    Hyper(String),
    #[error("this model is single-label, but the example has {0} labels")]
    NotSingleLabel(usize),
    #[error("too many classes: the cap is {0} (--max-classes)")]
    TooManyClasses(usize),
    #[error("a class more would take naive Bayes' counts past --model-memory ({budget} bytes at {classes} classes)")]
    OverBudget { classes: usize, budget: usize },
}

/// The label set, in discovery order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Labels {
    names: Vec<String>,
    index: HashMap<String, usize>,
}

impl Labels {
    pub fn get(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
    pub fn name(&self, id: usize) -> &str {
        &self.names[id]
    }
    pub fn names(&self) -> &[String] {
        &self.names
    }
    pub fn len(&self) -> usize {
        self.names.len()
    }
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
    fn push(&mut self, name: &str) -> usize {
        let id = self.names.len();
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), id);
        id
    }
    pub fn from_names(names: Vec<String>) -> Self {
        let index = names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect();
        Labels { names, index }
    }
}

/// The learned state.
#[derive(Clone, Debug, PartialEq)]
pub enum State {
    Linear(Weights),
    NaiveBayes(NaiveBayes),
}

/// A prediction: a score per class (probabilities where the model has
/// them) and the predicted classes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scored {
    pub scores: Vec<f32>,
    /// The raw scores (margins or log-odds) before any probability
    /// transform: ranking by them avoids the ties of saturated probabilities.
    pub raw: Vec<f32>,
    pub labels: Vec<usize>,
    /// Whether `scores` are probabilities.
    pub probabilities: bool,
    /// The fused naive Bayes's part of the raw scores (its inputs), when
    /// the model fuses one: what learning this example from these scores
    /// needs besides them.
    pub fused: Option<[f32; 2]>,
    /// What the stack combined into `raw` (binary linear models): what
    /// learning needs besides the served scores.
    pub stacked: Option<Stacked>,
}

/// The margins of the stack's members that are not the model's own
/// scores: the personal copies', and each added member's (when it scored
/// the message), by registry index.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Margins {
    pub copies: f32,
    pub added: [Option<f32>; member::ADDED],
}

/// A binary linear model's prediction before its stack: the model's own
/// raw scores (linear, fused naive Bayes and personal copies, what its
/// step and the label weighing read), the members' log-odds, and each
/// added member's margin when it scored the message (what its step reads).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stacked {
    pub own: [f32; 2],
    pub inputs: stack::Inputs,
    pub added: [Option<f32>; member::ADDED],
}

#[cfg(test)]
impl Model {
    /// A logistic model of `2^bits` buckets at the personal scale `scale`.
    pub(crate) fn with_personal(bits: u8, scale: f32) -> Model {
        let features = FeatureConfig {
            bits,
            personal_scale: scale,
            ..FeatureConfig::default()
        };
        Model::new(Hyper::defaults(Learner::Logistic), features)
    }
}

impl Scored {
    /// The model's own raw scores: `raw` before the stack combined its
    /// members (what learning steps from and the label weighing reads).
    pub fn own_raw(&self) -> &[f32] {
        self.stacked.as_ref().map_or(self.raw.as_slice(), |s| &s.own[..])
    }
}

/// Most classes a model may discover by default (`--max-classes`): a guard
/// against a label field that carries ids by mistake, or an attacker's
/// stream of new labels.
pub const MAX_CLASSES: usize = 4096;

/// What a model is, without scratch or limits: what a checkpoint and a
/// full version hold, and what [`Model::from_parts`] builds a model from.
#[derive(Debug)]
pub(crate) struct ModelParts {
    pub(crate) choice: HyperChoice,
    pub(crate) features: FeatureConfig,
    pub(crate) task: Option<Task>,
    pub(crate) labels: Labels,
    pub(crate) state: State,
    pub(crate) version: u64,
    pub(crate) sketch: NameSketch,
    pub(crate) doc_freq: Option<DocFreq>,
    pub(crate) fusion: Option<fusion::Fusion>,
    /// The stack's added members (`member`).
    pub(crate) added: member::Members,
    /// The stack of a binary linear model (None: naive Bayes, more than
    /// two classes, multi-label).
    pub(crate) stack: Option<stack::Stack>,
}

/// An online classifier: hyperparameters, labels, learned state.
#[derive(Clone, Debug)]
pub struct Model {
    /// The hyperparameters for each kind of task.
    pub(crate) choice: HyperChoice,
    /// Those in force: `choice.single` until the task is known multi-label.
    pub(crate) hyper: Hyper,
    pub(crate) features: FeatureConfig,
    /// Decided by the first labeled example.
    pub(crate) task: Option<Task>,
    pub(crate) labels: Labels,
    pub(crate) state: State,
    /// Examples learned so far: the model version published with predictions.
    pub(crate) version: u64,
    /// Frequent buckets and their feature strings, for `inspect`.
    pub(crate) sketch: NameSketch,
    /// Document frequencies for IDF weighting (when the features use it).
    pub(crate) doc_freq: Option<DocFreq>,
    /// Scratch: raw scores while learning.
    scratch: Vec<f32>,
    /// Scratch: gradient per class.
    grad: Vec<f32>,
    /// Scratch: gold membership per class (multi-label).
    gold_mask: Vec<bool>,
    /// Scratch: the classes a step moves, with their gradients.
    active: Vec<(usize, f32)>,
    /// Memory and class bounds.
    limits: Limits,
    /// Naive Bayes on the words, fused into a binary task's raw scores.
    pub(crate) fusion: Option<fusion::Fusion>,
    /// The stack's added members over the document's head (`member`:
    /// the pipeline adds them as their flags say).
    pub(crate) added: member::Members,
    /// How the members combine into a binary margin (linear learners
    /// while the task may be binary).
    pub(crate) stack: Option<stack::Stack>,
    /// A learner that publishes: the buckets learned since the changes were
    /// last taken (a bit each), see [`Model::take_changes`].
    changed: Option<Vec<u64>>,
}

impl Model {
    /// `choice` and `features` must have been validated.
    pub fn new(choice: impl Into<HyperChoice>, features: FeatureConfig) -> Self {
        let choice = choice.into();
        let mut state = Self::empty_state(&choice.single, &features, false);
        // A linear model's rows carry the document counts from the start.
        let doc_freq = features.idf.then(|| match &mut state {
            State::Linear(w) => {
                w.carry_counts();
                DocFreq::in_rows()
            }
            State::NaiveBayes(_) => DocFreq::new(features.buckets()),
        });
        let fusion = Self::new_fusion(&choice.single, &features);
        let stack = (choice.single.learner != Learner::NaiveBayes).then(stack::Stack::default);
        Model::from_parts(ModelParts {
            choice,
            features,
            task: None,
            labels: Labels::default(),
            state,
            version: 0,
            sketch: NameSketch::default(),
            doc_freq,
            fusion,
            added: member::Members::default(),
            stack,
        })
    }

    /// A copy that scores as this model does, without what only learning
    /// needs (AdaGrad's sums: [`Weights::scoring_copy`]; the changed
    /// buckets; scratch): for copies that only predict, never learn
    /// (the HTTP endpoint's copies of the model).
    pub fn scoring_copy(&self) -> Model {
        let state = match &self.state {
            State::Linear(w) => State::Linear(w.scoring_copy()),
            State::NaiveBayes(nb) => State::NaiveBayes(nb.clone()),
        };
        let mut copy = Model::from_parts(ModelParts {
            choice: self.choice.clone(),
            features: self.features,
            task: self.task,
            labels: self.labels.clone(),
            state,
            version: self.version,
            sketch: self.sketch.clone(),
            doc_freq: self.doc_freq.clone(),
            fusion: self.fusion.clone(),
            added: self.added.scoring_copy(),
            stack: self.stack,
        });
        copy.limits = self.limits;
        copy
    }

    /// A fresh fusion, when the hyperparameters ask for one and the
    /// features keep the word view apart.
    fn new_fusion(hyper: &Hyper, features: &FeatureConfig) -> Option<fusion::Fusion> {
        let on = hyper.fusion && features.split_views && hyper.learner != Learner::NaiveBayes;
        on.then(|| {
            fusion::Fusion::new(
                features.words_end(),
                crate::features::bias_bucket(features),
                hyper.fusion_alpha,
            )
        })
    }

    fn empty_state(hyper: &Hyper, features: &FeatureConfig, multilabel: bool) -> State {
        let buckets = features.buckets();
        match hyper.learner {
            Learner::NaiveBayes => State::NaiveBayes(NaiveBayes::new(buckets, multilabel)),
            _ => State::Linear(Weights::new(
                buckets,
                0,
                hyper.average,
                matches!(hyper.schedule, Schedule::AdaGrad | Schedule::Arow),
            )),
        }
    }

    /// The one place a model is built: from its parts (a new model's, a
    /// copy's, a checkpoint's), with no scratch, no changes tracked and
    /// the default limits; the hyperparameters in force are the task's.
    pub(crate) fn from_parts(p: ModelParts) -> Self {
        let hyper = p.choice.for_task(p.task.unwrap_or(Task::SingleLabel)).clone();
        let mut model = Model {
            choice: p.choice,
            hyper,
            features: p.features,
            task: p.task,
            labels: p.labels,
            state: p.state,
            version: p.version,
            sketch: p.sketch,
            doc_freq: p.doc_freq,
            scratch: Vec::new(),
            grad: Vec::new(),
            gold_mask: Vec::new(),
            active: Vec::new(),
            limits: Limits::default(),
            fusion: p.fusion,
            added: p.added,
            stack: p.stack,
            changed: None,
        };
        model.settle_counts();
        model
    }

    /// The memory and class bounds it is held to.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Sets the memory and class bounds: weights over the memory become
    /// sparse or are pruned to it.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
        if let State::Linear(w) = &mut self.state {
            w.set_budget(limits.memory);
        }
        // Rows made sparse give their document counts back.
        self.settle_counts();
    }

    /// Weights dropped to stay within the memory budget since this
    /// process started.
    pub fn pruned_weights(&self) -> u64 {
        match &self.state {
            State::Linear(w) => w.sparse().map_or(0, |s| s.pruned()),
            State::NaiveBayes(_) => 0,
        }
    }

    /// Bytes the weights or counts hold.
    pub fn state_bytes(&self) -> usize {
        let fused = self.fusion.as_ref().map_or(0, fusion::Fusion::bytes);
        fused
            + self.added.bytes()
            + match &self.state {
                State::Linear(w) => w.bytes(),
                State::NaiveBayes(nb) => (nb.counts.len() + nb.totals.len()) * 4,
            }
    }

    /// From now on, notes the buckets whose rows learning changes (the
    /// weights', the fused naive Bayes counts', the document
    /// frequencies'), so that a publisher can send those rows alone.
    pub fn track_changes(&mut self) {
        if self.changed.is_none() {
            self.changed = Some(vec![0; self.features.buckets().div_ceil(64)]);
        }
        for (_, m) in self.added.iter_mut() {
            m.track_changes();
        }
    }

    /// The buckets changed since the last call (ascending), and a clean
    /// slate; `None` when changes are not tracked.
    pub fn take_changes(&mut self) -> Option<Vec<u32>> {
        let bits = self.changed.as_mut()?;
        Some(drain_bits(bits))
    }

    /// The slots each added member's learning changed since the last
    /// call (ascending), and a clean slate, by registry index; none for a
    /// member not held, or when changes are not tracked.
    pub fn take_added_changes(&mut self) -> [Option<Vec<u32>>; member::ADDED] {
        std::array::from_fn(|i| self.added.get_mut(i)?.take_changes())
    }

    /// How the members combine into a binary margin; none in a naive
    /// Bayes model, past two classes or on a multi-label task.
    pub fn stack(&self) -> Option<&stack::Stack> {
        self.stack.as_ref()
    }

    /// The stack's added members it holds.
    pub fn added(&self) -> &member::Members {
        &self.added
    }

    /// Whether the model can take a member of its stack besides its own:
    /// a linear learner on a task not known to be multi-label, with at
    /// most two classes.
    fn takes_members(&self) -> bool {
        matches!(self.state, State::Linear(_)) && self.task != Some(Task::MultiLabel) && self.labels.len() <= 2
    }

    /// Adds added member `i` of the registry (nothing learned) when the
    /// model can take one: a linear learner on a task not known to be
    /// multi-label, with at most two classes. Returns whether the model
    /// has it now.
    pub fn add_member(&mut self, i: usize) -> bool {
        if self.added.get(i).is_none()
            && self.takes_members()
            && let Some(entry) = member::REGISTRY.get(i)
        {
            let mut m = (entry.make)();
            if self.changed.is_some() {
                m.track_changes();
            }
            self.added.set(i, m);
        }
        self.added.get(i).is_some()
    }

    /// The highest `|v|` at or below which the memory budget dropped
    /// weights since the last call (`None`: none were dropped), for a
    /// delta to carry: a replica replays it.
    pub fn take_pruned_at(&mut self) -> Option<f32> {
        match &mut self.state {
            State::Linear(w) => w.take_pruned_at(),
            State::NaiveBayes(_) => None,
        }
    }

    /// Notes `buckets` as changed, when changes are tracked.
    pub(super) fn mark(&mut self, buckets: impl Iterator<Item = u32>) {
        if let Some(bits) = &mut self.changed {
            for b in buckets {
                if let Some(word) = bits.get_mut(b as usize / 64) {
                    *word |= 1 << (b % 64);
                }
            }
        }
    }

    /// The hyperparameters in force.
    pub fn hyper(&self) -> &Hyper {
        &self.hyper
    }

    /// The hyperparameters for each kind of task.
    pub fn choice(&self) -> &HyperChoice {
        &self.choice
    }
    pub fn features(&self) -> &FeatureConfig {
        &self.features
    }
    pub fn task(&self) -> Option<Task> {
        self.task
    }
    pub fn labels(&self) -> &Labels {
        &self.labels
    }
    pub fn version(&self) -> u64 {
        self.version
    }
    pub fn sketch(&self) -> &NameSketch {
        &self.sketch
    }
    pub fn sketch_mut(&mut self) -> &mut NameSketch {
        &mut self.sketch
    }
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Fixes the task on the first labeled example; later examples must agree
    /// (a single-label example in a multi-label model is a set of one).
    pub fn ensure_task(&mut self, task: Task) -> Task {
        match self.task {
            Some(t) => t,
            None => {
                if task == Task::MultiLabel {
                    // No classes exist yet: the task comes with the first label.
                    self.release_counts();
                    self.hyper = self.choice.multi.clone();
                    self.state = Self::empty_state(&self.hyper, &self.features, true);
                    self.set_limits(self.limits);
                    self.fusion = None;
                    self.added.clear();
                    self.stack = None;
                }
                self.task = Some(task);
                task
            }
        }
    }

    /// The id of label `name`, adding a class if it is new.
    pub fn intern(&mut self, name: &str) -> Result<usize, ModelError> {
        if let Some(id) = self.labels.get(name) {
            return Ok(id);
        }
        let k = self.labels.len();
        if k >= self.limits.max_classes {
            return Err(ModelError::TooManyClasses(self.limits.max_classes));
        }
        self.add_state_class(k)?;
        // Rows made sparse for the class give their document counts back.
        self.settle_counts();
        Ok(self.labels.push(name))
    }

    /// Room for class `k` in the learned state (and the fusion's).
    fn add_state_class(&mut self, k: usize) -> Result<(), ModelError> {
        match &mut self.state {
            // Two classes of a single-label task move as a mirrored pair.
            State::Linear(w) if self.task == Some(Task::SingleLabel) => {
                if let Some(f) = &mut self.fusion
                    && !f.add_class()
                {
                    tracing::info!("a third class: naive Bayes fusion (for binary tasks) is off from here");
                    self.fusion = None;
                }
                if k >= 2 {
                    for member in self.added.clear() {
                        tracing::info!(
                            member,
                            "a third class: this member of the stack (for binary tasks) is off from here"
                        );
                    }
                    self.stack = None;
                }
                w.add_class_mirrored()
            }
            State::Linear(w) => w.add_class(),
            State::NaiveBayes(nb) => {
                // Dense counts: a class costs a float per bucket.
                let bytes = (k + 1 + !nb.totals.is_empty() as usize).saturating_mul(nb.buckets * 4);
                if bytes > self.limits.memory {
                    return Err(ModelError::OverBudget {
                        classes: k,
                        budget: self.limits.memory,
                    });
                }
                nb.add_class()
            }
        }
        Ok(())
    }

    /// Hints the CPU to fetch `bucket`'s weights and fused counts (see
    /// [`Model::weigh_idf`]).
    #[inline(always)]
    pub fn prefetch_row(&self, bucket: u32) {
        match &self.state {
            State::Linear(w) => w.prefetch_row(bucket),
            State::NaiveBayes(nb) => crate::features::prefetch(&nb.counts, bucket as usize * nb.classes),
        }
        if let Some(f) = &self.fusion {
            f.prefetch_row(bucket);
        }
    }

    /// Raw scores (averaged weights where averaging is on) into
    /// `out.raw`, with the fusion's inputs in `out.fused`; a binary model
    /// with a stack serves its members' combination, and keeps what it
    /// combined in `out.stacked`.
    fn raw_scores(&self, x: &SparseVec, out: &mut Scored) {
        let k = self.labels.len();
        let raw = &mut out.raw;
        raw.clear();
        raw.resize(k, 0.0);
        (out.fused, out.stacked) = (None, None);
        if k == 0 {
            return;
        }
        match &self.state {
            State::Linear(w) => w.scores_averaged(x, raw),
            State::NaiveBayes(nb) => nb.scores(x, self.hyper.nb_alpha, raw),
        }
        if let Some(f) = &self.fusion {
            let inputs = f.inputs(x);
            f.add(inputs, raw);
            out.fused = Some(inputs);
        }
        if let (Some(stack), 2) = (&self.stack, k) {
            let (r0, r1) = (out.raw[0], out.raw[1]);
            let margins = Margins {
                copies: self.copies_margin(x),
                added: self.added.margins(x),
            };
            let inputs = self.stack_inputs(r1 - r0, out.fused, margins);
            // A mirrored pair, as the linear scores of a binary task are.
            let half = stack.margin(&inputs) / 2.0;
            (out.raw[0], out.raw[1]) = (-half, half);
            out.stacked = Some(Stacked {
                own: [r0, r1],
                inputs,
                added: margins.added,
            });
        }
    }

    /// The members' log-odds, from the model's own binary margin `own`
    /// (linear, fused naive Bayes and copies), the fusion's inputs
    /// `fused` and the other members' margins.
    fn stack_inputs(&self, own: f32, fused: Option<[f32; 2]>, m: Margins) -> stack::Inputs {
        let d = fused.map_or(0.0, |f| f[1] - f[0]);
        let fused = self.fusion.as_ref().map_or(0.0, |f| f.weight * d);
        let mut inputs = stack::Inputs::default();
        inputs.0[..stack::Member::OWN].copy_from_slice(&[own - fused - m.copies, m.copies, d]);
        for (i, margin) in m.added.iter().enumerate() {
            inputs.0[stack::Member::added(i).index()] = margin.unwrap_or(0.0);
        }
        inputs
    }

    /// The margin of class 1 that `x`'s personal copies add (0 without
    /// copies, or for a model that is not binary linear).
    fn copies_margin(&self, x: &SparseVec) -> f32 {
        let (State::Linear(w), Some(copies), 2) = (&self.state, x.personal_copies(), self.labels.len()) else {
            return 0.0;
        };
        let mut part = [0f32; 2];
        w.scores_averaged(&copies, &mut part);
        part[1] - part[0]
    }

    /// Scores every class and picks the predicted label(s).
    pub fn predict(&self, x: &SparseVec, out: &mut Scored) {
        self.raw_scores(x, out);
        out.scores.clear();
        out.scores.extend_from_slice(&out.raw);
        out.labels.clear();
        let k = out.scores.len();
        out.probabilities = self.hyper.learner.probabilistic();
        if k == 0 {
            return;
        }
        match self.task.unwrap_or(Task::SingleLabel) {
            // One class known: the evidence of its examples alone, never a
            // certainty (learning reads the raw scores, never these).
            Task::SingleLabel if k == 1 => {
                out.labels.push(0);
                let m = self.lone_margin();
                out.scores[0] = if out.probabilities { sigmoid(m) } else { m };
            }
            Task::SingleLabel => {
                out.labels.push(argmax(&out.raw));
                if out.probabilities {
                    softmax(&out.raw, &mut out.scores);
                }
            }
            Task::MultiLabel => {
                for (c, &s) in out.raw.iter().enumerate() {
                    if s > self.hyper.threshold {
                        out.labels.push(c);
                    }
                }
                if out.labels.is_empty() && self.hyper.at_least_one_label {
                    out.labels.push(argmax(&out.scores));
                }
                if out.probabilities {
                    for s in &mut out.scores {
                        *s = sigmoid(*s);
                    }
                }
            }
        }
    }

    /// Each class's margin, what an operator thresholds and what ranks a
    /// stream: on a single-label task, [`Model::positive_score`] (for a
    /// binary logistic model, the log-odds; positive only for the
    /// predicted class); on a multi-label task, its raw score (a label is
    /// predicted over `--threshold`).
    pub fn margins(&self, scored: &Scored, out: &mut Vec<f32>) {
        out.clear();
        let raw = &scored.raw;
        match self.task.unwrap_or(Task::SingleLabel) {
            Task::MultiLabel => out.extend_from_slice(raw),
            Task::SingleLabel => out.extend((0..raw.len()).map(|c| self.positive_score(scored, c))),
        }
    }

    /// The margin of the one class a single-label model knows, before it
    /// has learned another: the log-odds of Laplace's rule of succession
    /// after `n` examples all of that class, `ln(n + 1)` (`n`: examples
    /// learned). It grows with the evidence, slowly: 0.69 after one
    /// example, 4.9 after 133, never a certainty (docs/model.md).
    pub fn lone_margin(&self) -> f32 {
        (self.version as f32 + 1.0).ln()
    }

    /// The score of `positive` against the rest, for ROC curves of binary
    /// tasks: its raw margin over the best other class (monotone in its
    /// probability, without the ties of probabilities that round to 1);
    /// [`Model::lone_margin`] while it is the only class known.
    pub fn positive_score(&self, scored: &Scored, positive: usize) -> f32 {
        let Some(&p) = scored.raw.get(positive) else {
            return f32::NEG_INFINITY;
        };
        let other = scored
            .raw
            .iter()
            .enumerate()
            .filter(|&(c, _)| c != positive)
            .map(|(_, &s)| s)
            .fold(f32::NEG_INFINITY, f32::max);
        if other.is_finite() {
            p - other
        } else {
            self.lone_margin()
        }
    }
}

/// The positions of the set bits of `bits` (ascending), which it clears.
fn drain_bits(bits: &mut [u64]) -> Vec<u32> {
    let mut out = Vec::new();
    for (i, word) in bits.iter_mut().enumerate() {
        let mut w = std::mem::take(word);
        while w != 0 {
            out.push((i * 64) as u32 + w.trailing_zeros());
            w &= w - 1;
        }
    }
    out
}

/// Index of the largest value (the first on ties); 0 for an empty slice.
#[inline]
pub fn argmax(xs: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in xs.iter().enumerate() {
        if x > xs[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests;
