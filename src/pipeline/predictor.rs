//! Predicting, apart from learning: a [`Predictor`] holds what a
//! prediction needs and nothing else (the model, the front stage for its
//! features, the reported-message memory, the buffers a message passes
//! through). The learning [`super::Pipeline`] predicts through its own; the copies
//! that answer requests (`serving::copies`) are predictors made from it,
//! which also carry what the learner's other parts said when the copy was
//! made ([`Followed`]: the review's band, the positive class a late label's
//! score is of).
//!
//! A request is prepared apart (parsed and hashed by a [`Preparer`] of the
//! caller's, outside any lock) and answered by [`Predictor::answer`], which
//! hands back what the learning pipeline keeps of it for its late label
//! ([`Answered`]); the daemon's core hands that to
//! [`super::Pipeline::keep_answered`] before the next message or lesson.

use super::example::{Features, Work};
use super::reported::{Print, fingerprint, recalled};
use super::{Prepared, Preparer, Reported};
use crate::features::SparseVec;
use crate::message;
use crate::model::member::Reads;
use crate::model::{Limits, Model, Scored, Task};

/// What a binary prediction's score is of: whether the task is (so far)
/// binary and single-label, and its positive class (the progressive
/// metrics' own: `--positive-label`, else "spam", else the second label
/// seen).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Positive<'a> {
    pub(crate) binary: bool,
    pub(crate) class: Option<&'a str>,
}

/// What a copy answers with besides its model, as the learning pipeline
/// stood when the copy was made: the review's band (a request's
/// prediction is marked uncertain under it), and the positive class its
/// score is of (what its late label is scored against).
#[derive(Clone, Debug, Default)]
pub(crate) struct Followed {
    band: f64,
    reviews: bool,
    binary: bool,
    positive: Option<String>,
}

impl Followed {
    /// What a copy follows: the review's `band` (when the pipeline
    /// `reviews`) and the `positive` class.
    pub(super) fn new(band: f64, reviews: bool, positive: Positive<'_>) -> Self {
        Followed {
            band,
            reviews,
            binary: positive.binary,
            positive: positive.class.map(str::to_string),
        }
    }

    pub(super) fn positive(&self) -> Positive<'_> {
        Positive {
            binary: self.binary,
            class: self.positive.as_deref(),
        }
    }

    /// [`super::Review::is_uncertain`] with the followed band.
    pub(super) fn is_uncertain(&self, confidence: f32) -> bool {
        super::review::uncertain_under(self.band, self.reviews, confidence)
    }
}

/// The settings predicting reads.
#[derive(Clone, Debug)]
pub(super) struct Settings {
    /// Features explained in each prediction (`--explain`).
    pub(super) explain: usize,
    /// How a message is read (its bounds, the e-mail views).
    pub(super) reading: message::Reading,
    /// The model's memory and class bounds.
    pub(super) limits: Limits,
    /// Whether the reported-message memory is on (`--reported` > 0).
    pub(super) recalls: bool,
    /// Whether what a copy answers is kept for its late label (not on a
    /// predictor: its late labels go to the learner).
    pub(super) keeps: bool,
}

/// A model and what predicting with it needs (see the module's doc).
#[derive(Debug)]
pub struct Predictor {
    pub(super) model: Model,
    /// The front stage for the model's features; its featurizer also
    /// featurizes cached texts for late labels and finishes every vector.
    pub(super) prep: Preparer,
    /// Messages whose label contradicted the model, by fingerprint: a
    /// copy of them takes their label.
    pub(super) reported: Reported,
    /// The buffers a message's stages pass along (see `example`), kept
    /// between messages only for their allocations.
    pub(super) work: Work,
    /// Buffers for a message's own [`Prepared`].
    pub(super) spare: Prepared,
    pub(super) settings: Settings,
    /// A copy's view of the learner's other parts (default on the
    /// learner's own predictor, which reads its parts instead).
    pub(super) followed: Followed,
}

impl Predictor {
    /// A predictor of `model` under `cfg`, with no reported messages.
    pub(super) fn new(mut model: Model, cfg: &super::PipelineConfig) -> Self {
        model.set_limits(cfg.limits);
        Predictor {
            prep: Preparer::new(*model.features(), cfg.reading()),
            model,
            reported: Reported::default(),
            work: Work::default(),
            spare: Prepared::default(),
            settings: Settings {
                explain: cfg.explain,
                reading: cfg.reading(),
                limits: cfg.limits,
                recalls: cfg.trust.reported > 0,
                keeps: cfg.role.duties().learns,
            },
            followed: Followed::default(),
        }
    }

    /// A copy of this predictor, its model as a scoring copy, with no
    /// reported messages and following nothing yet (see
    /// [`super::Pipeline::serving_copy`]).
    pub(super) fn scoring_copy(&self, cfg: &super::PipelineConfig) -> Self {
        Predictor::new(self.model.scoring_copy(), cfg)
    }

    /// Answers as the learner does besides its model: `reported` (a vote
    /// is counted only with a label learned, so they change only with the
    /// model's version), and what it `followed` (the review's band, the
    /// positive class).
    pub(super) fn follow(&mut self, reported: &Reported, followed: Followed) {
        self.reported.clone_from(reported);
        self.followed = followed;
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The reported messages whose labels it recalls.
    pub fn reported(&self) -> &Reported {
        &self.reported
    }

    /// Replaces the model, and returns the one it replaced. The front
    /// stage follows the new model's features if they changed.
    pub(super) fn replace_model(&mut self, mut model: Model) -> Model {
        model.set_limits(self.settings.limits);
        if model.features() != self.model.features() {
            self.prep = Preparer::new(*model.features(), self.settings.reading);
        }
        std::mem::replace(&mut self.model, model)
    }

    /// A front stage for this model, to run apart.
    pub(super) fn preparer(&self) -> Preparer {
        Preparer::new(*self.model.features(), self.settings.reading)
    }

    /// `text`'s raw features into `f`.
    pub(super) fn featurize(&mut self, text: &str, f: &mut Features) {
        self.prep.featurizer.featurize_raw(text, &mut f.x);
    }

    /// Finishes `f`, which holds the raw features of `text`: the heads the
    /// added members read, then IDF, normalisation and the bias. Returns a
    /// copy of the raw features when `keep_raw`.
    pub(super) fn finish(&mut self, text: &str, keep_raw: bool, f: &mut Features) -> Option<SparseVec> {
        let (mut grams, mut bytes) = (false, 0);
        for (_, m) in self.model.added().iter() {
            match m.reads() {
                Reads::Grams => grams = true,
                Reads::Bytes(n) => bytes = bytes.max(n),
            }
        }
        if grams {
            self.prep.featurizer.head_grams(text, &mut f.x.head);
        } else {
            f.x.head.clear();
        }
        f.x.bytes.clear();
        f.x.bytes.extend_from_slice(&text.as_bytes()[..text.len().min(bytes)]);
        let raw = keep_raw.then(|| f.x.clone());
        self.finalize(f);
        raw
    }

    /// Completes `f` (raw features) in place with the model's IDF,
    /// normalisation and bias.
    pub(super) fn finalize(&self, f: &mut Features) {
        f.doc_len = f.x.len();
        // Copies of an earlier message's features are not this one's.
        f.x.personal = 0;
        let model = &self.model;
        self.prep.featurizer.finalize(&mut f.x, |x| model.weigh_idf(x));
        if let Some(user) = f.user {
            crate::features::personalize(&mut f.x, user, model.features());
        }
    }

    /// The key of `user`'s personal features in this model, if a user is named.
    pub(super) fn user_key(&self, user: Option<&str>) -> Option<u64> {
        user.map(|u| crate::features::user_key(self.model.features(), u))
    }

    /// The label names of `scored` and its score of the `positive` class.
    pub(super) fn named(&self, scored: &Scored, positive: Positive<'_>) -> (Vec<String>, Option<f32>) {
        let labels = scored
            .labels
            .iter()
            .map(|&c| self.model.labels().name(c).to_string())
            .collect();
        (labels, self.positive_score(scored, positive))
    }

    /// The `positive` class's score in `scored` (binary single-label tasks).
    pub(super) fn positive_score(&self, scored: &Scored, positive: Positive<'_>) -> Option<f32> {
        if !positive.binary || self.model.task() == Some(Task::MultiLabel) {
            return None;
        }
        match positive.class.and_then(|p| self.model.labels().get(p)) {
            Some(id) => Some(self.model.positive_score(scored, id)),
            // The model does not know the positive class yet: against the
            // one class it knows, the evidence of that class's examples;
            // before any, the neutral margin.
            None if self.model.labels().len() == 1 => Some(-self.model.lone_margin()),
            None => Some(0.0),
        }
    }

    /// Predicts finished features into `scored`, a reported copy of `text`
    /// taking its reported label; the label names and the positive score.
    pub(super) fn predict_recalled(
        &self,
        text: &str,
        f: &Features,
        scored: &mut Scored,
        positive: Positive<'_>,
    ) -> (Vec<String>, Option<f32>) {
        self.model.predict(&f.x, scored);
        if let Some(class) = self.recall(text, f.user) {
            recalled(scored, class);
        }
        self.named(scored, positive)
    }

    /// The fingerprints of `text` for the user of key `user` (if any),
    /// when the memory is on and `task` (the model's, or a labeled
    /// message's before the model knows one) is single-label.
    pub(super) fn report_fingerprint(&self, text: &str, task: Option<Task>, user: Option<u64>) -> Option<Print> {
        let on = self.settings.recalls && task == Some(Task::SingleLabel);
        on.then(|| Print::new(fingerprint(text), user))
    }

    /// What to publish and count for the message of fingerprints `fp`
    /// instead of the model's own `scored`, when a copy of it was reported
    /// (`scored` itself is left for learning).
    pub(super) fn recalled_named(
        &self,
        fp: Option<Print>,
        scored: &Scored,
        positive: Positive<'_>,
    ) -> Option<(Vec<String>, Option<f32>)> {
        let class = fp?.each().find_map(|p| self.reported.recall(p))?;
        let mut moved = scored.clone();
        recalled(&mut moved, class);
        Some(self.named(&moved, positive))
    }

    fn recall(&self, text: &str, user: Option<u64>) -> Option<usize> {
        if self.reported.is_empty() {
            return None;
        }
        let fp = self.report_fingerprint(text, self.model.task(), user)?;
        fp.each().find_map(|p| self.reported.recall(p))
    }
}
