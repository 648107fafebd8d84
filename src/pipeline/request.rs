//! A prediction on request (`POST /v1/classify`): one message of the
//! input's own JSON, predicted with the model as it stands, never learned
//! from. On a standalone daemon or a learner the message is kept in the
//! late-label cache like an unlabeled input message, so that a label sent
//! later to the feedback topic is joined to it and learned.
//!
//! Parsing and hashing need no model: a caller with several requests at
//! once prepares each with a [`Preparer`] of its own, outside the lock it
//! holds the pipeline with, and calls [`Pipeline::classify_prepared`].

use super::{Pipeline, Prediction, Prepared, Preparer, review};
use crate::message::{Bad, BadReason, Message};
use crate::model::Task;

impl Pipeline {
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
        answer
    }

    /// [`Pipeline::classify_request`] for `raw`, which `preparer` prepared
    /// alone into `p`. Should the model's features have changed since (a
    /// replica's new full version), `raw` is prepared again here.
    pub fn classify_prepared(
        &mut self,
        raw: &[u8],
        (preparer, p): (&Preparer, &mut Prepared),
        default_id: &dyn Fn() -> String,
        now_ms: u64,
        explain: Option<usize>,
    ) -> Result<Prediction, Bad> {
        if preparer.features() != self.model.features() {
            p.clear();
            self.prep.prepare(raw, false, p);
        }
        self.classify_first(p, default_id, now_ms, explain)
    }

    /// Predicts the first message of `p`.
    fn classify_first(
        &mut self,
        p: &mut Prepared,
        default_id: &dyn Fn() -> String,
        now_ms: u64,
        explain: Option<usize>,
    ) -> Result<Prediction, Bad> {
        let first = p
            .messages
            .first_mut()
            .and_then(|m| Some((m.message.take()?, m.buckets.clone())));
        let (id, text, buckets) = match first {
            Some((Ok(Message::Example { id, text, .. }), buckets)) => (id.unwrap_or_else(default_id), text, buckets),
            Some((Err(bad), _)) => return Err(bad),
            Some((Ok(Message::Feedback { .. }), _)) => {
                return Err(Bad::new(
                    BadReason::MissingText,
                    "a feedback label has no text to predict: labels go to the feedback topic",
                ));
            }
            None => return Err(Bad::new(BadReason::BadJson, "the message is empty")),
        };
        let mut w = std::mem::take(&mut self.work);
        self.prep
            .featurizer
            .count_buckets(&p.buckets[buckets], &mut w.features.x);
        let configured = self.cfg.explain;
        self.cfg.explain = explain.unwrap_or(configured);
        let (mut prediction, score) = self.prediction(id, &text, &mut w);
        self.cfg.explain = configured;
        let task = self.model.task().unwrap_or(Task::SingleLabel);
        let confidence = review::confidence(&w.scored, task, self.model.hyper().threshold);
        prediction.uncertain = self.review.is_uncertain(confidence);
        self.work = w;
        self.cache.expire(now_ms, self.cfg.cache_ttl_ms);
        self.keep_predicted(&prediction, text, score, now_ms);
        Ok(prediction)
    }
}
