//! A prediction on request (`POST /v1/classify`): one message of the
//! input's own JSON, predicted with the model as it stands, never learned
//! from. On a standalone daemon or a learner the message is kept in the
//! late-label cache like an unlabeled input message, so that a label sent
//! later to the feedback topic is joined to it and learned.
//!
//! Parsing and hashing need no model: a caller with several requests at
//! once prepares each with a [`Preparer`] of its own, outside the lock it
//! holds a [`Predictor`] with, and calls [`Predictor::answer`].
//!
//! The daemon answers requests from copies of its model apart from the one
//! it learns (`serving::copies`), each a [`Predictor`] that follows the
//! learning pipeline ([`Pipeline::serving_copy`]) and hands each request's
//! message back with its answer ([`Answered`]); the caller sends it over a
//! bounded queue to the daemon's core, which keeps it in the learning
//! pipeline's cache ([`Pipeline::keep_answered`]) before the next message
//! or lesson.

use super::predictor::{Positive, Predictor};
use super::{CacheEntry, Packed, Prediction, Prepared, Preparer, Raw, review};
use crate::message::{self, Bad, BadReason, Message};
use crate::model::Task;

/// Requests' predictions waiting for the learning pipeline: at 1,000
/// requests a second, eight seconds of a loop that holds still (a prune,
/// a checkpoint's write).
pub const ANSWERED_QUEUE: usize = 8192;

/// A request's prediction, kept for its late label.
#[derive(Debug)]
pub struct Answered {
    pub(crate) id: String,
    pub(crate) entry: CacheEntry,
    /// Whether the learning pipeline keeps it (not on a predictor: its
    /// late labels go to the learner).
    pub(crate) kept: bool,
}

impl Answered {
    /// The message's text.
    pub fn text(&self) -> Option<&str> {
        match &self.entry.text {
            Packed::Plain(t) | Packed::Stored(t) => Some(t),
            _ => None,
        }
    }
}

/// What a request's prediction is judged by besides the model: the
/// positive class its score is of, and whether a confidence is uncertain.
pub(super) struct Judge<'a> {
    pub(super) positive: Positive<'a>,
    pub(super) uncertain: &'a dyn Fn(f32) -> bool,
}

impl Predictor {
    /// Predicts `asked`, which `preparer` prepared alone into `p`, as the
    /// learner it follows would (a copy's path): the prediction, and what
    /// the learning pipeline keeps of it for its late label (none on a
    /// predictor), with the message's text. Should the model's features
    /// have changed since (a replica's new full version), `asked` is
    /// prepared again here.
    pub fn answer(
        &mut self,
        asked: Raw<'_>,
        (preparer, p): (&Preparer, &mut Prepared),
        default_id: &dyn Fn() -> String,
        now_ms: u64,
        explain: Option<usize>,
    ) -> Result<(Prediction, Answered), Bad> {
        if preparer.features() != self.model.features() {
            p.clear();
            asked.prepare(&mut self.prep, false, p);
        }
        let followed = self.followed.clone();
        let judge = Judge {
            positive: followed.positive(),
            uncertain: &|c| followed.is_uncertain(c),
        };
        self.answer_first(p, default_id, now_ms, explain, &judge)
    }

    /// Predicts the first message of `p` under `judge`; with what is kept
    /// of it for its late label.
    pub(super) fn answer_first(
        &mut self,
        p: &mut Prepared,
        default_id: &dyn Fn() -> String,
        now_ms: u64,
        explain: Option<usize>,
        judge: &Judge<'_>,
    ) -> Result<(Prediction, Answered), Bad> {
        let first = p
            .messages
            .first_mut()
            .and_then(|m| Some((m.message.take()?, m.buckets.clone())));
        let (id, text, user, buckets) = match first {
            Some((Ok(Message::Example { id, text, user, .. }), buckets)) => {
                (id.unwrap_or_else(default_id), text, user, buckets)
            }
            Some((Err(bad), _)) => return Err(bad),
            Some((Ok(Message::Feedback { .. } | Message::Forget { .. } | Message::ForgetReporter { .. }), _)) => {
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
        let explain = explain.unwrap_or(self.settings.explain);
        let (mut prediction, score) = self.prediction(id, &text, &mut w, explain, judge.positive);
        prediction.user.clone_from(&user);
        let task = self.model.task().unwrap_or(Task::SingleLabel);
        let confidence = review::confidence(&w.scored, task, self.model.hyper().threshold);
        prediction.uncertain = (judge.uncertain)(confidence);
        self.work = w;
        let answered = self.answered(&prediction, text, user, score, now_ms);
        Ok((prediction, answered))
    }

    /// What the pipeline that learns keeps of a prediction for its late
    /// label (but on a predictor: [`Answered::kept`]).
    pub(super) fn answered(
        &self,
        prediction: &Prediction,
        text: String,
        user: Option<String>,
        score: Option<f32>,
        now_ms: u64,
    ) -> Answered {
        let entry = CacheEntry {
            text: Packed::Plain(text),
            predicted: Some(prediction.labels.clone()),
            score,
            taught: None,
            held: None,
            at_ms: now_ms,
            user,
        };
        let id = prediction.id.clone();
        let kept = self.settings.keeps;
        Answered { id, entry, kept }
    }

    /// Predicts any message with text (labeled or not) without learning:
    /// the `predict` command. Feedback lines and bad input are refused.
    pub fn predict_only(&mut self, raw: &[u8], default_id: &dyn Fn() -> String) -> Result<Prediction, Bad> {
        match message::parse_with(raw, &self.settings.reading)? {
            Message::Example { id, text, user, .. } => {
                let mut w = std::mem::take(&mut self.work);
                w.features.user = self.user_key(user.as_deref());
                self.featurize(&text, &mut w.features);
                let positive = Positive {
                    binary: false,
                    class: None,
                };
                let explain = self.settings.explain;
                let id = id.unwrap_or_else(default_id);
                let mut prediction = self.prediction(id, &text, &mut w, explain, positive).0;
                prediction.user = user;
                self.work = w;
                Ok(prediction)
            }
            Message::Feedback { .. } | Message::Forget { .. } | Message::ForgetReporter { .. } => Err(Bad::new(
                BadReason::MissingText,
                "a feedback line has no text to predict",
            )),
        }
    }
}

// The learner answering a request itself: the reference the copies are
// held to in tests (the daemon's requests go to the copies).
#[cfg(test)]
impl super::Pipeline {
    /// Predicts the message `raw` (JSON of the input contract: "text",
    /// "email" or "email_base64") and keeps it for its late label (but on
    /// a predictor). `default_id` names it when it has no "id"; `explain`
    /// asks for that many features in the answer (the daemon's
    /// `--explain` otherwise). A label in the message is not learned
    /// (learning stays on the input and feedback topics); feedback lines
    /// and bad input are refused with their reason, and are not counted as
    /// the daemon's bad input (the caller answers them).
    pub(crate) fn classify_request(
        &mut self,
        raw: &[u8],
        default_id: &dyn Fn() -> String,
        now_ms: u64,
        explain: Option<usize>,
    ) -> Result<Prediction, Bad> {
        let mut p = std::mem::take(&mut self.predictor.spare);
        p.clear();
        self.predictor.prep.prepare(raw, false, &mut p);
        self.ledger.expire(now_ms, self.cfg.cache_ttl_ms);
        let review = &self.review;
        let judge = Judge {
            positive: super::positive_of(&self.accuracy.progressive),
            uncertain: &|c| review.is_uncertain(c),
        };
        let answer = self.predictor.answer_first(&mut p, default_id, now_ms, explain, &judge);
        self.predictor.spare = p;
        let (prediction, answered) = answer?;
        if answered.kept {
            self.keep_answered(answered);
        }
        Ok(prediction)
    }
}
