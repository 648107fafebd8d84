//! The serving part as the daemon's loop holds it: the copies of the model
//! that requests are answered from (their feed), the lessons endpoints
//! take (their queue and log, or where a predictor forwards them), and the
//! endpoints themselves, wired to both: each started by its one `serve`
//! over the same [`Handles`]. The core holds one [`Endpoints`] and drives it
//! between records.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::DaemonError;
use super::lessons::{Forward, Lessons};
use super::publication::Publication;
use crate::checkpoint::{CheckpointDir, Positions};
use crate::pipeline::{Outcome, Pipeline, Raw};
use crate::serving::board::{Board, POST_EVERY, Shown, Status};
use crate::serving::{Classify, Endpoint, Feed, Handles, Hooks, Serving, Told, Waker};

/// The endpoints asked for, as `run` listed them, in the order they start.
#[derive(Debug, Default)]
pub struct EndpointSettings(Vec<Box<dyn Endpoint>>);

impl EndpointSettings {
    pub(crate) fn new(listed: Vec<Box<dyn Endpoint>>) -> Self {
        EndpointSettings(listed)
    }

    /// Whether any endpoint is asked for.
    pub(crate) fn any(&self) -> bool {
        !self.0.is_empty()
    }

    /// Whether an endpoint asked for takes lessons (the mail protocols,
    /// the console).
    pub(crate) fn teaches(&self) -> bool {
        self.0.iter().any(|e| e.teaches())
    }
}

/// The copies, the lessons, and how many lessons this run learned.
#[derive(Default)]
pub(crate) struct Endpoints {
    /// The copies of the model that requests are answered from.
    feed: Option<Feed>,
    /// The endpoints' lessons, to learn between records, and their log.
    lessons: Lessons,
    /// Lessons learned by this run (those the log gave back included).
    taught: u64,
    /// What a screen shows (with `--console-addr`), and when the status
    /// was last posted to it.
    board: Option<(Arc<Board>, Instant)>,
    /// Wakes the loop where it waits when a lesson is queued.
    wake: Option<Waker>,
    /// The endpoints served (none: none asked for, or stopped); dropped,
    /// they stop.
    fronts: Option<Vec<Serving>>,
}

impl Endpoints {
    /// Forwards the lessons to `to` (a predictor's way to the learner)
    /// rather than refusing them; before [`Endpoints::start`].
    pub(crate) fn forward_to(&mut self, to: Box<dyn Forward>) {
        self.lessons.forward_to(to);
    }

    /// Wakes the loop with `wake` whenever an endpoint queues a lesson
    /// (where it waits for its input: a JSON-lines reader); before
    /// [`Endpoints::start`].
    pub(crate) fn wake_with(&mut self, wake: Waker) {
        self.wake = Some(wake);
    }

    /// Starts the endpoints asked for, which answer from copies of
    /// `pipeline`'s model and whose lessons [`Endpoints::learn`] learns (but
    /// on a predictor, which forwards or refuses them); first, the lessons
    /// a crash left in `dir`'s log are learned.
    pub(crate) fn start(
        &mut self,
        pipeline: &mut Pipeline,
        (dir, positions): (Option<&CheckpointDir>, &Positions),
        asked: &EndpointSettings,
    ) -> Result<(), DaemonError> {
        let learns = pipeline.config().role.duties().learns;
        if let (true, Some(dir)) = (learns, dir) {
            self.taught += self.lessons.recover(dir, positions, pipeline)? as u64;
        }
        let board = asked.0.iter().find_map(|e| e.board()).map(Arc::new);
        if asked.any() {
            let hooks = Hooks {
                published: crate::metrics::http_model,
                unkept: crate::metrics::http_unkept,
            };
            self.feed = Some(Feed::start(pipeline, hooks, board.clone()));
        }
        let told = match asked.teaches() && (learns || self.lessons.forwards()) {
            true => {
                let (to, from) = crate::serving::told_queue(self.wake.clone());
                self.lessons.listen(from);
                Some(to)
            }
            false => None,
        };
        self.board = board.clone().map(|b| (b, Instant::now() - POST_EVERY));
        if let Some(feed) = &self.feed {
            let handles = Handles {
                copies: feed.copies() as Arc<dyn Classify>,
                lessons: told,
                board,
            };
            let fronts = asked.0.iter().map(|e| e.serve(&handles));
            self.fronts = Some(fronts.collect::<Result<_, _>>()?);
        }
        Ok(())
    }

    /// Whether endpoints are served (a JSON-lines daemon then goes on
    /// after its input ends).
    pub(crate) fn serves(&self) -> bool {
        self.fronts.is_some()
    }

    /// Whether endpoints take lessons (learned, or forwarded by a
    /// predictor), which the loop must then take often.
    pub(crate) fn takes_lessons(&self) -> bool {
        self.lessons.listening()
    }

    /// Shows `outcome`, which `pipeline` just gave for the message `raw`
    /// reads (only read when the board shows it), on the board:
    /// a prediction, with the text the record keeps of it, else (a
    /// predictor keeps none) the message's own "text", or a raw e-mail's
    /// start.
    pub(crate) fn saw<'a>(&self, outcome: &Outcome, pipeline: &Pipeline, raw: impl FnOnce() -> Raw<'a>) {
        let Some((board, _)) = &self.board else {
            return;
        };
        let p = match outcome {
            Outcome::Predicted(p) => p,
            Outcome::Bad(bad) => return board.dead(bad),
            _ => return,
        };
        let kept = pipeline.cache().text_of(&p.id);
        let shown = Shown::of(raw(), kept.is_none());
        let mail = shown.mail.as_ref().map(|m| m.as_deref());
        board.saw(p, kept.or(shown.text).as_deref(), mail, "stream");
    }

    /// The board a console shows, if one is served.
    pub(crate) fn board(&self) -> Option<&Arc<Board>> {
        self.board.as_ref().map(|(b, _)| b)
    }

    /// Posts `pipeline`'s status to the board, when one is shown and the
    /// last post is [`POST_EVERY`] old.
    pub(crate) fn post(&mut self, pipeline: &Pipeline, messages: u64) {
        if let Some((board, at)) = &mut self.board
            && at.elapsed() >= POST_EVERY
        {
            board.post(Status::of(pipeline, messages));
            *at = Instant::now();
        }
    }

    /// Keeps in `pipeline`'s cache what the copies answered since the last
    /// call (before each record and lesson, and at each tick: a late label
    /// finds its request's message).
    pub(crate) fn absorb(&self, pipeline: &mut Pipeline) {
        if let Some(feed) = &self.feed {
            feed.absorb(pipeline);
        }
    }

    /// Waits up to `within` for a lesson (sleeps that long without one).
    pub(crate) fn wait(&self, within: Duration) -> Option<Told> {
        self.lessons.wait(within)
    }

    /// Applies the lessons (`first`, then those waiting) as the feedback
    /// path applies a labeled message or a forget, once the lessons log
    /// holds them; then publishes the model to the copies when their
    /// interval has passed, and answers each: a crash after the answer
    /// loses nothing (`super::lessons`), and a check sees it within a
    /// publication interval (docs/mail.md). `publication` learns of each
    /// version.
    pub(crate) fn learn(
        &mut self,
        pipeline: &mut Pipeline,
        first: Option<Told>,
        publication: Option<&mut Box<dyn Publication>>,
    ) {
        // A check answered before its lesson is kept first (its record is
        // the one the lesson then teaches).
        self.absorb(pipeline);
        let batch = self.lessons.waiting(first);
        if batch.is_empty() {
            return;
        }
        let mut publication = publication;
        let mut started = Instant::now();
        let answers = self.lessons.learn(batch, pipeline, |p, outcome| {
            crate::metrics::handled(outcome, started.elapsed());
            if let Some(publication) = publication.as_mut() {
                publication.observe(p.model().version());
            }
            started = Instant::now();
        });
        // The copies take them at their next publication (an interval at
        // most: `Feed`), not one copy of the model per lesson.
        self.publish(pipeline, false);
        self.taught += answers.len() as u64;
        for (reply, done) in answers {
            // The asker may have gone (its timeout): nothing to answer.
            let _ = reply.send(done);
        }
    }

    /// Publishes `pipeline`'s model to the copies, when due (with `force`,
    /// whenever it changed).
    pub(crate) fn publish(&mut self, pipeline: &Pipeline, force: bool) {
        if let Some(feed) = &mut self.feed {
            feed.publish(pipeline, force);
        }
    }

    /// Stops answering requests: the endpoints stop first, then the
    /// messages they answered are kept for their late labels, and the last
    /// lessons learned; no more are taken.
    pub(crate) fn stop(&mut self, pipeline: &mut Pipeline, publication: Option<&mut Box<dyn Publication>>) {
        drop(self.fronts.take());
        self.absorb(pipeline);
        drop(self.feed.take());
        self.learn(pipeline, None, publication);
        self.lessons.close();
    }

    /// The lessons log's generation a checkpoint now covers, if it has one.
    pub(crate) fn lessons_position(&self) -> Option<u64> {
        self.lessons.position()
    }

    /// A checkpoint holds the lessons so far: the log moves on.
    pub(crate) fn checkpointed(&mut self) {
        self.lessons.checkpointed();
    }

    /// Lessons this run learned (those the log gave back at the start
    /// included): what its last checkpoint must hold.
    pub(crate) fn taught(&self) -> u64 {
        self.taught
    }
}
