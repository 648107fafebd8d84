//! `classifyd run` on the embedded default transport (JSON lines): read
//! lines, hand each to the daemon's core, deliver predictions and dead
//! letters, checkpoint periodically and at exit, resume from the newest good
//! checkpoint at the line after the last one it covers of this input (an
//! input is known by its first line: [`crate::checkpoint::InputKey`];
//! another input starts at its first line).
//!
//! A checkpoint is taken only after the outputs of every line it covers are
//! flushed, so a restart never skips a delivery; predictions of lines after
//! the last checkpoint are delivered again (at least once), and each carries
//! its id for deduplication.
//!
//! The transport is a type ([`Jsonl`], a [`Transport`]): it opens the input
//! where the checkpoint resumes, then its loop ([`LinesLoop`]) reads the
//! input's lines (on a reader thread: [`LineSource`]) and hands each to
//! the daemon's core, which handles it, delivers its output to the
//! [`LinesSink`] and checkpoints; like the Kafka one, a plain thread that
//! owns the pipeline (requests are answered from copies of its model).

use std::path::PathBuf;
use std::time::Duration;

use super::ahead::{Batch, Line};
use super::lines::{LineEvent, LineSource, Resume};
use super::sinks::{DeadLetterSink, LinesSink, PredictionSink, open_output};
use crate::checkpoint::InputKey;
use crate::daemon::core::{Core, Payload, Position, Record};
use crate::daemon::{DaemonError, Opened, Start, Transport};
use crate::metrics::Telemetry;
use crate::pipeline::Prepared;
use crate::shutdown::Shutdown;

/// Settings of a JSON-lines run: its files.
#[derive(Clone, Debug)]
pub struct JsonlSettings {
    pub input: String,
    /// `--input-name`: keys the input's position instead of its first line.
    pub input_name: Option<String>,
    pub output: String,
    pub dead_letter: Option<PathBuf>,
    /// Messages to review (`--review`), appended.
    pub review: Option<PathBuf>,
}

/// The JSON-lines transport: its settings, then, once opened, the input.
pub(crate) struct Jsonl {
    s: JsonlSettings,
    source: Option<LineSource>,
}

impl Jsonl {
    pub(crate) fn new(s: JsonlSettings) -> Self {
        Jsonl { s, source: None }
    }
}

impl Transport for Jsonl {
    type Sink = LinesSink;

    /// Resumes from the checkpoint directory, then opens the input where
    /// it resumes and the outputs.
    fn open(&mut self, start: &Start<'_>) -> Result<Option<Opened<LinesSink>>, DaemonError> {
        let s = &self.s;
        let model = start.checkpointed(None)?;
        // The reader thread prepares each line for the pipeline's model
        // (whose features a JSON-lines run never changes), so the loop only
        // learns and predicts.
        let max = model.pipeline.config().max_message_bytes;
        let source = LineSource::open(
            &s.input,
            model.positions.clone(),
            s.input_name.clone(),
            (max, Some(model.pipeline.preparer())),
        )?;
        let predictions = PredictionSink::new(open_output(&s.output)?, &s.output).with_review(s.review.as_deref())?;
        let dead = DeadLetterSink::open(s.dead_letter.as_deref())?;
        let sink = LinesSink::new(predictions, dead, &source.name);
        // A lesson wakes the loop where it waits for lines (an open pipe
        // may send none for a long while).
        let wake = Some(source.waker());
        self.source = Some(source);
        Ok(Some(Opened {
            model,
            sink,
            publication: None,
            forward: None,
            wake,
        }))
    }

    /// Runs until the input ends or `shutdown` is triggered; checkpoints at exit.
    fn drive(
        self,
        core: Core<LinesSink>,
        shutdown: &Shutdown,
        telemetry: Option<&Telemetry>,
    ) -> Result<(), DaemonError> {
        let Some(source) = self.source else {
            return Err(DaemonError::Usage("the JSON-lines input was not opened".into()));
        };
        if let Some(t) = telemetry {
            crate::metrics::publish(core.pipeline());
            t.set_ready(true);
        }
        let mut daemon = LinesLoop {
            telemetry,
            core,
            source,
            input: None,
        };
        daemon.run(shutdown)?;
        daemon.shutdown()
    }
}

/// The JSON-lines loop: the core over the lines' sink, the input, and
/// where it stands in it.
struct LinesLoop<'a> {
    telemetry: Option<&'a Telemetry>,
    core: Core<LinesSink>,
    source: LineSource,
    /// The input, once its first line is read.
    input: Option<InputKey>,
}

impl LinesLoop<'_> {
    /// Reads until the input ends or `shutdown` is triggered.
    fn run(&mut self, shutdown: &Shutdown) -> Result<(), DaemonError> {
        loop {
            if shutdown.is_triggered() {
                tracing::info!("shutdown requested; finishing");
                return Ok(());
            }
            self.on_tick()?;
            match self.source.next(Duration::from_millis(100)) {
                None => continue,
                Some(LineEvent::Start(resume)) => self.on_start(resume),
                Some(LineEvent::End) => return self.on_end(shutdown),
                Some(LineEvent::Error(e)) => return Err(DaemonError::Io(e)),
                // A lesson: the next tick learns it.
                Some(LineEvent::Woken) => continue,
                Some(LineEvent::Lines(mut batch)) => {
                    let handled = self.on_lines(&mut batch);
                    self.source.done(batch);
                    handled?;
                }
            }
        }
    }
    /// The core's time-based work, before each read.
    fn on_tick(&mut self) -> Result<(), DaemonError> {
        self.core.tick(self.telemetry.is_some(), &mut ())?;
        Ok(())
    }

    /// The input's first line was read: where it resumes.
    fn on_start(&mut self, resume: Resume) {
        let name = &self.source.name;
        if resume.legacy {
            // Written by a build that kept one position for any input:
            // the best guess is the input it was given then, as then.
            tracing::warn!(
                input = %name,
                line = resume.skip,
                "the checkpoint predates per-input positions: assuming this is the input it was reading \
                 and resuming at its line; from now on its position is kept under the input's own key"
            );
        } else if resume.skip > 0 {
            tracing::info!(input = %name, key = %resume.key, line = resume.skip, "resuming the input after the lines the checkpoint holds");
        } else if self.core.resumed_from().is_some() {
            tracing::info!(input = %name, key = %resume.key, "the checkpoint has not read this input: reading it from its first line");
        }
        (self.core).start_input(resume.key.clone(), resume.skip, resume.legacy);
        self.input = Some(resume.key);
    }

    /// A batch of lines through the core, in order, with a checkpoint
    /// whenever enough updates are due (`--checkpoint-every-updates`
    /// counts lines, not batches).
    fn on_lines(&mut self, batch: &mut Batch) -> Result<(), DaemonError> {
        let prepared = batch.prepared.len() == batch.len();
        batch.each(|(number, _), line, p| {
            match line {
                Line::Oversized { prefix, length } => self.on_oversized(number, prefix, length)?,
                Line::Whole(bytes) => self.on_line(number, bytes, prepared.then_some(p))?,
            }
            if self.core.due_by_updates() {
                self.core.checkpoint("updates", &mut ())?;
            }
            Ok(())
        })
    }

    /// A line over the size cap: read past, never held, refused with its
    /// first bytes and its length.
    fn on_oversized(&mut self, number: u64, prefix: &[u8], length: u64) -> Result<(), DaemonError> {
        let payload = Payload::Oversized { prefix, length };
        self.core
            .handle(&line_record(started(&self.input)?, number, payload, prefix))
    }

    /// One line through the core (as the reader prepared it, when it did).
    fn on_line(
        &mut self,
        number: u64,
        bytes: &[u8],
        prepared: Option<(&mut Prepared, usize)>,
    ) -> Result<(), DaemonError> {
        let record = line_record(started(&self.input)?, number, Payload::Json(bytes), bytes);
        match prepared {
            Some(p) => self.core.handle_prepared(&record, p),
            None => self.core.handle(&record),
        }
    }

    /// The input ended. With the HTTP endpoint on, the daemon checkpoints
    /// and goes on answering requests until it is stopped.
    fn on_end(&mut self, shutdown: &Shutdown) -> Result<(), DaemonError> {
        if !self.core.serves() {
            return Ok(());
        }
        // Requests are answered from the whole input's model from now on.
        self.core.publish(true);
        self.core.checkpoint("end", &mut ())?;
        tracing::info!("the input ended; answering requests until stopped");
        while !shutdown.is_triggered() {
            self.core.wait_for_lessons(Duration::from_millis(100));
            self.on_tick()?;
        }
        Ok(())
    }

    /// The last checkpoint (none when nothing new was read or taught since
    /// the one it resumed from, which still says it all), and the run's
    /// report in the log.
    fn shutdown(mut self) -> Result<(), DaemonError> {
        let changed = self.core.messages() > 0 || self.core.lessons_learned() > 0;
        if changed || self.core.resumed_from().is_none() {
            self.core.finish(Duration::ZERO, &mut ())?;
        } else {
            self.core.stop_requests();
        }
        self.core.report();
        Ok(())
    }
}

/// Line `number` of `input` as a record: its `payload`, and its bytes (or,
/// over the size cap, first bytes) `line` for the checkpoint's mark. A
/// JSON line has no headers: its own fields name its reporter and user.
fn line_record<'r>(input: &'r InputKey, number: u64, payload: Payload<'r>, line: &'r [u8]) -> Record<'r> {
    Record {
        payload,
        key: None,
        reporter: None,
        user: None,
        stamp_ms: None,
        position: Position::Line { input, number, line },
    }
}

/// The input a line belongs to: known from its first line, which the
/// source announces ([`LineEvent::Start`]) before any line.
fn started(input: &Option<InputKey>) -> Result<&InputKey, DaemonError> {
    input
        .as_ref()
        .ok_or_else(|| DaemonError::Usage("the JSON-lines source sent a line before its start".into()))
}
