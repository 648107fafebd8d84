//! The publication of the daemon's model to the copies that answer
//! requests ([`super::copies`]): on the loop's thread, between messages,
//! when the model changed (a version learned, a predictor's update put in,
//! a report counted, the review's band moved) and the interval has passed.
//!
//! A publication is a copy of the model (a memcpy of its buffers, on the
//! loop's thread: 10 to 30 ms for the spam streams' models); the interval
//! follows it, [`COST_SHARE`] of the loop's time at most, and never under
//! [`MIN_INTERVAL`]. So requests are answered from a model at most one
//! interval and one copy behind the one that learns.

use std::sync::Arc;
use std::time::{Duration, Instant};

use std::sync::mpsc::Receiver;

use super::board::Board;
use super::copies::{Copies, Hooks};
use crate::pipeline::{Answered, Pipeline};

/// The shortest interval between two publications.
pub(super) const MIN_INTERVAL: Duration = Duration::from_millis(250);

/// At most this share of the loop's time goes to publications: the
/// interval is the last copy's time divided by it.
pub(super) const COST_SHARE: u32 = 20;

/// What the model was at the last publication: version (the reported
/// messages change only with it) and the review band's bits.
type Mark = (u64, u64);

/// The loop's end of the copies.
pub(crate) struct Feed {
    copies: Arc<Copies>,
    /// What the copies answered, for the pipeline that learns to keep for
    /// its late labels (none on a predictor).
    answered: Option<Receiver<Answered>>,
    published: Mark,
    at: Instant,
    interval: Duration,
}

impl Feed {
    /// Makes the copies of `pipeline`'s model (which, but on a predictor,
    /// keeps what they answer for its late labels: [`Feed::absorb`]),
    /// counting what `hooks` count, showing what they answer on `board`.
    pub(crate) fn start(pipeline: &Pipeline, hooks: Hooks, board: Option<Arc<Board>>) -> Self {
        let (copies, answered) = Copies::new(pipeline, hooks, board);
        Feed {
            copies: Arc::new(copies),
            answered,
            published: mark(pipeline),
            at: Instant::now(),
            interval: MIN_INTERVAL,
        }
    }

    /// The copies, for the endpoints.
    pub(crate) fn copies(&self) -> Arc<Copies> {
        Arc::clone(&self.copies)
    }

    /// Keeps in `pipeline`'s cache what the copies answered since the last
    /// call, for its late labels.
    pub(crate) fn absorb(&self, pipeline: &mut Pipeline) {
        if let Some(from) = &self.answered {
            while let Ok(answered) = from.try_recv() {
                pipeline.keep_answered(answered);
            }
        }
    }

    /// Publishes `pipeline`'s model when it changed and the interval has
    /// passed (with `force`, whenever it changed).
    pub(crate) fn publish(&mut self, pipeline: &Pipeline, force: bool) {
        if !force && self.at.elapsed() < self.interval {
            return;
        }
        let now = mark(pipeline);
        if now == self.published {
            return;
        }
        let started = Instant::now();
        self.copies.publish(pipeline);
        let took = started.elapsed();
        self.interval = (took * COST_SHARE).max(MIN_INTERVAL);
        self.at = Instant::now();
        self.published = now;
        tracing::debug!(
            version = now.0,
            ms = took.as_millis() as u64,
            next_ms = self.interval.as_millis() as u64,
            "model copied for requests"
        );
    }
}

fn mark(p: &Pipeline) -> Mark {
    (p.model().version(), p.review().band().to_bits())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{Outcome, PipelineConfig, Raw};
    use crate::serving::Classify;

    fn learner() -> Pipeline {
        crate::pipeline::tests::pipeline(PipelineConfig::default())
    }

    fn id() -> String {
        "line".into()
    }

    /// The copies answer as the learning pipeline's model once it is
    /// published, and not before (a request never sees a version the
    /// loop is still learning); what they answered is kept for its late
    /// label by the learning pipeline, and a report counted there is
    /// recalled by the copies.
    #[test]
    fn copies_answer_like_the_published_model_and_hand_back_what_they_answered() {
        let mut p = learner();
        let mut feed = Feed::start(&p, Hooks::NONE, None);
        let copies = feed.copies();
        let ask = br#"{"id": "asked", "text": "a cash prize for the team lunch"}"#;
        let lines = [
            r#"{"text": "win a cash prize now", "label": "spam"}"#,
            r#"{"text": "lunch at noon with the team", "label": "ham"}"#,
            r#"{"text": "cheap pills cash offer", "label": "spam"}"#,
        ];

        for (n, l) in lines.iter().enumerate() {
            let before = copies.classify(Raw::json(ask), None).expect("a text");
            p.handle(l.as_bytes(), &id, n as u64);
            assert_eq!(
                copies.classify(Raw::json(ask), None).expect("a text"),
                before,
                "not yet published"
            );
            feed.publish(&p, true);
            let mut reference = Pipeline::new(p.model().clone(), p.config().clone());
            let want = reference.classify_request(ask, &id, 9, None).expect("a text");
            assert_eq!(
                copies.classify(Raw::json(ask), None).expect("a text"),
                want,
                "after line {n}"
            );
        }
        // u-1's labels, past the first ones that teach the shared part
        // alone.
        for i in 0..crate::pipeline::PERSONAL_AFTER + 5 {
            let text = "the team lunch cash prize is on";
            let line = serde_json::json!({"id": format!("u-1/{i}"), "text": text, "label": "ham", "user": "u-1"});
            p.handle(line.to_string().as_bytes(), &id, 9);
        }
        feed.publish(&p, true);
        // A user's request is answered with that user's personal features.
        let for_user = br#"{"id": "u", "text": "a cash prize for the team lunch", "user": "u-1"}"#;
        let mut reference = Pipeline::new(p.model().clone(), p.config().clone());
        let want = reference.classify_request(for_user, &id, 9, None).expect("a text");
        let got = copies.classify(Raw::json(for_user), None).expect("a text");
        assert_eq!(got, want);
        // ...which u-1's own label made differ from everyone's answer.
        let shared = copies.classify(Raw::json(ask), None).expect("a text");
        assert_ne!(got.margins, shared.margins, "u-1's copies count");
        // Asked of the copies, labeled later: joined by the learner once
        // it kept what they answered.
        feed.absorb(&mut p);
        let label = br#"{"id": "asked", "label": "ham"}"#;
        assert!(matches!(p.handle(label, &id, 10), Outcome::FeedbackMatched { .. }));
        assert_eq!(p.counters().feedback_matched, 1);
        let label = br#"{"id": "never-asked", "label": "ham"}"#;
        assert!(matches!(p.handle(label, &id, 11), Outcome::FeedbackUnmatched));
        // The reports the learner counted, the copies recall once published.
        assert!(!p.reported().is_empty());
        feed.publish(&p, true);
        copies.with_active(|copy| assert_eq!(copy.reported(), p.reported()));
    }
}
