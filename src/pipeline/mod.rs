//! The one pipeline every transport drives: raw bytes -> parse -> features
//! -> model -> an [`Outcome`] for the transport to deliver.
//!
//! Labeled examples are predicted, counted (progressive evaluation) and then
//! learned. Unlabeled ones are predicted and returned for publishing. Late
//! feedback labels are joined by id through a bounded cache, learned, and
//! scored against the prediction that was published. Bad input becomes
//! [`Outcome::Bad`] with a reason from a bounded set; it never stops the
//! pipeline. Transports (JSON lines, Kafka) only move bytes and positions.

mod cache;
mod example;
mod explain;
mod noise;
mod outcome;
mod prepare;
mod review;
mod role;
mod settings;

use foldhash::HashMap;

pub use cache::{CacheEntry, FeedbackCache};
use example::Work;
pub use explain::Contribution;
pub use noise::LabelNoise;
pub use outcome::{Outcome, Prediction};
pub use prepare::{Prepared, Preparer};
pub use review::{Query, Review, ReviewConfig, Verdict};
pub use role::Role;
pub use settings::PipelineConfig;

use crate::eval::Progressive;
use crate::eval::drift::{DriftWatch, Watched};
use crate::features::SparseVec;
use crate::message::{self, Bad, BadReason, Gold, Message, Split};
use crate::model::{Model, ModelError, Task};

/// Counters of what the pipeline has done, by kind and outcome.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    pub learned: u64,
    pub predicted: u64,
    pub test_scored: u64,
    pub feedback_matched: u64,
    pub feedback_corrections: u64,
    pub feedback_unmatched: u64,
    pub skipped: u64,
    /// Messages left to another role (see [`Outcome::Passed`]).
    pub passed: u64,
    /// Non-zero features of every featurized message, summed.
    pub features: u64,
    /// Bad input by [`BadReason::index`].
    pub bad: [u64; BadReason::ALL.len()],
    /// Predictions marked uncertain, asked for (to review, or in
    /// `eval --label-budget`, to learn), and uncertain but over budget.
    pub uncertain: u64,
    pub reviewed: u64,
    pub review_over_budget: u64,
    /// `eval --label-budget`: labeled examples not asked for, so not learned.
    pub labels_declined: u64,
    /// `eval --feedback-noise`: labels the learner saw flipped.
    pub labels_flipped: u64,
    /// Predictions published, by label name.
    pub predicted_by_label: HashMap<String, u64>,
}

impl Counters {
    pub fn bad_total(&self) -> u64 {
        self.bad.iter().sum()
    }
}

/// The pipeline: model, features, metrics, join cache and counters.
#[derive(Debug)]
pub struct Pipeline {
    pub(crate) cfg: PipelineConfig,
    pub(crate) model: Model,
    /// The front stages, run by [`Pipeline::handle`]; its featurizer also
    /// featurizes cached texts for late labels and finishes every vector.
    prep: Preparer,
    /// Buffers for [`Pipeline::handle`]'s own [`Prepared`].
    spare: Prepared,
    /// Progressive (test-then-train) metrics of labeled examples.
    pub(crate) progressive: Progressive,
    /// Metrics of held-out test-split examples.
    pub(crate) test: Progressive,
    /// Published predictions judged by late feedback.
    pub(crate) published: Progressive,
    pub(crate) cache: FeedbackCache,
    pub(crate) counters: Counters,
    /// Drift tests on the progressive and published errors.
    drift: DriftWatch,
    /// The uncertainty review: which predictions to mark and ask about.
    review: Review,
    /// The buffers a message's stages pass along (see [`example`]),
    /// kept between messages only for their allocations.
    work: Work,
    /// The recent share of labels that contradicted a confident
    /// prediction (with `--contradiction-margin`; checkpointed).
    pub(crate) contradictions: f32,
}

impl Pipeline {
    pub fn new(mut model: Model, cfg: PipelineConfig) -> Self {
        model.set_limits(cfg.limits);
        let prep = Preparer::new(*model.features(), cfg.max_message_bytes);
        let progressive = Progressive::new(cfg.window, cfg.positive_label.clone());
        let test = Progressive::new(cfg.window, cfg.positive_label.clone());
        let published = Progressive::new(cfg.window, cfg.positive_label.clone());
        let review = Review::new(cfg.review);
        Pipeline {
            cfg,
            model,
            prep,
            spare: Prepared::default(),
            progressive,
            test,
            published,
            cache: FeedbackCache::default(),
            counters: Counters::default(),
            drift: DriftWatch::default(),
            review,
            work: Work::default(),
            contradictions: 0.0,
        }
    }

    /// Rebuilds a pipeline from checkpointed state.
    pub(crate) fn from_parts(
        model: Model,
        cfg: PipelineConfig,
        progressive: Progressive,
        test: Progressive,
        published: Progressive,
        cache: FeedbackCache,
        counters: Counters,
    ) -> Self {
        let mut p = Pipeline::new(model, cfg);
        p.progressive = progressive;
        p.test = test;
        p.published = published;
        p.cache = cache;
        p.counters = counters;
        p
    }

    pub fn model(&self) -> &Model {
        &self.model
    }
    pub fn config(&self) -> &PipelineConfig {
        &self.cfg
    }
    pub fn progressive(&self) -> &Progressive {
        &self.progressive
    }
    pub fn test_metrics(&self) -> &Progressive {
        &self.test
    }
    pub fn published(&self) -> &Progressive {
        &self.published
    }
    pub fn drift(&self) -> &DriftWatch {
        &self.drift
    }
    pub fn review(&self) -> &Review {
        &self.review
    }
    pub(crate) fn review_mut(&mut self) -> &mut Review {
        &mut self.review
    }
    pub fn cache(&self) -> &FeedbackCache {
        &self.cache
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// A front stage for this pipeline's model, to run apart (e.g. on a
    /// reader thread) and feed [`Pipeline::handle_prepared`].
    pub fn preparer(&self) -> Preparer {
        Preparer::new(*self.model.features(), self.cfg.max_message_bytes)
    }

    /// Handles one raw message. `default_id` names it when it has no "id"
    /// (its position in the source); `now_ms` is its event time.
    pub fn handle(&mut self, raw: &[u8], default_id: &dyn Fn() -> String, now_ms: u64) -> Outcome {
        let mut p = std::mem::take(&mut self.spare);
        p.clear();
        self.prep.prepare(raw, false, &mut p);
        let outcome = self.handle_prepared(&mut p, 0, default_id, now_ms);
        self.spare = p;
        outcome
    }

    /// Handles message `i` of those that a [`Preparer`] for this
    /// pipeline's model prepared into `p` (the message is taken from `p`;
    /// a message handled again, or out of range, counts as blank).
    pub fn handle_prepared(
        &mut self,
        p: &mut Prepared,
        i: usize,
        default_id: &dyn Fn() -> String,
        now_ms: u64,
    ) -> Outcome {
        let taken = p
            .messages
            .get_mut(i)
            .and_then(|m| Some((m.message.take()?, m.buckets.clone(), m.counted.clone())));
        let Some((message, buckets, counted)) = taken else {
            self.counters.skipped += 1;
            return Outcome::Skipped;
        };
        self.cache.expire(now_ms, self.cfg.cache_ttl_ms);
        let mut w = std::mem::take(&mut self.work);
        let outcome = match message {
            Err(bad) => Outcome::Bad(bad),
            Ok(Message::Feedback { .. }) if self.cfg.role == Role::Predictor => self.passed(),
            Ok(Message::Feedback { id, gold }) => self.feedback(&id, gold, &mut w),
            Ok(Message::Example { gold: Some(_), .. }) if self.cfg.role == Role::Predictor => self.passed(),
            Ok(Message::Example {
                id, text, gold: None, ..
            }) if self.cfg.role == Role::Learner => {
                let id = id.unwrap_or_else(default_id);
                self.keep_for_feedback(id, text, now_ms)
            }
            Ok(Message::Example { id, text, gold, split }) => {
                match counted {
                    Some(r) => w.features.set_counted(&p.counted.idx[r.clone()], &p.counted.val[r]),
                    None => self
                        .prep
                        .featurizer
                        .count_buckets(&p.buckets[buckets], &mut w.features.x),
                }
                let id = id.unwrap_or_else(default_id);
                match (gold, split) {
                    (Some(gold), Some(Split::Test)) => self.test_example(&text, gold, &mut w),
                    (Some(gold), split) => {
                        let keep = self.cfg.keep_train && split == Some(Split::Train);
                        self.train(id, text, gold, now_ms, keep, &mut w)
                    }
                    (None, _) => self.predict(id, text, now_ms, &mut w),
                }
            }
        };
        self.work = w;
        if let Outcome::Bad(b) = &outcome {
            self.counters.bad[b.reason.index()] += 1;
        }
        outcome
    }

    fn task_of(gold: &Gold) -> Task {
        match gold {
            Gold::One(_) => Task::SingleLabel,
            Gold::Set(_) => Task::MultiLabel,
        }
    }

    /// Interns gold labels (adding classes), fixing the task on the first ones.
    fn gold_ids(&mut self, gold: &Gold) -> Result<Vec<usize>, Bad> {
        // Callers ran `check_gold` first: the labels fit the task and the class cap.
        self.model.ensure_task(Self::task_of(gold));
        gold.as_slice()
            .iter()
            .map(|l| {
                self.model.intern(l).map_err(|e| match e {
                    ModelError::TooManyClasses(_) | ModelError::OverBudget { .. } => {
                        Bad::new(BadReason::TooManyClasses, e.to_string())
                    }
                    other => Bad::new(BadReason::BadLabel, other.to_string()),
                })
            })
            .collect()
    }

    /// Learns a labeled example; `keep` returns its raw features too.
    fn train(&mut self, id: String, text: String, gold: Gold, now_ms: u64, keep: bool, w: &mut Work) -> Outcome {
        // Check the labels before touching the model or the metrics.
        if let Err(bad) = self.check_gold(&gold) {
            return Outcome::Bad(bad);
        }
        let raw = self.finish(&text, true, keep, &mut w.features);
        let (predicted, score) = self.predict_features(&w.features, &mut w.scored);
        let ids = match self.gold_ids(&gold) {
            Ok(ids) => ids,
            Err(bad) => return Outcome::Bad(bad),
        };
        let gold_names = gold.as_slice();
        let correct = same_set(&predicted, gold_names);
        self.progressive.record(gold_names, &predicted, score);
        self.drift.observe(Watched::Progressive, !correct);
        if self.cfg.query_labels && !self.review_current(&w.scored, true).ask {
            self.counters.labels_declined += 1;
            return Outcome::Learned { correct, kept: None };
        }
        let (ids, gold_vec) = self.as_seen(ids, gold.into_vec());
        let weight = self.label_weight(&w.scored, &ids);
        self.learn_features(&w.features, &ids, Some(&w.scored), weight);
        self.counters.learned += 1;
        let kept = raw.map(|raw| (raw, gold_vec.clone()));
        self.cache.insert(
            id,
            CacheEntry {
                text,
                predicted: Some(predicted),
                score,
                gold: Some(gold_vec),
                at_ms: now_ms,
            },
            &self.cfg,
        );
        Outcome::Learned { correct, kept }
    }

    /// The labels the learner sees: the gold ones, or under
    /// `eval --feedback-noise` (single-label tasks), sometimes another class.
    fn as_seen(&mut self, ids: Vec<usize>, gold: Vec<String>) -> (Vec<usize>, Vec<String>) {
        let Some(noise) = self.cfg.label_noise else {
            return (ids, gold);
        };
        let [class] = ids[..] else {
            return (ids, gold);
        };
        let seen = noise.class(self.progressive.total().examples, class, self.model.labels().len());
        if seen == class {
            return (ids, gold);
        }
        self.counters.labels_flipped += 1;
        (vec![seen], vec![self.model.labels().name(seen).to_string()])
    }

    /// Whether `gold` fits the model's task (without changing anything).
    fn check_gold(&self, gold: &Gold) -> Result<(), Bad> {
        let task = self.model.task().unwrap_or(Self::task_of(gold));
        let n = gold.as_slice().len();
        if task == Task::SingleLabel && n != 1 {
            return Err(Bad::new(
                BadReason::BadLabel,
                format!("this model is single-label, but the message has {n} labels"),
            ));
        }
        let labels = self.model.labels();
        let new = gold.as_slice().iter().filter(|l| labels.get(l).is_none()).count();
        let cap = self.cfg.limits.max_classes;
        if labels.len() + new > cap {
            let detail = format!("a new label past the cap of {cap} classes (--max-classes)");
            return Err(Bad::new(BadReason::TooManyClasses, detail));
        }
        Ok(())
    }

    fn test_example(&mut self, text: &str, gold: Gold, w: &mut Work) -> Outcome {
        if let Err(bad) = self.check_gold(&gold) {
            return Outcome::Bad(bad);
        }
        let raw = self.finish(text, false, true, &mut w.features).unwrap_or_default();
        if self.cfg.defer_test {
            return Outcome::Test {
                deferred: Some((raw, gold.as_slice().to_vec())),
            };
        }
        self.model.ensure_task(Self::task_of(&gold));
        self.score_test(&raw, gold.as_slice());
        Outcome::Test { deferred: None }
    }

    /// Scores a held-out example (raw features, as [`Outcome::Test`] holds
    /// them) with the model as it stands.
    pub fn score_test(&mut self, raw: &SparseVec, gold: &[String]) {
        let mut w = std::mem::take(&mut self.work);
        w.features.set_raw(raw);
        self.finalize(&mut w.features);
        self.model.predict(&w.features.x, &mut w.scored);
        let predicted: Vec<&str> = w.scored.labels.iter().map(|&c| self.model.labels().name(c)).collect();
        let score = self.positive_score(&w.scored);
        self.test.record(gold, &predicted, score);
        self.counters.test_scored += 1;
        self.work = w;
    }

    /// Learns an example again (extra passes of `eval`, raw features as
    /// [`Outcome::Learned`] keeps them), without metrics or new document counts.
    pub fn relearn(&mut self, raw: &SparseVec, gold: &[String]) {
        let ids: Option<Vec<usize>> = gold.iter().map(|l| self.model.labels().get(l)).collect();
        if let Some(ids) = ids {
            let mut w = std::mem::take(&mut self.work);
            w.features.set_raw(raw);
            self.finalize(&mut w.features);
            let _ = self.model.learn(&w.features.x, &ids);
            self.work = w;
        }
    }

    fn predict(&mut self, id: String, text: String, now_ms: u64, w: &mut Work) -> Outcome {
        let (mut prediction, score) = self.prediction(id, &text, w);
        let verdict = self.review_current(&w.scored, self.cfg.review_output);
        prediction.uncertain = verdict.uncertain;
        prediction.review = verdict.ask.then(|| text.clone());
        for l in &prediction.labels {
            *self.counters.predicted_by_label.entry(l.clone()).or_default() += 1;
        }
        self.counters.predicted += 1;
        // A predictor's late labels go to the learner: nothing to join here.
        if self.cfg.role != Role::Predictor {
            let entry = CacheEntry {
                text,
                predicted: Some(prediction.labels.clone()),
                score,
                gold: None,
                at_ms: now_ms,
            };
            self.cache.insert(prediction.id.clone(), entry, &self.cfg);
        }
        Outcome::Predicted(prediction)
    }

    /// Counts bad input that never reached the pipeline whole (a line over
    /// the size cap, skipped by the reader), and hands it back for the
    /// dead-letter output.
    pub fn refuse(&mut self, bad: Bad) -> Bad {
        self.counters.bad[bad.reason.index()] += 1;
        bad
    }

    /// A message this role leaves to another.
    fn passed(&mut self) -> Outcome {
        self.counters.passed += 1;
        Outcome::Passed
    }

    /// A learner's unlabeled message: kept for its late label, not
    /// predicted (a replica predicts it); what was published for it is not
    /// known here.
    fn keep_for_feedback(&mut self, id: String, text: String, now_ms: u64) -> Outcome {
        let entry = CacheEntry {
            text,
            predicted: None,
            score: None,
            gold: None,
            at_ms: now_ms,
        };
        self.cache.insert(id, entry, &self.cfg);
        self.counters.passed += 1;
        Outcome::Passed
    }

    /// Replaces the model (a predictor's newer version), keeping the
    /// metrics and counters. The front stage follows the new model's
    /// features if they changed.
    pub fn replace_model(&mut self, mut model: Model) {
        model.set_limits(self.cfg.limits);
        if model.features() != self.model.features() {
            self.prep = Preparer::new(*model.features(), self.cfg.max_message_bytes);
        }
        self.model = model;
    }

    /// Predicts any message with text (labeled or not) without learning:
    /// the `predict` command. Feedback lines and bad input are refused.
    pub fn predict_only(&mut self, raw: &[u8], default_id: &dyn Fn() -> String) -> Result<Prediction, Bad> {
        match message::parse(raw, self.cfg.max_message_bytes)? {
            Message::Example { id, text, .. } => {
                let mut w = std::mem::take(&mut self.work);
                self.featurize(&text, &mut w.features);
                let prediction = self.prediction(id.unwrap_or_else(default_id), &text, &mut w).0;
                self.work = w;
                Ok(prediction)
            }
            Message::Feedback { .. } => Err(Bad::new(
                BadReason::MissingText,
                "a feedback label has no text to predict",
            )),
        }
    }

    fn feedback(&mut self, id: &str, gold: Gold, w: &mut Work) -> Outcome {
        if let Err(bad) = self.check_gold(&gold) {
            return Outcome::Bad(bad);
        }
        let Some(entry) = self.cache.get(id) else {
            self.counters.feedback_unmatched += 1;
            return Outcome::FeedbackUnmatched;
        };
        let text = entry.text.clone();
        let correction = entry.gold.is_some();
        let (predicted, score) = (entry.predicted.clone(), entry.score);
        let ids = match self.gold_ids(&gold) {
            Ok(ids) => ids,
            Err(bad) => return Outcome::Bad(bad),
        };
        let gold_names = gold.into_vec();
        let mut correct = None;
        if let (false, Some(predicted)) = (correction, &predicted) {
            self.published.record(&gold_names, predicted, score);
            correct = Some(same_set(predicted, &gold_names));
            self.drift.observe(Watched::Published, correct == Some(false));
        }
        self.featurize(&text, &mut w.features);
        self.finish(&text, true, false, &mut w.features);
        let weight = if self.cfg.contradiction_margin > 0.0 {
            self.model.predict(&w.features.x, &mut w.scored);
            self.label_weight(&w.scored, &ids)
        } else {
            1.0
        };
        self.learn_features(&w.features, &ids, None, weight);
        if let Some(e) = self.cache.get_mut(id) {
            e.gold = Some(gold_names);
        }
        self.counters.feedback_matched += 1;
        if correction {
            self.counters.feedback_corrections += 1;
        }
        Outcome::FeedbackMatched { correct, correction }
    }
}

fn same_set(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

#[cfg(test)]
mod tests;
