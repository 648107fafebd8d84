//! A prediction on request (`POST /v1/classify`): one message of the
//! input's own JSON, predicted with the model as it stands, never learned
//! from. On a standalone daemon or a learner the message is kept in the
//! late-label cache like an unlabeled input message, so that a label sent
//! later to the feedback topic is joined to it and learned.

use super::{Pipeline, Prediction, review};
use crate::message::{self, Bad, BadReason, Message};
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
        let (id, text) = match message::parse_with(raw, &self.cfg.reading())? {
            Message::Example { id, text, .. } => (id.unwrap_or_else(default_id), text),
            Message::Feedback { .. } => {
                return Err(Bad::new(
                    BadReason::MissingText,
                    "a feedback label has no text to predict: labels go to the feedback topic",
                ));
            }
        };
        let mut w = std::mem::take(&mut self.work);
        self.featurize(&text, &mut w.features);
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
