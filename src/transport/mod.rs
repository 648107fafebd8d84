//! Transports: they move bytes and positions between the outside and the
//! one [`crate::pipeline::Pipeline`], and nothing else. The daemon [`core`] takes each
//! record through the pipeline to a transport's sink and runs the
//! checkpoint protocol, once for all, holding its parts ([`saving`]: the
//! checkpoint's; [`service`]: the endpoints'); [`jsonl`] reads JSON lines from a
//! file or stdin ([`lines`]) and writes them ([`sinks`]); [`kafka`] reads
//! and writes Kafka topics. What both need to start lives here: the
//! checkpoint cadence ([`Cadence`]) and the error a run stops with
//! ([`DaemonError`]); resuming is [`crate::checkpoint::load_or_new`], the
//! clock [`crate::clock`] and shutdown [`crate::shutdown`].
//!
//! A transport may use the pipeline, the checkpoint directory and the
//! metrics; none of those knows a transport.

pub(crate) mod ahead;
pub(crate) mod bounded;
pub(crate) mod core;
pub(crate) mod jsonl;
#[cfg(feature = "kafka")]
pub(crate) mod kafka;
pub(crate) mod lessons;
pub(crate) mod lines;
pub(crate) mod publication;
pub(crate) mod saving;
pub(crate) mod service;
pub(crate) mod sinks;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::checkpoint::CheckpointError;

/// Why the daemon stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// Transparent: the error's own message, once (`{0}` with `#[from]`
    /// printed it twice in `main`'s cause chain).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("checkpoint {path} cannot be restored")]
    Restore {
        path: PathBuf,
        #[source]
        source: crate::checkpoint::RestoreError,
    },
    /// A Kafka client failed: which one, or at what.
    #[cfg(feature = "kafka")]
    #[error("kafka: {what}")]
    Kafka {
        what: &'static str,
        #[source]
        source: rdkafka::error::KafkaError,
    },
    /// Settings that cannot work together.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Serve(#[from] crate::serving::ServeError),
}

/// When a run checkpoints: every `interval`, and after every
/// `every_updates` learned updates (0: only by time).
#[derive(Clone, Debug)]
pub(crate) struct Cadence {
    interval: Duration,
    every_updates: u64,
    last: Instant,
    /// The model's version at the last checkpoint.
    updates_at: u64,
    /// After a failed save: when the next try is due, and the wait after
    /// it should it fail too (doubling from [`RETRY_FIRST`] to
    /// [`RETRY_MOST`]). Until then no checkpoint is due, by time or by
    /// updates.
    retry: Option<(Instant, Duration)>,
}

/// The first wait after a failed checkpoint.
pub(crate) const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between tries of a failing checkpoint.
pub(crate) const RETRY_MOST: Duration = Duration::from_secs(30);

impl Cadence {
    /// A cadence starting now, for a model at `version`.
    pub(crate) fn new(interval: Duration, every_updates: u64, version: u64) -> Self {
        Cadence {
            interval,
            every_updates,
            last: Instant::now(),
            updates_at: version,
            retry: None,
        }
    }

    /// Whether a failed checkpoint's retry is still ahead.
    fn waiting_to_retry(&self) -> bool {
        self.retry.is_some_and(|(at, _)| Instant::now() < at)
    }

    /// Whether `interval` has passed since the last checkpoint, or a
    /// failed one's retry is due.
    pub(crate) fn due_by_time(&self) -> bool {
        match self.retry {
            Some((at, _)) => Instant::now() >= at,
            None => self.last.elapsed() >= self.interval,
        }
    }

    /// Whether `every_updates` updates were learned since the last
    /// checkpoint (and no failed one's retry is still ahead).
    pub(crate) fn due_by_updates(&self, version: u64) -> bool {
        self.every_updates > 0 && version - self.updates_at >= self.every_updates && !self.waiting_to_retry()
    }

    /// A checkpoint of the model at `version` was written.
    pub(crate) fn done(&mut self, version: u64) {
        self.last = Instant::now();
        self.updates_at = version;
        self.retry = None;
    }

    /// A checkpoint could not be saved: the next try waits, twice as long
    /// as the last wait, from [`RETRY_FIRST`] to [`RETRY_MOST`]; returns
    /// the wait.
    pub(crate) fn failed(&mut self) -> Duration {
        let wait = self.retry.map_or(RETRY_FIRST, |(_, w)| w);
        self.retry = Some((Instant::now() + wait, (wait * 2).min(RETRY_MOST)));
        wait
    }

    /// A checkpoint was put off: the next try is one interval away.
    pub(crate) fn put_off(&mut self) {
        self.last = Instant::now();
    }
}
