//! A prediction on request (`POST /v1/classify`): one message of the
//! input's own JSON, predicted with the model as it stands, never learned
//! from. On a standalone daemon or a learner the message is kept in the
//! late-label cache like an unlabeled input message, so that a label sent
//! later to the feedback topic is joined to it and learned.
//!
//! Parsing and hashing need no model: a caller with several requests at
//! once prepares each with a [`Preparer`] of its own, outside the lock it
//! holds the pipeline with, and calls [`Pipeline::classify_prepared`].
//!
//! The daemon answers requests from copies of its model apart from the one
//! it learns (`serving::copies`), each a [`Scorer`]: it predicts and never
//! learns, follows the learning pipeline in what a prediction needs
//! besides the model (the reported messages, the review's band), and
//! hands each request's message back with its answer ([`Answered`]);
//! the caller sends it over a bounded queue to the daemon's core, which
//! keeps it in the learning pipeline's cache
//! ([`Pipeline::keep_answered`]) before the next message or lesson.

use super::{CacheEntry, Pipeline, Prediction, Prepared, Preparer, review};
use crate::message::{Bad, BadReason, Message};
use crate::model::Model;
use crate::model::Task;

/// Requests' predictions waiting for the learning pipeline: at 1,000
/// requests a second, eight seconds of a loop that holds still (a prune,
/// a checkpoint's write).
pub const ANSWERED_QUEUE: usize = 8192;

/// What a request asks to be predicted.
#[derive(Clone, Copy, Debug)]
pub enum Asked<'a> {
    /// A message of the input's JSON contract (`POST /v1/classify`).
    Json(&'a [u8]),
    /// A raw e-mail named `id`, for `user` (a mail protocol's request).
    Email {
        raw: &'a [u8],
        id: &'a str,
        user: Option<&'a str>,
    },
}

impl Asked<'_> {
    /// Parses and hashes the message into `out` (appended).
    pub fn prepare(&self, preparer: &mut Preparer, out: &mut Prepared) {
        match *self {
            Asked::Json(raw) => preparer.prepare(raw, false, out),
            Asked::Email { raw, id, user } => {
                let record = super::EmailRecord {
                    id: Some(id),
                    user: user.map(str::as_bytes),
                    ..Default::default()
                };
                preparer.prepare_email_record(raw, record, false, out);
            }
        }
    }
}

/// A request's prediction, kept for its late label.
#[derive(Debug)]
pub struct Answered {
    pub(crate) id: String,
    pub(crate) entry: CacheEntry,
}

/// A copy of a pipeline that answers requests: the model, as a scoring
/// copy, and what a prediction needs besides it; it never learns, and
/// keeps nothing of what it answers (see the module's doc).
#[derive(Debug)]
pub struct Scorer {
    pipeline: Pipeline,
}

impl Scorer {
    /// A scorer of `from`'s model as it stands.
    pub fn of(from: &Pipeline) -> Self {
        let mut pipeline = Pipeline::new(from.model.scoring_copy(), from.cfg.clone());
        pipeline.follow(from);
        Scorer { pipeline }
    }

    /// Scores with `from`'s model from now on; returns the model it
    /// replaced (for the caller to drop outside its lock).
    pub fn update(&mut self, from: &Pipeline) -> Model {
        self.pipeline.follow(from);
        self.pipeline.replace_model(from.model.scoring_copy())
    }

    /// The model it scores with.
    pub fn model(&self) -> &Model {
        &self.pipeline.model
    }

    /// The reported messages whose labels it recalls.
    pub fn reported(&self) -> &super::Reported {
        self.pipeline.reported()
    }

    /// [`Pipeline::classify_prepared`]: the prediction, and what the
    /// pipeline that learns keeps of it for its late label (none on a
    /// predictor's).
    pub fn classify_prepared(
        &mut self,
        asked: Asked<'_>,
        prepared: (&Preparer, &mut Prepared),
        default_id: &dyn Fn() -> String,
        now_ms: u64,
        explain: Option<usize>,
    ) -> Result<(Prediction, Option<Answered>), Bad> {
        self.pipeline
            .classify_prepared(asked, prepared, default_id, now_ms, explain)
    }
}

impl Pipeline {
    /// Makes this copy answer as `from` does besides the model: the
    /// reported messages (a vote is counted only with a label learned, so
    /// they change only with the model's version) and the review's band.
    fn follow(&mut self, from: &Pipeline) {
        self.ledger.reported.clone_from(&from.ledger.reported);
        self.review.set_band(from.review.band());
    }

    /// Predicts the message `raw` (JSON of the input contract: "text",
    /// "email" or "email_base64"). `default_id` names it when it has no
    /// "id"; `explain` asks for that many features in the answer (the
    /// daemon's `--explain` otherwise). A label in the message is not
    /// learned (learning stays on the input and feedback topics); feedback
    /// lines and bad input are refused with their reason, and are not
    /// counted as the daemon's bad input (the caller answers them).
    pub fn classify_request(
        &mut self,
        raw: &[u8],
        default_id: &dyn Fn() -> String,
        now_ms: u64,
        explain: Option<usize>,
    ) -> Result<Prediction, Bad> {
        let mut p = std::mem::take(&mut self.spare);
        p.clear();
        self.prep.prepare(raw, false, &mut p);
        let answer = self.classify_first(&mut p, default_id, now_ms, explain);
        self.spare = p;
        let (prediction, answered) = answer?;
        if let Some(answered) = answered {
            self.keep_answered(answered);
        }
        Ok(prediction)
    }

    /// [`Pipeline::classify_request`] for `asked`, which `preparer` prepared
    /// alone into `p`, with what the pipeline that learns keeps of the
    /// answer for its late label handed back, not kept (a [`Scorer`]'s
    /// path). Should the model's features have changed since (a replica's
    /// new full version), `asked` is prepared again here.
    pub fn classify_prepared(
        &mut self,
        asked: Asked<'_>,
        (preparer, p): (&Preparer, &mut Prepared),
        default_id: &dyn Fn() -> String,
        now_ms: u64,
        explain: Option<usize>,
    ) -> Result<(Prediction, Option<Answered>), Bad> {
        if preparer.features() != self.model.features() {
            p.clear();
            asked.prepare(&mut self.prep, p);
        }
        self.classify_first(p, default_id, now_ms, explain)
    }

    /// Predicts the first message of `p`; with what is kept of it for its
    /// late label.
    fn classify_first(
        &mut self,
        p: &mut Prepared,
        default_id: &dyn Fn() -> String,
        now_ms: u64,
        explain: Option<usize>,
    ) -> Result<(Prediction, Option<Answered>), Bad> {
        let first = p
            .messages
            .first_mut()
            .and_then(|m| Some((m.message.take()?, m.buckets.clone())));
        let (id, text, user, buckets) = match first {
            Some((Ok(Message::Example { id, text, user, .. }), buckets)) => {
                (id.unwrap_or_else(default_id), text, user, buckets)
            }
            Some((Err(bad), _)) => return Err(bad),
            Some((Ok(Message::Feedback { .. } | Message::Forget { .. }), _)) => {
                return Err(Bad::new(
                    BadReason::MissingText,
                    "a feedback label has no text to predict: labels go to the feedback topic",
                ));
            }
            None => return Err(Bad::new(BadReason::BadJson, "the message is empty")),
        };
        let mut w = std::mem::take(&mut self.work);
        w.features.user = self.user_key(user.as_deref());
        self.prep
            .featurizer
            .count_buckets(&p.buckets[buckets], &mut w.features.x);
        let configured = self.cfg.explain;
        self.cfg.explain = explain.unwrap_or(configured);
        let (mut prediction, score) = self.prediction(id, &text, &mut w);
        prediction.user.clone_from(&user);
        self.cfg.explain = configured;
        let task = self.model.task().unwrap_or(Task::SingleLabel);
        let confidence = review::confidence(&w.scored, task, self.model.hyper().threshold);
        prediction.uncertain = self.review.is_uncertain(confidence);
        self.work = w;
        self.ledger.cache.expire(now_ms, self.cfg.cache_ttl_ms);
        let answered = self.answered(&prediction, text, user, score, now_ms);
        Ok((prediction, answered))
    }
}
