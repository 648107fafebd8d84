//! The checkpoint protocol's own part: the checkpoint directory, the
//! positions a checkpoint covers (a record's, as the core hands them on),
//! when the next one is due ([`Cadence`]), and how many were written. The
//! core runs the protocol around it: the sink flushes, then [`Saving::save`]
//! writes the model and the positions past those outputs, then the
//! transport commits them.

use super::{Cadence, DaemonError};
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
}

impl Saving {
    /// Checkpoints into `dir` (none: positions kept, nothing written),
    /// resumed at `positions`, as often as `cadence` says.
    pub(crate) fn new(dir: Option<CheckpointDir>, positions: Positions, cadence: Cadence) -> Self {
        Saving {
            dir,
            positions,
            cadence,
            written: 0,
            failing: None,
        }
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
