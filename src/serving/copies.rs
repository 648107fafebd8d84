//! The models requests are answered from: two copies of the daemon's
//! model, each a [`Predictor`] that follows the learning pipeline, read
//! left-right.
//!
//! Requests read the active copy. A publication ([`super::feed`]) puts the
//! daemon's model, as it stands, into the other copy, which then becomes
//! the active one; the copy it leaves is the next publication's to
//! overwrite. The daemon's loop holds neither lock but for the instant of
//! that swap, and no request holds the learner's: a request never waits
//! for learning, a prune of the arena, a checkpoint or a producer's flush,
//! only for the requests before it (`--http-max-concurrent` turns). The
//! price is memory: two copies of the model beside the daemon's own
//! (docs/http.md).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use super::board::{Board, Shown};
use super::{Classify, lock};
use crate::message::{Bad, BadReason};
use crate::pipeline::{ANSWERED_QUEUE, Answered, Pipeline, Prediction, Predictor, Prepared, Preparer, Raw};

/// What the copies count, told by whoever wires them (the metrics).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hooks {
    /// A copy now serves this model version.
    pub published: fn(u64),
    /// A request's answer was not kept for its late label (the queue to
    /// the loop was full).
    pub unkept: fn(),
}

impl Hooks {
    /// Counts nothing.
    #[cfg(test)]
    pub(crate) const NONE: Hooks = Hooks {
        published: |_| {},
        unkept: || {},
    };
}

/// The two copies, which of them requests read, and what a request's
/// preparation needs.
pub(crate) struct Copies {
    copies: [Mutex<Option<Predictor>>; 2],
    /// The copy requests read (0 or 1).
    active: AtomicUsize,
    /// Where a copy's predictions go to be kept for their late labels
    /// (none on a predictor, which keeps none).
    forward: Option<SyncSender<Answered>>,
    /// What a request's preparer is made from.
    template: Preparer,
    /// Preparers and their buffers, one per request in flight (at most
    /// `--http-max-concurrent`), kept for the next requests.
    preparers: Mutex<Vec<(Preparer, Prepared)>>,
    /// Numbers the requests without an id.
    next: AtomicU64,
    /// Unique to this process, so that default ids of a restarted one do
    /// not meet the cached messages of the last.
    started_ms: u64,
    /// What to count when a copy is published or an answer not kept.
    hooks: Hooks,
    /// Where a screen reads the predictions made (`--console-addr`).
    board: Option<Arc<Board>>,
}

impl Copies {
    /// The copies of `from` (the daemon's pipeline), and where what they
    /// answer comes out to be kept for its late labels (none on a
    /// predictor, which keeps none).
    pub(crate) fn new(from: &Pipeline, hooks: Hooks, board: Option<Arc<Board>>) -> (Self, Option<Receiver<Answered>>) {
        let (forward, answered) = match from.config().role.duties().learns {
            false => (None, None),
            true => {
                let (to, from) = std::sync::mpsc::sync_channel(ANSWERED_QUEUE);
                (Some(to), Some(from))
            }
        };
        let copies = Copies {
            copies: [Mutex::new(None), Mutex::new(None)],
            active: AtomicUsize::new(0),
            forward,
            template: from.preparer(),
            preparers: Mutex::new(Vec::new()),
            next: AtomicU64::new(1),
            started_ms: crate::clock::now_ms(),
            hooks,
            board,
        };
        copies.publish(from);
        copies.publish(from);
        (copies, answered)
    }

    /// Puts `from`'s model (with its reported messages and review band)
    /// into the copy requests do not read, which they read from then on.
    /// The copy is made before the lock is taken, and the model it
    /// replaces dropped after.
    pub(crate) fn publish(&self, from: &Pipeline) {
        let next = 1 - self.active.load(Ordering::Acquire);
        let replaced = {
            let mut copy = lock(&self.copies[next]);
            match copy.as_mut() {
                Some(predictor) => Some(from.update_copy(predictor)),
                None => {
                    *copy = Some(from.serving_copy());
                    None
                }
            }
        };
        self.active.store(next, Ordering::Release);
        drop(replaced);
        (self.hooks.published)(from.model().version());
    }
}

#[cfg(test)]
impl Copies {
    /// Runs `f` on the copy requests read.
    pub(crate) fn with_active(&self, f: impl FnOnce(&Predictor)) {
        let copy = lock(&self.copies[self.active.load(Ordering::Acquire)]);
        f(copy.as_ref().expect("copies are made at the start"));
    }
}

impl Copies {
    /// Prepares `asked` outside the copies' locks, predicts it with the
    /// active copy; with `record`, shows it on the board and hands what it
    /// answered to the learning pipeline.
    fn answer(&self, asked: Raw<'_>, explain: Option<usize>, record: Option<&'static str>) -> Result<Prediction, Bad> {
        let default_id = || {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            format!("http-{}-{n}", self.started_ms)
        };
        let pooled = lock(&self.preparers).pop();
        let (mut preparer, mut p) = pooled.unwrap_or_else(|| (self.template.fresh(), Prepared::default()));
        p.clear();
        asked.prepare(&mut preparer, false, &mut p);
        let (answer, answered) = {
            let mut copy = lock(&self.copies[self.active.load(Ordering::Acquire)]);
            let now = crate::clock::now_ms();
            match copy.as_mut() {
                Some(predictor) => match predictor.answer(asked, (&preparer, &mut p), &default_id, now, explain) {
                    Ok((prediction, answered)) => (Ok(prediction), Some(answered).filter(|_| record.is_some())),
                    Err(bad) => (Err(bad), None),
                },
                // Both copies are made before the endpoint starts.
                None => (Err(Bad::new(BadReason::MissingText, "no model is served yet")), None),
            }
        };
        lock(&self.preparers).push((preparer, p));
        if let (Some(board), Ok(prediction), Some(answered), Some(source)) = (&self.board, &answer, &answered, record) {
            let mail = Shown::of(asked, false).mail;
            board.saw(prediction, answered.text(), mail.as_ref().map(|m| m.as_deref()), source);
        }
        if let (Some(to), Some(answered)) = (&self.forward, answered.filter(|a| a.kept)) {
            match to.try_send(answered) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => (self.hooks.unkept)(),
                // The loop is gone: the daemon is stopping.
                Err(TrySendError::Disconnected(_)) => {}
            }
        }
        answer
    }
}

impl Classify for Copies {
    fn classify(&self, asked: Raw<'_>, explain: Option<usize>) -> Result<Prediction, Bad> {
        self.answer(asked, explain, Some("request"))
    }

    fn scan(&self, asked: Raw<'_>, explain: usize) -> Result<Prediction, Bad> {
        self.answer(asked, Some(explain), Some("scan"))
    }

    fn look(&self, asked: Raw<'_>, explain: usize) -> Result<Prediction, Bad> {
        self.answer(asked, Some(explain), None)
    }

    fn strongest(&self, n: usize) -> Vec<(String, Vec<(String, f32)>)> {
        let copy = lock(&self.copies[self.active.load(Ordering::Acquire)]);
        let Some(m) = copy.as_ref().map(Predictor::model) else {
            return Vec::new();
        };
        (0..m.labels().len())
            .map(|c| {
                let named = (m.top_features(c, n).into_iter())
                    .map(|(b, w)| (m.sketch().name(b).map_or_else(|| format!("#{b}"), str::to_string), w));
                (m.labels().name(c).to_string(), named.collect())
            })
            .collect()
    }
}
