//! Lessons an endpoint takes (spamd's `TELL`, rspamd's `/learnspam`, a
//! console's teach button): each a [`Told`] handed over a bounded queue
//! ([`told_queue`]) to the daemon's loop, which makes it durable, learns
//! it through the pipeline's feedback path and answers what it did
//! ([`TellDone`]).

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use crate::pipeline::Outcome;

/// Lessons waiting for the daemon's loop.
pub(crate) const TOLD_QUEUE: usize = 1024;

/// What a `TELL` asks of the model.
#[derive(Debug)]
pub(crate) enum Tell {
    /// Learn the message as this class (a label already learned for its id
    /// is replaced, the same one again is no update).
    Learn(String),
    /// Take its label back.
    Forget,
    /// Take back every label of this reporter's that the record holds
    /// (an operator's act; the lesson names no message).
    ForgetReporter(String),
}

/// A lesson, for the daemon's loop to apply: about a raw e-mail (`email`),
/// a text (`text`), or with neither, the message the record knows by `id`
/// (a label for it is a late label; a forget needs nothing else).
#[derive(Debug)]
pub(crate) struct Told {
    /// The message's id: its Message-ID, else a hash of its bytes.
    pub(crate) id: String,
    /// The raw e-mail it teaches (empty: none).
    pub(crate) email: Vec<u8>,
    /// The text it teaches, when it is no e-mail.
    pub(crate) text: Option<String>,
    pub(crate) lesson: Tell,
    /// Who it is for (its personal features), unless `--mail-personal false`.
    pub(crate) user: Option<String>,
    /// Who tells (spamd's `User:`, rspamd's envelope user).
    pub(crate) reporter: Option<String>,
    /// The answer, once the loop applied it.
    pub(crate) reply: tokio::sync::oneshot::Sender<TellDone>,
}

/// What the loop did with a [`Told`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TellDone {
    /// The model changed: learned (or relabeled), or forgotten.
    Changed,
    /// Nothing to do: this label was learned already.
    Unchanged,
    /// A forget of a message with no label: not in the record, or never
    /// labeled. Nothing changed, nothing counted.
    NotLabeled,
    /// A label by id alone for a message the record does not hold (never
    /// seen here, or gone past its window): not learned; the lesson must
    /// carry the message.
    Unmatched,
    /// The message could not be read (the reason).
    Bad(String),
    /// This process does not learn (a predictor).
    NotLearner,
    /// The lesson could not be written to the lessons log (why): it was
    /// not learned, and the asker should try again.
    NotDurable(String),
    /// Its label is none of the model's classes (what it was, and the
    /// classes): refused, so a typo cannot add a class.
    UnknownLabel(String),
}

impl TellDone {
    /// How an outcome of the pipeline answers a `TELL`.
    pub(crate) fn of(outcome: &Outcome) -> TellDone {
        match outcome {
            Outcome::Learned { .. } | Outcome::FeedbackMatched { .. } | Outcome::Forgotten { found: true } => {
                TellDone::Changed
            }
            Outcome::Repeated => TellDone::Unchanged,
            Outcome::Forgotten { found: false } => TellDone::NotLabeled,
            Outcome::FeedbackUnmatched => TellDone::Unmatched,
            Outcome::Bad(bad) => TellDone::Bad(format!("{}: {}", bad.reason.as_str(), bad.detail)),
            Outcome::Passed => TellDone::NotLearner,
            Outcome::Predicted(_) | Outcome::Test | Outcome::Skipped => {
                TellDone::Bad("the message was not taken as a label".into())
            }
        }
    }
}

/// Wakes the daemon's loop where it waits (for its input's next lines),
/// so that a lesson is learned at once, not at the loop's next tick.
pub(crate) type Waker = Arc<dyn Fn() + Send + Sync>;

/// The endpoints' end of the lessons' queue: each lesson sent wakes the
/// loop.
#[derive(Clone)]
pub(crate) struct Teller {
    to: SyncSender<Told>,
    wake: Option<Waker>,
}

impl Teller {
    /// Queues `told` for the loop and wakes it; refused when the queue
    /// is full or the loop gone.
    pub(crate) fn try_send(&self, told: Told) -> Result<(), Untold> {
        match self.to.try_send(told) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(Untold::Full),
            Err(TrySendError::Disconnected(_)) => return Err(Untold::Gone),
        }
        if let Some(wake) = &self.wake {
            wake();
        }
        Ok(())
    }
}

/// Why a lesson was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Untold {
    /// [`TOLD_QUEUE`] lessons wait already.
    Full,
    /// The loop takes no more (it is stopping).
    Gone,
}

/// The lessons' queue: bounded, its sender waking the loop with `wake`.
pub(crate) fn told_queue(wake: Option<Waker>) -> (Teller, Receiver<Told>) {
    let (to, from) = std::sync::mpsc::sync_channel(TOLD_QUEUE);
    (Teller { to, wake }, from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tell_answers_by_what_the_pipeline_did() {
        use crate::message::{Bad, BadReason};
        assert_eq!(
            TellDone::of(&Outcome::Learned {
                correct: false,
                taught: true
            }),
            TellDone::Changed
        );
        // A held label is recorded on its message (learned once corroborated).
        assert_eq!(
            TellDone::of(&Outcome::Learned {
                correct: true,
                taught: false
            }),
            TellDone::Changed
        );
        assert_eq!(TellDone::of(&Outcome::Forgotten { found: true }), TellDone::Changed);
        assert_eq!(TellDone::of(&Outcome::Forgotten { found: false }), TellDone::NotLabeled);
        assert_eq!(TellDone::of(&Outcome::FeedbackUnmatched), TellDone::Unmatched);
        assert_eq!(TellDone::of(&Outcome::Repeated), TellDone::Unchanged);
        assert_eq!(TellDone::of(&Outcome::Passed), TellDone::NotLearner);
        let bad = Outcome::Bad(Bad::new(BadReason::BadEmail, "no header"));
        assert_eq!(TellDone::of(&bad), TellDone::Bad("bad_email: no header".into()));
    }
}
