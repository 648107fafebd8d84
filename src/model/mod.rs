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

mod hinge;
mod logistic;
mod naive_bayes;
mod perceptron;
pub mod sketch;
pub mod weights;

use foldhash::HashMap;
use std::fmt;
use std::str::FromStr;

pub use logistic::{sigmoid, softmax};
pub use naive_bayes::NaiveBayes;
pub use sketch::NameSketch;
pub use weights::Weights;

use crate::features::{DocFreq, FeatureConfig, SparseVec};

/// Which learner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Learner {
    Perceptron,
    Logistic,
    Hinge,
    NaiveBayes,
}

impl Learner {
    pub fn as_str(self) -> &'static str {
        match self {
            Learner::Perceptron => "perceptron",
            Learner::Logistic => "logistic",
            Learner::Hinge => "hinge",
            Learner::NaiveBayes => "naive-bayes",
        }
    }

    /// Whether its scores are probabilities.
    pub fn probabilistic(self) -> bool {
        matches!(self, Learner::Logistic | Learner::NaiveBayes)
    }
}

impl fmt::Display for Learner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Learner {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "perceptron" => Ok(Learner::Perceptron),
            "logistic" | "logreg" => Ok(Learner::Logistic),
            "hinge" | "svm" => Ok(Learner::Hinge),
            "naive-bayes" | "nb" => Ok(Learner::NaiveBayes),
            other => Err(format!(
                "unknown model {other:?} (expected perceptron, logistic, hinge or naive-bayes)"
            )),
        }
    }
}

/// Learning-rate schedule of the linear learners.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// `eta`.
    Constant,
    /// `eta / t^power`.
    InvScaling,
    /// Per-coordinate `eta / (beta + sqrt(sum of squared gradients))`:
    /// AdaGrad, with FTRL-Proximal's beta so the first steps are not full-size.
    AdaGrad,
    /// AROW (Crammer, Kulesza and Dredze 2009), diagonal: a per-coordinate
    /// confidence that shrinks as a feature is seen, and a step just large
    /// enough for the margin. Hinge loss only.
    Arow,
}

impl Schedule {
    pub fn as_str(self) -> &'static str {
        match self {
            Schedule::Constant => "constant",
            Schedule::InvScaling => "inverse",
            Schedule::AdaGrad => "adagrad",
            Schedule::Arow => "arow",
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Schedule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "constant" => Ok(Schedule::Constant),
            "inverse" | "invscaling" => Ok(Schedule::InvScaling),
            "adagrad" => Ok(Schedule::AdaGrad),
            "arow" => Ok(Schedule::Arow),
            other => Err(format!(
                "unknown schedule {other:?} (expected constant, inverse, adagrad or arow)"
            )),
        }
    }
}

/// Hyperparameters, validated once; kept apart from the learned state.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Hyper {
    pub learner: Learner,
    /// Base learning rate (linear learners).
    pub learning_rate: f32,
    /// L2 strength: each step decays weights by `1 - rate * l2`.
    pub l2: f64,
    pub schedule: Schedule,
    /// Exponent of the inverse-scaling schedule.
    pub power: f64,
    /// AdaGrad's step is `rate * g / (beta + sqrt(sum g^2))`.
    pub adagrad_beta: f32,
    /// AROW's regularizer r: larger values make smaller, steadier steps.
    pub arow_r: f32,
    /// Predict with the lazily averaged weights.
    pub average: bool,
    /// Naive Bayes additive smoothing.
    pub nb_alpha: f32,
    /// Multi-label: predict the best label when none clears the threshold.
    pub at_least_one_label: bool,
    /// Multi-label: a label is predicted when its raw score (log-odds for
    /// logistic and naive Bayes, margin otherwise) exceeds this.
    pub threshold: f32,
}

impl From<Hyper> for HyperChoice {
    fn from(h: Hyper) -> Self {
        HyperChoice::same(h)
    }
}

impl Hyper {
    /// The defaults of each learner: the most accurate settings found on the
    /// shared streams (see the README's accuracy table).
    pub fn defaults(learner: Learner) -> Hyper {
        let base = Hyper {
            learner,
            learning_rate: 0.5,
            l2: 0.0,
            schedule: Schedule::AdaGrad,
            power: 0.5,
            adagrad_beta: 0.01,
            arow_r: 1.0,
            average: false,
            nb_alpha: 0.1,
            at_least_one_label: true,
            threshold: 0.0,
        };
        match learner {
            Learner::Logistic => Hyper { l2: 1e-5, ..base },
            Learner::Perceptron => Hyper {
                learning_rate: 1.0,
                schedule: Schedule::Constant,
                average: true,
                ..base
            },
            Learner::Hinge | Learner::NaiveBayes => base,
        }
    }

    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |what: &str, v: f64| Err(ModelError::Hyper(format!("{what} must be finite and >= 0, got {v}")));
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return Err(ModelError::Hyper(format!(
                "--learning-rate must be finite and > 0, got {}",
                self.learning_rate
            )));
        }
        if !(self.l2.is_finite() && self.l2 >= 0.0) {
            return bad("--l2", self.l2);
        }
        if !(self.power.is_finite() && self.power >= 0.0) {
            return bad("--power", self.power);
        }
        if !(self.adagrad_beta.is_finite() && self.adagrad_beta >= 0.0) {
            return bad("--adagrad-beta", self.adagrad_beta as f64);
        }
        if !self.threshold.is_finite() {
            return Err(ModelError::Hyper(format!(
                "--threshold must be finite, got {}",
                self.threshold
            )));
        }
        if !(self.arow_r.is_finite() && self.arow_r > 0.0) {
            return Err(ModelError::Hyper(format!(
                "--arow-r must be finite and > 0, got {}",
                self.arow_r
            )));
        }
        if self.schedule == Schedule::Arow && self.learner != Learner::Hinge {
            return Err(ModelError::Hyper(format!(
                "--schedule arow needs --model hinge, not {}",
                self.learner
            )));
        }
        if !(self.nb_alpha.is_finite() && self.nb_alpha > 0.0) {
            return Err(ModelError::Hyper(format!(
                "--nb-alpha must be finite and > 0, got {}",
                self.nb_alpha
            )));
        }
        Ok(())
    }
}

/// Hyperparameters for each kind of task: the model uses `single` on a
/// single-label stream and `multi` on a multi-label one (one-vs-rest),
/// decided by the first labeled example. `--model auto` (the default) picks
/// logistic regression for the first and hinge for the second, the most
/// accurate on the shared streams; naming a learner uses it for both.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HyperChoice {
    pub single: Hyper,
    pub multi: Hyper,
}

impl HyperChoice {
    /// The same hyperparameters for both kinds of task.
    pub fn same(h: Hyper) -> Self {
        HyperChoice {
            single: h.clone(),
            multi: h,
        }
    }

    pub fn validate(&self) -> Result<(), ModelError> {
        self.single.validate()?;
        self.multi.validate()
    }

    pub fn for_task(&self, task: Task) -> &Hyper {
        match task {
            Task::SingleLabel => &self.single,
            Task::MultiLabel => &self.multi,
        }
    }
}

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
    #[error("too many classes: the cap is {0}")]
    TooManyClasses(usize),
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
}

/// Most classes a model may discover: a guard against a label field that
/// carries ids by mistake (each class costs `2^bits` weights).
pub const MAX_CLASSES: usize = 4096;

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
}

impl Model {
    /// `choice` and `features` must have been validated.
    pub fn new(choice: impl Into<HyperChoice>, features: FeatureConfig) -> Self {
        let choice = choice.into();
        let hyper = choice.single.clone();
        let state = Self::empty_state(&hyper, &features, false);
        let doc_freq = features.idf.then(|| DocFreq::new(features.buckets()));
        Model {
            choice,
            hyper,
            features,
            task: None,
            labels: Labels::default(),
            state,
            version: 0,
            sketch: NameSketch::default(),
            doc_freq,
            scratch: Vec::new(),
            grad: Vec::new(),
            gold_mask: Vec::new(),
        }
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

    /// Rebuilds a model from checkpointed parts.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        choice: HyperChoice,
        features: FeatureConfig,
        task: Option<Task>,
        labels: Labels,
        state: State,
        version: u64,
        sketch: NameSketch,
        doc_freq: Option<DocFreq>,
    ) -> Self {
        let hyper = choice.for_task(task.unwrap_or(Task::SingleLabel)).clone();
        Model {
            choice,
            hyper,
            features,
            task,
            labels,
            state,
            version,
            sketch,
            doc_freq,
            scratch: Vec::new(),
            grad: Vec::new(),
            gold_mask: Vec::new(),
        }
    }

    /// Document frequencies, when the features are IDF-weighted.
    pub fn doc_freq(&self) -> Option<&DocFreq> {
        self.doc_freq.as_ref()
    }

    /// Counts a learned document's features (their buckets, without the
    /// bias) into the document frequencies.
    pub fn observe_doc(&mut self, buckets: &[u32]) {
        if let Some(d) = &mut self.doc_freq {
            d.observe(buckets);
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
                    self.hyper = self.choice.multi.clone();
                    self.state = Self::empty_state(&self.hyper, &self.features, true);
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
        if self.labels.len() >= MAX_CLASSES {
            return Err(ModelError::TooManyClasses(MAX_CLASSES));
        }
        match &mut self.state {
            // Two classes of a single-label task move as a mirrored pair.
            State::Linear(w) if self.task == Some(Task::SingleLabel) => w.add_class_mirrored(),
            State::Linear(w) => w.add_class(),
            State::NaiveBayes(nb) => nb.add_class(),
        }
        Ok(self.labels.push(name))
    }

    /// Hints the CPU to fetch `bucket`'s weights (see [`Featurizer::finalize_prefetching`]).
    ///
    /// [`Featurizer::finalize_prefetching`]: crate::features::Featurizer::finalize_prefetching
    #[inline(always)]
    pub fn prefetch_row(&self, bucket: u32) {
        match &self.state {
            State::Linear(w) => w.prefetch_row(bucket),
            State::NaiveBayes(nb) => crate::features::prefetch(&nb.counts, bucket as usize * nb.classes),
        }
    }

    /// Raw scores (averaged weights where averaging is on) into `out`.
    fn raw_scores(&self, x: &SparseVec, out: &mut Vec<f32>) {
        let k = self.labels.len();
        out.clear();
        out.resize(k, 0.0);
        if k == 0 {
            return;
        }
        match &self.state {
            State::Linear(w) => w.scores_averaged(x, out),
            State::NaiveBayes(nb) => nb.scores(x, self.hyper.nb_alpha, out),
        }
    }

    /// Scores every class and picks the predicted label(s).
    pub fn predict(&self, x: &SparseVec, out: &mut Scored) {
        self.raw_scores(x, &mut out.raw);
        out.scores.clear();
        out.scores.extend_from_slice(&out.raw);
        out.labels.clear();
        let k = out.scores.len();
        out.probabilities = self.hyper.learner.probabilistic();
        if k == 0 {
            return;
        }
        match self.task.unwrap_or(Task::SingleLabel) {
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

    /// The score of `positive` against the rest, for ROC curves of binary
    /// tasks: its raw margin over the best other class (monotone in its
    /// probability, without the ties of probabilities that round to 1).
    pub fn positive_score(scored: &Scored, positive: usize) -> f32 {
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
        if other.is_finite() { p - other } else { p }
    }

    /// Learns one example with gold classes `gold` (ids from [`Model::intern`]).
    pub fn learn(&mut self, x: &SparseVec, gold: &[usize]) -> Result<(), ModelError> {
        self.learn_scored(x, gold, None)
    }

    /// Like [`Model::learn`], reusing `raw`, the raw scores that
    /// [`Model::predict`] just computed for `x`, when they are the current
    /// weights' scores (no averaging, no class added since).
    pub fn learn_scored(&mut self, x: &SparseVec, gold: &[usize], raw: Option<&[f32]>) -> Result<(), ModelError> {
        let task = self.task.unwrap_or(Task::SingleLabel);
        if task == Task::SingleLabel && gold.len() != 1 {
            return Err(ModelError::NotSingleLabel(gold.len()));
        }
        let k = self.labels.len();
        self.version += 1;
        match &mut self.state {
            State::NaiveBayes(nb) => {
                nb.learn(x, gold);
                Ok(())
            }
            State::Linear(w) => {
                let h = &self.hyper;
                let t = w.steps() + 1;
                let eta = match h.schedule {
                    Schedule::Constant | Schedule::AdaGrad | Schedule::Arow => h.learning_rate as f64,
                    Schedule::InvScaling => h.learning_rate as f64 / (t as f64).powf(h.power),
                };
                w.begin_step(eta * h.l2);
                self.scratch.resize(k, 0.0);
                self.grad.resize(k, 0.0);
                match raw {
                    // Decay changes every score by the same factor.
                    Some(r) if r.len() == k && !w.averaged() => {
                        let f = (1.0 - eta * h.l2).max(0.0) as f32;
                        for (s, &r) in self.scratch.iter_mut().zip(r) {
                            *s = r * if h.l2 > 0.0 { f } else { 1.0 };
                        }
                    }
                    _ => w.scores(x, &mut self.scratch),
                }
                match task {
                    Task::SingleLabel => {
                        let g = gold[0];
                        match h.learner {
                            Learner::Perceptron => perceptron::multiclass_gradient(&self.scratch, g, &mut self.grad),
                            Learner::Hinge => hinge::multiclass_gradient(&self.scratch, g, &mut self.grad),
                            _ => logistic::multiclass_gradient(&self.scratch, g, &mut self.grad),
                        };
                    }
                    Task::MultiLabel => {
                        self.gold_mask.clear();
                        self.gold_mask.resize(k, false);
                        for &g in gold {
                            self.gold_mask[g] = true;
                        }
                        let (s, m, gr) = (&self.scratch, &self.gold_mask, &mut self.grad);
                        match h.learner {
                            Learner::Perceptron => perceptron::multilabel_gradient(s, m, gr),
                            Learner::Hinge => hinge::multilabel_gradient(s, m, gr),
                            _ => logistic::multilabel_gradient(s, m, gr),
                        };
                    }
                }
                let eta = eta as f32;
                if h.schedule == Schedule::Arow {
                    arow_step(w, x, &self.scratch, &mut self.grad, task, h.arow_r, &mut self.gold_mask);
                } else if h.schedule == Schedule::AdaGrad {
                    w.adagrad_step(x, &self.grad, eta, h.adagrad_beta);
                } else {
                    for (f, val) in x.iter() {
                        for (c, &g) in self.grad.iter().enumerate() {
                            if g != 0.0 {
                                w.add(f, c, eta * g * val);
                            }
                        }
                    }
                }
                w.end_step();
                Ok(())
            }
        }
    }

    /// The strongest features of class `class`: (bucket, weight), strongest first.
    pub fn top_features(&self, class: usize, n: usize) -> Vec<(u32, f32)> {
        let k = self.labels.len();
        let buckets = self.features.buckets() as u32;
        let mut all: Vec<(u32, f32)> = match &self.state {
            State::Linear(w) => (0..buckets).map(|b| (b, w.get_averaged(b, class))).collect(),
            State::NaiveBayes(nb) => {
                // Log-ratio of the class's smoothed rate to the best other class's.
                let a = self.hyper.nb_alpha;
                (0..buckets)
                    .map(|b| {
                        let row = &nb.counts[b as usize * k..b as usize * k + k];
                        let own = ((row[class] + a) as f64 / (nb.class_mass[class] + 1.0)).ln();
                        let other = (0..k)
                            .filter(|&c| c != class)
                            .map(|c| ((row[c] + a) as f64 / (nb.class_mass[c] + 1.0)).ln())
                            .fold(f64::NEG_INFINITY, f64::max);
                        let score = if other.is_finite() { own - other } else { own };
                        (
                            b,
                            if row.iter().all(|&c| c == 0.0) {
                                0.0
                            } else {
                                score as f32
                            },
                        )
                    })
                    .collect()
            }
        };
        all.retain(|&(_, w)| w != 0.0);
        all.sort_by(|a, b| b.1.total_cmp(&a.1));
        all.truncate(n);
        all
    }
}

/// One AROW step. `grad` holds +1/-1 on the classes the hinge loss moves
/// (see `hinge.rs`); on return it is overwritten (scratch). Single-label:
/// the gold and competitor rows move together by one step size from the
/// joint margin; multi-label: each label by its own.
fn arow_step(
    w: &mut Weights,
    x: &SparseVec,
    scores: &[f32],
    grad: &mut [f32],
    task: Task,
    r: f32,
    scratch: &mut Vec<bool>,
) {
    let k = grad.len();
    // Which classes move, and with which sign.
    scratch.clear();
    scratch.extend(grad.iter().map(|&g| g != 0.0));
    if !scratch.iter().any(|&m| m) {
        return;
    }
    let sign: Vec<f32> = grad.to_vec();
    // Confidence-weighted squared norm of x per class.
    let mut v = vec![0.0f32; k];
    for (f, val) in x.iter() {
        for c in 0..k {
            if scratch[c] {
                v[c] += val * val * w.variance(f, c);
            }
        }
    }
    // Step size per class: grad[c] := alpha_c * sign_c.
    match task {
        Task::SingleLabel => {
            let (mut s_gold, mut s_comp, mut total) = (0.0, 0.0, 0.0);
            for c in 0..k {
                if sign[c] > 0.0 {
                    s_gold = scores[c];
                } else if sign[c] < 0.0 {
                    s_comp = scores[c];
                }
                total += v[c];
            }
            let loss = (1.0 - (s_gold - s_comp)).max(0.0);
            let alpha = loss / (total + r);
            for c in 0..k {
                grad[c] = alpha * sign[c];
            }
        }
        Task::MultiLabel => {
            for c in 0..k {
                let loss = (1.0 - sign[c] * scores[c]).max(0.0);
                grad[c] = if scratch[c] { loss / (v[c] + r) * sign[c] } else { 0.0 };
            }
        }
    }
    let inv_r = 1.0 / r;
    for (f, val) in x.iter() {
        for c in 0..k {
            if scratch[c] {
                w.arow_add(f, c, grad[c] * val, val * val * inv_r);
            }
        }
    }
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
mod tests {
    use super::*;
    use crate::features::Featurizer;

    fn train(learner: Learner, data: &[(&str, &str)], passes: usize) -> (Model, Featurizer) {
        train_with(Hyper::defaults(learner), data, passes)
    }

    fn train_with(hyper: Hyper, data: &[(&str, &str)], passes: usize) -> (Model, Featurizer) {
        let cfg = FeatureConfig {
            bits: 16,
            char_ngrams: None,
            ..FeatureConfig::default()
        };
        let mut model = Model::new(hyper, cfg);
        let mut f = Featurizer::new(cfg);
        let mut x = SparseVec::default();
        for _ in 0..passes {
            for (text, label) in data {
                f.featurize(text, &mut x);
                model.ensure_task(Task::SingleLabel);
                let id = model.intern(label).unwrap();
                model.learn(&x, &[id]).unwrap();
            }
        }
        (model, f)
    }

    const DATA: &[(&str, &str)] = &[
        ("win cash now free prize", "spam"),
        ("are we meeting for lunch", "ham"),
        ("free entry win a prize call now", "spam"),
        ("see you at home tonight", "ham"),
        ("claim your free cash prize", "spam"),
        ("lunch tomorrow at noon?", "ham"),
        ("match report: arsenal win at home", "sport"),
        ("the league match ended in a draw", "sport"),
    ];

    #[test]
    fn every_learner_fits_a_small_separable_set() {
        for learner in [
            Learner::Perceptron,
            Learner::Logistic,
            Learner::Hinge,
            Learner::NaiveBayes,
        ] {
            let (model, mut f) = train(learner, DATA, 10);
            let mut x = SparseVec::default();
            let mut out = Scored::default();
            for (text, label) in DATA {
                f.featurize(text, &mut x);
                model.predict(&x, &mut out);
                assert_eq!(model.labels().name(out.labels[0]), *label, "{learner} on {text:?}");
            }
            if learner.probabilistic() {
                let sum: f32 = out.scores.iter().sum();
                assert!((sum - 1.0).abs() < 1e-4, "{learner} probabilities sum to {sum}");
            }
        }
    }

    /// Two classes of a single-label task are kept as a mirrored pair, for
    /// every linear learner and schedule, and fit as they do in two columns
    /// (the third class of `every_learner_fits_a_small_separable_set`
    /// splits the pair mid-stream); label sets keep a column per label.
    #[test]
    fn binary_models_keep_a_mirrored_pair() {
        let cfg = FeatureConfig {
            bits: 16,
            char_ngrams: None,
            ..FeatureConfig::default()
        };
        let binary = &DATA[..6];
        for (learner, schedule) in [
            (Learner::Perceptron, Schedule::Constant),
            (Learner::Logistic, Schedule::AdaGrad),
            (Learner::Logistic, Schedule::InvScaling),
            (Learner::Hinge, Schedule::AdaGrad),
            (Learner::Hinge, Schedule::Arow),
        ] {
            let hyper = Hyper {
                schedule,
                ..Hyper::defaults(learner)
            };
            let (model, mut f) = train_with(hyper, binary, 10);
            let mut x = SparseVec::default();
            let State::Linear(w) = model.state() else {
                panic!("linear")
            };
            assert!(w.mirrored(), "{learner} {schedule}");
            let mut out = Scored::default();
            for (text, label) in binary {
                f.featurize(text, &mut x);
                model.predict(&x, &mut out);
                assert_eq!(model.labels().name(out.labels[0]), *label, "{learner} {schedule}");
                assert_eq!(out.raw[0], -out.raw[1]);
            }
        }
        let mut model = Model::new(Hyper::defaults(Learner::Logistic), cfg);
        model.ensure_task(Task::MultiLabel);
        model.intern("a").unwrap();
        model.intern("b").unwrap();
        let State::Linear(w) = model.state() else {
            panic!("linear")
        };
        assert!(!w.mirrored(), "one-vs-rest labels move independently");
    }

    #[test]
    fn arow_and_the_other_schedules_fit_too() {
        for (learner, schedule) in [
            (Learner::Hinge, Schedule::Arow),
            (Learner::Logistic, Schedule::Constant),
            (Learner::Logistic, Schedule::InvScaling),
        ] {
            let hyper = Hyper {
                schedule,
                ..Hyper::defaults(learner)
            };
            hyper.validate().unwrap();
            let (model, mut f) = train_with(hyper, DATA, 10);
            let mut x = SparseVec::default();
            let mut out = Scored::default();
            for (text, label) in DATA {
                f.featurize(text, &mut x);
                model.predict(&x, &mut out);
                assert_eq!(model.labels().name(out.labels[0]), *label, "{learner} {schedule}");
            }
        }
        let bad = Hyper {
            schedule: Schedule::Arow,
            ..Hyper::defaults(Learner::Logistic)
        };
        assert!(bad.validate().is_err(), "AROW is for the hinge loss");
    }

    #[test]
    fn single_label_model_refuses_label_sets() {
        let mut model = Model::new(
            Hyper::defaults(Learner::Logistic),
            FeatureConfig {
                bits: 8,
                ..Default::default()
            },
        );
        model.ensure_task(Task::SingleLabel);
        let a = model.intern("a").unwrap();
        let b = model.intern("b").unwrap();
        assert_eq!(
            model.learn(&SparseVec::default(), &[a, b]),
            Err(ModelError::NotSingleLabel(2))
        );
    }

    #[test]
    fn multilabel_predicts_sets() {
        let cfg = FeatureConfig {
            bits: 16,
            char_ngrams: None,
            ..FeatureConfig::default()
        };
        for learner in [
            Learner::Perceptron,
            Learner::Logistic,
            Learner::Hinge,
            Learner::NaiveBayes,
        ] {
            let mut model = Model::new(Hyper::defaults(learner), cfg);
            model.ensure_task(Task::MultiLabel);
            let mut f = Featurizer::new(cfg);
            let mut x = SparseVec::default();
            let data: &[(&str, &[&str])] = &[
                ("wheat grain harvest", &["grain", "wheat"]),
                ("corn grain exports", &["grain", "corn"]),
                ("crude oil prices", &["crude"]),
                ("wheat exports fall", &["grain", "wheat"]),
                ("oil output cut", &["crude"]),
            ];
            for _ in 0..20 {
                for (text, labels) in data {
                    f.featurize(text, &mut x);
                    let ids: Vec<usize> = labels.iter().map(|l| model.intern(l).unwrap()).collect();
                    model.learn(&x, &ids).unwrap();
                }
            }
            let mut out = Scored::default();
            f.featurize("wheat grain harvest", &mut x);
            model.predict(&x, &mut out);
            let mut got: Vec<&str> = out.labels.iter().map(|&c| model.labels().name(c)).collect();
            got.sort();
            assert_eq!(got, ["grain", "wheat"], "{learner}");
        }
    }

    #[test]
    fn positive_score_orders_by_margin() {
        let s = Scored {
            scores: vec![1.0, 3.0],
            raw: vec![1.0, 3.0],
            labels: vec![1],
            probabilities: false,
        };
        assert_eq!(Model::positive_score(&s, 1), 2.0);
        assert_eq!(Model::positive_score(&s, 0), -2.0);
        // Probabilities that both round to 1 still rank by their margins.
        let a = Scored {
            scores: vec![0.0, 1.0],
            raw: vec![-30.0, 30.0],
            labels: vec![1],
            probabilities: true,
        };
        let b = Scored {
            scores: vec![0.0, 1.0],
            raw: vec![-40.0, 40.0],
            labels: vec![1],
            probabilities: true,
        };
        assert!(Model::positive_score(&b, 1) > Model::positive_score(&a, 1));
    }
}
