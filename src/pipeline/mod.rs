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
mod corrections;
mod driver;
mod entry;
mod example;
mod labels;
mod ledger;
mod outcome;
mod prediction;
mod predictor;
mod prepare;
mod reported;
mod request;
mod review;
mod role;
mod settings;
mod trust;
mod weighing;

use foldhash::HashMap;

pub use cache::{CacheEntry, FeedbackCache, Held, Packed, Taught};
pub use driver::{Daemon, Driver};
pub use entry::{Entry, Raw};
#[cfg(test)]
pub(crate) use example::PERSONAL_AFTER;
use example::Work;
use labels::Labeled;
pub use ledger::Ledger;
pub use outcome::{Contribution, Outcome, Prediction};
use predictor::Positive;
pub use predictor::Predictor;
pub use prepare::{EmailRecord, Prepared, Preparer};
pub use reported::{Reported, Vote};
pub use request::{ANSWERED_QUEUE, Answered};
pub use review::{Query, Review, ReviewConfig, ReviewState, Verdict};
use role::Duties;
pub use role::Role;
pub use settings::{AddedWhen, HeldExample, MemberWhen, PipelineConfig};
pub use trust::{
    DEFAULT_CONTRADICTION_MARGIN, DEFAULT_MAX_REPORTERS, DEFAULT_REPORTED, Reporter, Reporters, TrustConfig,
};

use crate::eval::Progressive;
use crate::eval::drift::DriftWatch;
use crate::eval::users::UserBands;
use crate::message::{Bad, BadReason, Gold, Message, Split};
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
    /// Labels by how far they were believed (docs/feedback.md): learned in
    /// full, learned with less weight, held (not learned: their reporter
    /// is not trusted), and held labels learned once another reporter
    /// confirmed them.
    pub labels_in_full: u64,
    pub labels_down_weighted: u64,
    pub labels_held: u64,
    pub labels_corroborated: u64,
    /// Labels as facts (docs/feedback.md): a label that said again what
    /// was known of its message (not learned); a label that replaced
    /// another (taken back, then learned); a message's label forgotten;
    /// a forget of an id not in the record; a forget its reporter may
    /// not make; a label replaced or forgotten whose step was not kept (a
    /// checkpoint from before it was): learned on top, as before.
    pub labels_repeated: u64,
    pub labels_replaced: u64,
    pub labels_forgotten: u64,
    pub forgets_unmatched: u64,
    pub forgets_refused: u64,
    pub labels_unrecorded: u64,
    /// Raw e-mails cut at one of their bounds (and classified as cut).
    pub emails_cut: u64,
    /// Predictions published, by label name.
    pub predicted_by_label: HashMap<String, u64>,
}

impl Counters {
    pub fn bad_total(&self) -> u64 {
        self.bad.iter().sum()
    }
}

/// What a checkpoint holds of a pipeline besides its model (its settings
/// come from the flags): what [`Pipeline::restored`] consumes; capture
/// reads the same through the pipeline's accessors.
#[derive(Debug)]
pub struct PipelineState {
    pub progressive: Progressive,
    pub test: Progressive,
    pub published: Progressive,
    /// Empty in checkpoints from before the bands.
    pub users: UserBands,
    pub ledger: Ledger,
    pub reported: Reported,
    pub counters: Counters,
    /// None in checkpoints from before the review.
    pub review: Option<ReviewState>,
}

/// How the pipeline's predictions fared, one part: progressive
/// (test-then-train) metrics of labeled examples, those of the held-out
/// test split, those of published predictions judged by their late
/// labels, and the drift tests on the progressive and published errors.
#[derive(Debug)]
struct Accuracy {
    progressive: Progressive,
    test: Progressive,
    published: Progressive,
    /// Of the labeled messages that name a user, by band of the user's labels.
    users: UserBands,
    drift: DriftWatch,
}

impl Accuracy {
    fn new(cfg: &PipelineConfig) -> Self {
        let metrics = || Progressive::new(cfg.window, cfg.positive_label.clone());
        Accuracy {
            progressive: metrics(),
            test: metrics(),
            published: metrics(),
            users: UserBands::default(),
            drift: DriftWatch::default(),
        }
    }

    /// Takes the metrics a checkpoint kept (the drift tests start afresh:
    /// they are not checkpointed).
    fn restore(&mut self, progressive: Progressive, test: Progressive, published: Progressive, users: UserBands) {
        (self.progressive, self.test, self.published, self.users) = (progressive, test, published, users);
    }
}

/// The pipeline: a predictor (the model and what predicting needs), and
/// what learning needs besides: metrics, the record of labels, the review,
/// counters.
#[derive(Debug)]
pub struct Pipeline {
    cfg: PipelineConfig,
    /// Predicts every message (see [`Predictor`]); learning changes its
    /// model and its reported messages.
    predictor: Predictor,
    /// How its predictions fared (see [`Accuracy`]).
    accuracy: Accuracy,
    counters: Counters,
    /// What its role does with each kind of message.
    duties: Duties,
    /// The uncertainty review: which predictions to mark and ask about.
    review: Review,
    /// What is known of labels: the record of recent messages and their
    /// labels, the reporters (checkpointed; see [`ledger`]).
    ledger: Ledger,
}

impl Pipeline {
    pub fn new(model: Model, cfg: PipelineConfig) -> Self {
        let predictor = Predictor::new(model, &cfg);
        let accuracy = Accuracy::new(&cfg);
        let review = Review::new(cfg.review);
        let ledger = Ledger::new(&cfg.trust);
        Pipeline {
            duties: cfg.role.duties(),
            cfg,
            predictor,
            accuracy,
            counters: Counters::default(),
            review,
            ledger,
        }
    }

    /// Rebuilds a pipeline from a checkpoint's state, under `cfg`.
    pub fn restored(model: Model, cfg: PipelineConfig, state: PipelineState) -> Self {
        let mut p = Pipeline::new(model, cfg);
        p.accuracy
            .restore(state.progressive, state.test, state.published, state.users);
        p.ledger = state.ledger;
        p.predictor.reported = state.reported;
        p.counters = state.counters;
        if let Some(review) = state.review {
            p.review.restore(review);
        }
        p
    }

    pub fn model(&self) -> &Model {
        &self.predictor.model
    }
    /// What predicts for it (see [`Predictor`]).
    pub fn predictor(&self) -> &Predictor {
        &self.predictor
    }
    /// The predictor, to predict with apart from learning (`predict`).
    pub fn predictor_mut(&mut self) -> &mut Predictor {
        &mut self.predictor
    }
    pub fn config(&self) -> &PipelineConfig {
        &self.cfg
    }
    pub fn progressive(&self) -> &Progressive {
        &self.accuracy.progressive
    }
    /// From now on, ranks each member of the stack alone (`eval`).
    pub fn track_members(&mut self) {
        self.accuracy.progressive.track_members();
    }
    pub fn test_metrics(&self) -> &Progressive {
        &self.accuracy.test
    }
    pub fn published(&self) -> &Progressive {
        &self.accuracy.published
    }
    /// Accuracy of users' labeled messages by band of their labels.
    pub fn user_bands(&self) -> &UserBands {
        &self.accuracy.users
    }
    pub fn drift(&self) -> &DriftWatch {
        &self.accuracy.drift
    }
    pub fn review(&self) -> &Review {
        &self.review
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    /// What is known of labels (see [`Ledger`]).
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }
    pub fn cache(&self) -> &FeedbackCache {
        self.ledger.cache()
    }
    pub fn reporters(&self) -> &Reporters {
        self.ledger.reporters()
    }
    pub fn reported(&self) -> &Reported {
        self.predictor.reported()
    }
    /// The recent share of labels that contradicted a confident prediction.
    pub fn contradiction_share(&self) -> f32 {
        self.ledger.contradiction_share()
    }

    /// A front stage for this pipeline's model, to run apart (e.g. on a
    /// reader thread) and feed [`Pipeline::handle_entry`].
    pub fn preparer(&self) -> Preparer {
        self.predictor.preparer()
    }

    /// What its binary predictions' scores are of (the progressive
    /// metrics' positive class).
    fn positive(&self) -> Positive<'_> {
        positive_of(&self.accuracy.progressive)
    }

    /// A copy of its predictor that answers requests as it does (its
    /// model as a scoring copy, its reported messages, its review band
    /// and positive class): what the serving copies start as.
    pub fn serving_copy(&self) -> Predictor {
        let mut copy = self.predictor.scoring_copy(&self.cfg);
        copy.follow(&self.predictor.reported, self.followed());
        copy
    }

    /// Brings `copy` (a [`Pipeline::serving_copy`]) up to this pipeline:
    /// its model and what else it follows. Returns the model it replaced
    /// (for the caller to drop outside its lock).
    pub fn update_copy(&self, copy: &mut Predictor) -> Model {
        copy.follow(&self.predictor.reported, self.followed());
        copy.replace_model(self.predictor.model.scoring_copy())
    }

    /// What a serving copy follows of this pipeline besides its model.
    fn followed(&self) -> predictor::Followed {
        predictor::Followed::new(self.review.band(), self.cfg.review.fraction > 0.0, self.positive())
    }

    /// Handles one JSON message as a daemon does: the shorthand of
    /// [`Pipeline::handle_entry`] for a message with no headers.
    /// `default_id` names it when it has no "id" (its position in the
    /// source); `now_ms` is its event time.
    pub fn handle(&mut self, raw: &[u8], default_id: &dyn Fn() -> String, now_ms: u64) -> Outcome {
        self.handle_entry(Entry::Raw(Raw::json(raw)), default_id, now_ms, &mut Daemon)
    }

    /// The one way in: a message as its source gave it, or prepared apart
    /// ([`Entry`]), named `default_id` when it has no "id", at event time
    /// `now_ms`, with what `driver` asks of labeled and test examples
    /// beyond a daemon's work (`eval`'s; [`Daemon`] for none).
    pub fn handle_entry(
        &mut self,
        entry: Entry<'_, '_>,
        default_id: &dyn Fn() -> String,
        now_ms: u64,
        driver: &mut dyn Driver,
    ) -> Outcome {
        match entry {
            Entry::Prepared(p, i) => self.handle_at(p, i, default_id, now_ms, driver),
            Entry::Raw(raw) => {
                let mut p = std::mem::take(&mut self.predictor.spare);
                p.clear();
                raw.prepare(&mut self.predictor.prep, false, &mut p);
                let outcome = self.handle_at(&mut p, 0, default_id, now_ms, driver);
                self.predictor.spare = p;
                outcome
            }
        }
    }

    /// Message `i` of `p`, taken from it, to what this role does with its
    /// kind (decided once: [`Duties`]).
    fn handle_at(
        &mut self,
        p: &mut Prepared,
        i: usize,
        default_id: &dyn Fn() -> String,
        now_ms: u64,
        driver: &mut dyn Driver,
    ) -> Outcome {
        let taken = p
            .messages
            .get_mut(i)
            .and_then(|m| Some((m.message.take()?, m.buckets.clone(), m.counted.clone())));
        let Some((message, buckets, counted)) = taken else {
            self.counters.skipped += 1;
            return Outcome::Skipped;
        };
        self.ledger.expire(now_ms, self.cfg.cache_ttl_ms);
        if let Ok(Message::Example { email, .. }) = &message {
            self.offer_members(*email);
        }
        let mut w = std::mem::take(&mut self.predictor.work);
        w.features.user = None;
        let outcome = match message {
            Err(bad) => Outcome::Bad(bad),
            Ok(m) if m.has_label() && !self.duties.learns => self.passed(),
            Ok(Message::Feedback {
                id,
                gold,
                reporter,
                user,
            }) => self.feedback(&id, gold, reporter, user, &mut w),
            Ok(Message::Forget { id, reporter }) => self.forget(&id, reporter, &mut w),
            Ok(Message::ForgetReporter { of, reporter }) => self.forget_reporter(&of, reporter.as_deref(), &mut w),
            Ok(Message::Example {
                id,
                text,
                gold: None,
                user,
                ..
            }) if !self.duties.predicts => self.keep_for_feedback(id.unwrap_or_else(default_id), text, user, now_ms),
            Ok(Message::Example {
                id,
                text,
                gold,
                split,
                reporter,
                cut,
                user,
                ..
            }) => {
                self.counters.emails_cut += u64::from(cut);
                w.features.user = self.predictor.user_key(user.as_deref());
                match counted {
                    Some(r) => w.features.set_counted(&p.counted.idx[r.clone()], &p.counted.val[r]),
                    None => (self.predictor.prep.featurizer).count_buckets(&p.buckets[buckets], &mut w.features.x),
                }
                let id = id.unwrap_or_else(default_id);
                match (gold, split) {
                    (Some(gold), Some(Split::Test)) => self.test_example(&text, gold, &mut w, driver),
                    (Some(gold), split) => {
                        let keep = driver.keeps_train() && split == Some(Split::Train);
                        let labeled = Labeled {
                            id,
                            gold,
                            reporter,
                            user,
                        };
                        self.train(labeled, text, now_ms, (keep, driver), &mut w)
                    }
                    (None, _) => self.predict(id, text, user, now_ms, &mut w),
                }
            }
        };
        self.predictor.work = w;
        if let Outcome::Bad(b) = &outcome {
            self.counters.bad[b.reason.index()] += 1;
        }
        outcome
    }

    /// Adds each of the stack's added members to the model when its flag
    /// (`--byte-lr`, ...) wants it for a message (an e-mail when `email`)
    /// and this process learns; the model declines them past two classes
    /// or for a multi-label task.
    fn offer_members(&mut self, email: bool) {
        if !self.duties.learns {
            return;
        }
        let model = &mut self.predictor.model;
        for (i, entry) in crate::model::member::REGISTRY.iter().enumerate() {
            if self.cfg.members.when(i).wants(email) && model.added().get(i).is_none() && model.add_member(i) {
                tracing::info!(member = entry.name, "a member joins the model's stack");
            }
        }
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
        self.predictor.model.ensure_task(Self::task_of(gold));
        gold.as_slice()
            .iter()
            .map(|l| {
                self.predictor.model.intern(l).map_err(|e| match e {
                    ModelError::TooManyClasses(_) | ModelError::OverBudget { .. } => {
                        Bad::new(BadReason::TooManyClasses, e.to_string())
                    }
                    other => Bad::new(BadReason::BadLabel, other.to_string()),
                })
            })
            .collect()
    }

    /// Whether `gold` fits the model's task (without changing anything).
    fn check_gold(&self, gold: &Gold) -> Result<(), Bad> {
        let task = self.predictor.model.task().unwrap_or(Self::task_of(gold));
        let n = gold.as_slice().len();
        if task == Task::SingleLabel && n != 1 {
            return Err(Bad::new(
                BadReason::BadLabel,
                format!("this model is single-label, but the message has {n} labels"),
            ));
        }
        let labels = self.predictor.model.labels();
        let new = gold.as_slice().iter().filter(|l| labels.get(l).is_none()).count();
        let cap = self.cfg.limits.max_classes;
        if labels.len() + new > cap {
            let detail = format!("a new label past the cap of {cap} classes (--max-classes)");
            return Err(Bad::new(BadReason::TooManyClasses, detail));
        }
        Ok(())
    }

    fn test_example(&mut self, text: &str, gold: Gold, w: &mut Work, driver: &mut dyn Driver) -> Outcome {
        if let Err(bad) = self.check_gold(&gold) {
            return Outcome::Bad(bad);
        }
        let raw = self.finish(text, false, true, &mut w.features).unwrap_or_default();
        let held = HeldExample {
            raw,
            gold: gold.as_slice().to_vec(),
            user: w.features.user,
        };
        let Some(held) = driver.test(held) else {
            return Outcome::Test;
        };
        self.predictor.model.ensure_task(Self::task_of(&gold));
        self.score_test(&held);
        Outcome::Test
    }

    /// Scores a held-out example (raw features, as a [`Driver`] takes
    /// them) with the model as it stands.
    pub fn score_test(&mut self, held: &HeldExample) {
        let (raw, gold) = (&held.raw, &held.gold[..]);
        let mut w = std::mem::take(&mut self.predictor.work);
        w.features.set_raw(raw);
        w.features.user = held.user;
        self.predictor.finalize(&mut w.features);
        self.predictor.model.predict(&w.features.x, &mut w.scored);
        let predicted: Vec<&str> = w
            .scored
            .labels
            .iter()
            .map(|&c| self.predictor.model.labels().name(c))
            .collect();
        let score = self.predictor.positive_score(&w.scored, self.positive());
        self.accuracy.test.record(gold, &predicted, score);
        self.counters.test_scored += 1;
        self.predictor.work = w;
    }

    /// Learns an example again (extra passes of `eval`, as
    /// a [`Driver`] keeps it), without metrics or new document counts.
    pub fn relearn(&mut self, held: &HeldExample) {
        let ids: Option<Vec<usize>> = held.gold.iter().map(|l| self.predictor.model.labels().get(l)).collect();
        if let Some(ids) = ids {
            let mut w = std::mem::take(&mut self.predictor.work);
            w.features.set_raw(&held.raw);
            w.features.user = held.user;
            self.predictor.finalize(&mut w.features);
            let _ = self.predictor.model.learn(&w.features.x, &ids);
            self.predictor.work = w;
        }
    }

    fn predict(&mut self, id: String, text: String, user: Option<String>, now_ms: u64, w: &mut Work) -> Outcome {
        let positive = positive_of(&self.accuracy.progressive);
        let (mut prediction, score) = self.predictor.prediction(id, &text, w, self.cfg.explain, positive);
        self.counters.features += w.features.x.len() as u64;
        let verdict = self.review_current(&w.scored, self.cfg.review_output);
        prediction.uncertain = verdict.uncertain;
        prediction.review = verdict.ask.then(|| text.clone());
        prediction.user.clone_from(&user);
        for l in &prediction.labels {
            *self.counters.predicted_by_label.entry(l.clone()).or_default() += 1;
        }
        self.counters.predicted += 1;
        self.keep_predicted(&prediction, text, user, score, now_ms);
        Outcome::Predicted(prediction)
    }

    /// Keeps a predicted message for its late label (not on a predictor:
    /// its late labels go to the learner, nothing to join here).
    fn keep_predicted(
        &mut self,
        prediction: &Prediction,
        text: String,
        user: Option<String>,
        score: Option<f32>,
        now_ms: u64,
    ) {
        // A predictor keeps nothing: nothing built for it either.
        if self.duties.learns {
            let answered = self.predictor.answered(prediction, text, user, score, now_ms);
            self.keep_answered(answered);
        }
    }

    /// Keeps what a request answered (here, or by a copy's [`Predictor`]) for its
    /// late label.
    pub fn keep_answered(&mut self, Answered { id, entry, .. }: Answered) {
        self.ledger.keep(id, entry, &self.cfg);
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
    fn keep_for_feedback(&mut self, id: String, text: String, user: Option<String>, now_ms: u64) -> Outcome {
        let entry = CacheEntry {
            text: Packed::Plain(text),
            predicted: None,
            score: None,
            taught: None,
            held: None,
            at_ms: now_ms,
            user,
        };
        self.ledger.keep(id, entry, &self.cfg);
        self.counters.passed += 1;
        Outcome::Passed
    }

    /// Replaces the model (a predictor's newer version, a copy's), keeping
    /// the metrics and counters, and returns the one it replaced (for a
    /// caller to drop outside its lock). The front stage follows the new
    /// model's features if they changed.
    pub fn replace_model(&mut self, model: Model) -> Model {
        self.predictor.replace_model(model)
    }

    /// Frees the model, leaving an empty one of the same features and
    /// hyperparameters, and hands its memory back to the OS (a predictor
    /// about to restore a full version).
    pub fn clear_model(&mut self) {
        let empty = Model::new(self.predictor.model.hyper().clone(), *self.predictor.model.features());
        self.predictor.model = empty;
        crate::allocator::return_freed();
    }

    /// The model, to change in place (a predictor's delta: see
    /// `replica::apply_delta`); its features stay as they are.
    pub fn model_mut(&mut self) -> &mut Model {
        &mut self.predictor.model
    }
}

/// What `progressive`'s binary scores are of.
fn positive_of(progressive: &Progressive) -> Positive<'_> {
    Positive {
        binary: progressive.is_binary(),
        class: progressive.positive(),
    }
}

fn same_set(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

#[cfg(test)]
pub(crate) mod tests;
