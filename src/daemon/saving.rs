//! The checkpoint protocol's own part: the checkpoint directory, the
//! positions a checkpoint covers (a record's, as the core hands them on),
//! when the next one is due ([`Cadence`]), and how many were written. The
//! core runs the protocol around it: the sink flushes, then [`Saving::save`]
//! writes the model and the positions past those outputs, then the
//! transport commits them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::DaemonError;
use crate::checkpoint::{CheckpointDir, InputKey, Positions};
use crate::pipeline::Pipeline;

/// Where a record stands in its input: what a checkpoint records once it
/// is handled.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Position<'a> {
    /// Offset `offset` of a Kafka topic's partition.
    Offset {
        topic: &'a str,
        partition: i32,
        offset: u64,
    },
    /// Line `number` (from 0) of JSON-lines input `input`, whose bytes
    /// (or, over the size cap, first bytes) are `line`: a checkpoint
    /// records the next line and the mark of this one.
    Line {
        input: &'a InputKey,
        number: u64,
        line: &'a [u8],
    },
}

impl Position<'_> {
    /// The id a message without one is given: `topic/partition/offset`, or
    /// its line's number from 1.
    pub(crate) fn default_id(&self) -> String {
        match self {
            Position::Offset {
                topic,
                partition,
                offset,
            } => format!("{topic}/{partition}/{offset}"),
            Position::Line { number, .. } => (number + 1).to_string(),
        }
    }
}

/// Where checkpoints go, what they cover, and when.
pub(crate) struct Saving {
    dir: Option<CheckpointDir>,
    positions: Positions,
    cadence: Cadence,
    /// Checkpoints written by this run.
    written: u64,
    /// Why the last save failed, while no save has succeeded since.
    failing: Option<DaemonError>,
    /// The checkpoint the run resumed from (none: a new model).
    resumed_from: Option<PathBuf>,
}

impl Saving {
    /// Checkpoints into `dir` (none: positions kept, nothing written),
    /// resumed at `positions` (from the checkpoint `resumed_from`), as
    /// often as `cadence` says.
    pub(crate) fn new(
        dir: Option<CheckpointDir>,
        positions: Positions,
        cadence: Cadence,
        resumed_from: Option<PathBuf>,
    ) -> Self {
        Saving {
            dir,
            positions,
            cadence,
            written: 0,
            failing: None,
            resumed_from,
        }
    }

    /// The checkpoint the run resumed from, if any.
    pub(crate) fn resumed_from(&self) -> Option<&Path> {
        self.resumed_from.as_deref()
    }

    pub(crate) fn dir(&self) -> Option<&CheckpointDir> {
        self.dir.as_ref()
    }

    pub(crate) fn positions(&self) -> &Positions {
        &self.positions
    }

    /// The positions, for what a transport records besides its records'
    /// (an input's start, read from its first line).
    pub(crate) fn positions_mut(&mut self) -> &mut Positions {
        &mut self.positions
    }

    /// Records that the record at `position` is done: a Kafka offset, or a
    /// JSON-lines line (kept as it stands, recorded at the next checkpoint).
    pub(crate) fn advance(&mut self, position: Position<'_>) {
        match position {
            Position::Offset {
                topic,
                partition,
                offset,
            } => self.positions.set_offset(topic, partition, offset + 1),
            Position::Line { input, number, line } => self.positions.line_done(input, number, line),
        }
    }

    /// Whether enough updates were learned (the model is at `version`)
    /// for a checkpoint.
    pub(crate) fn due_by_updates(&self, version: u64) -> bool {
        self.cadence.due_by_updates(version)
    }

    /// Why a checkpoint is due, if one is: the updates, or the interval.
    pub(crate) fn due(&self, version: u64) -> Option<&'static str> {
        match (self.due_by_updates(version), self.cadence.due_by_time()) {
            (true, _) => Some("updates"),
            (false, true) => Some("interval"),
            (false, false) => None,
        }
    }

    /// The sink could not deliver: the next try is one interval away.
    pub(crate) fn put_off(&mut self) {
        crate::metrics::checkpoint_failed();
        self.cadence.put_off();
    }

    /// Saves `pipeline` with the positions so far and, when the lessons
    /// log has one, its generation `lessons` (the sink has delivered every
    /// output before them); then the cadence starts again. Returns whether
    /// a checkpoint was written (not without a directory). A save that
    /// fails (a full disk, an unwritable directory) stops nothing: it is
    /// logged, counted and retried with back-off ([`Cadence::failed`]),
    /// `Ok(None)` says so, and nothing it would have covered is committed
    /// meanwhile ([`Saving::failure`] keeps why).
    pub(crate) fn save(&mut self, pipeline: &Pipeline, lessons: Option<u64>, why: &str) -> Option<bool> {
        self.positions.settle();
        if let Some(g) = lessons {
            self.positions.set_lessons(g);
        }
        let mut wrote = false;
        if let Some(dir) = self.dir.as_mut() {
            match dir.save_pipeline(pipeline, &self.positions) {
                Ok(saved) => {
                    crate::metrics::checkpoint_saved(saved.bytes, saved.duration);
                    tracing::debug!(path = %saved.path.display(), bytes = saved.bytes, ms = saved.duration.as_millis() as u64, why, "checkpoint written");
                    wrote = true;
                }
                Err(error) => {
                    crate::metrics::checkpoint_failed();
                    let retry_in = self.cadence.failed();
                    tracing::error!(error = %error, why, retry_in_ms = retry_in.as_millis() as u64, "checkpoint failed: serving and learning go on, nothing it would cover is committed; retrying");
                    self.failing = Some(error.into());
                    return None;
                }
            }
        }
        self.failing = None;
        self.cadence.done(pipeline.model().version());
        self.written += 1;
        Some(wrote)
    }

    /// Why the last save failed, while none has succeeded since (taken).
    pub(crate) fn failure(&mut self) -> Option<DaemonError> {
        self.failing.take()
    }

    /// Checkpoints this run took (written, or without a directory, the
    /// positions settled).
    pub(crate) fn written(&self) -> u64 {
        self.written
    }
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
