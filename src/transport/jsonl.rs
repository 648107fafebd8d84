//! `classifyd run` on the embedded default transport (JSON lines): read
//! lines, hand each to the [`Pipeline`], deliver predictions and dead
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
//! The daemon is a type ([`JsonlDaemon`]): it reads the input's lines (on
//! a reader thread: [`LineSource`]) and hands each to the daemon core
//! ([`super::core`]), which handles it, delivers its output to the
//! [`LinesSink`] and checkpoints; like the Kafka one, a plain thread that
//! owns the pipeline (HTTP requests are answered from copies of its model:
//! `crate::http`).

use std::path::PathBuf;
use std::time::Duration;

use super::ahead::{Batch, Line};
use super::core::{Core, Payload, Position, Record};
use super::lines::{LineEvent, LineSource, Resume};
use super::saving::Saving;
use super::service::{Asked, Fronts};
use super::sinks::{DeadLetterSink, LinesSink, PredictionSink, open_output};
use super::{Cadence, DaemonError};
use crate::checkpoint::{CheckpointDir, InputKey, Resumed, load_or_new};
use crate::features::FeatureConfig;
use crate::http::HttpSettings;
use crate::mail::MailSettings;
use crate::metrics::Telemetry;
use crate::model::HyperChoice;
use crate::pipeline::{PipelineConfig, Prepared};
use crate::shutdown::Shutdown;

/// Settings of a JSON-lines run.
#[derive(Clone, Debug)]
pub struct JsonlSettings {
    pub input: String,
    /// `--input-name`: keys the input's position instead of its first line.
    pub input_name: Option<String>,
    pub output: String,
    pub dead_letter: Option<PathBuf>,
    /// Messages to review (`--review`), appended.
    pub review: Option<PathBuf>,
    pub checkpoint_dir: Option<PathBuf>,
    pub checkpoint_interval: Duration,
    /// Checkpoint after this many learned updates too (0: off).
    pub checkpoint_every_updates: u64,
    pub keep_checkpoints: usize,
    pub features: FeatureConfig,
    pub hyper: HyperChoice,
    pub pipeline: PipelineConfig,
    /// Predictions on request (`--http-addr`).
    pub http: Option<HttpSettings>,
    /// The mail protocols (`--spamd-addr`, `--rspamd-addr`).
    pub mail: Option<MailSettings>,
    /// The web console (`--console-addr`).
    pub console: Option<crate::console::ConsoleSettings>,
}

/// Runs until the input ends or `shutdown` is triggered; checkpoints at exit.
pub(crate) fn run_jsonl(
    s: &JsonlSettings,
    shutdown: &Shutdown,
    telemetry: Option<&Telemetry>,
) -> Result<(), DaemonError> {
    let mut daemon = JsonlDaemon::start(s, telemetry)?;
    loop {
        if shutdown.is_triggered() {
            tracing::info!("shutdown requested; finishing");
            break;
        }
        daemon.on_tick()?;
        match daemon.source.next(Duration::from_millis(100)) {
            None => continue,
            Some(LineEvent::Start(resume)) => daemon.on_start(resume),
            Some(LineEvent::End) => {
                daemon.on_end(shutdown)?;
                break;
            }
            Some(LineEvent::Error(e)) => return Err(DaemonError::Io(e)),
            // A lesson: the next tick learns it.
            Some(LineEvent::Woken) => continue,
            Some(LineEvent::Lines(mut batch)) => {
                let handled = daemon.on_lines(&mut batch);
                daemon.source.done(batch);
                handled?;
            }
        }
    }
    daemon.shutdown()
}

/// The JSON-lines daemon: the core over the lines' sink, the input, and
/// where it stands in it.
struct JsonlDaemon<'a> {
    s: &'a JsonlSettings,
    telemetry: Option<&'a Telemetry>,
    core: Core<LinesSink>,
    /// The HTTP endpoint, stopped before the last checkpoint.
    fronts: Fronts,
    source: LineSource,
    resumed_from: Option<PathBuf>,
    /// The input, once its first line is read.
    input: Option<InputKey>,
}

impl<'a> JsonlDaemon<'a> {
    /// Opens the checkpoint directory (resuming from it), the input, the
    /// outputs and the HTTP endpoint.
    fn start(s: &'a JsonlSettings, telemetry: Option<&'a Telemetry>) -> Result<Self, DaemonError> {
        let dir = match &s.checkpoint_dir {
            Some(d) => Some(CheckpointDir::open(d, s.keep_checkpoints)?),
            None => None,
        };
        let Resumed {
            pipeline,
            positions,
            from: resumed_from,
        } = load_or_new(dir.as_ref(), &s.features, &s.hyper, s.pipeline.clone())?;
        // The reader thread prepares each line for the pipeline's model
        // (whose features a JSON-lines run never changes), so the loop only
        // learns and predicts.
        let source = LineSource::open(
            &s.input,
            positions.clone(),
            s.input_name.clone(),
            (s.pipeline.max_message_bytes, Some(pipeline.preparer())),
        )?;
        let predictions = PredictionSink::new(open_output(&s.output)?, &s.output).with_review(s.review.as_deref())?;
        let dead = DeadLetterSink::open(s.dead_letter.as_deref())?;
        let cadence = Cadence::new(
            s.checkpoint_interval,
            s.checkpoint_every_updates,
            pipeline.model().version(),
        );
        let sink = LinesSink::new(predictions, dead, &source.name);
        let mut core = Core::new(pipeline, Saving::new(dir, positions, cadence), sink);
        if let Some(t) = telemetry {
            crate::metrics::publish(core.pipeline());
            t.set_ready(true);
        }
        // A lesson wakes the loop where it waits for lines (an open pipe
        // may send none for a long while).
        core.wake_for_lessons(source.waker());
        let fronts = core.serve(Asked {
            http: s.http.as_ref(),
            mail: s.mail.as_ref(),
            console: s.console.as_ref(),
        })?;
        Ok(JsonlDaemon {
            s,
            telemetry,
            core,
            fronts,
            source,
            resumed_from,
            input: None,
        })
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
            self.core.positions_mut().forget_legacy_line();
        } else if resume.skip > 0 {
            tracing::info!(input = %name, key = %resume.key, line = resume.skip, "resuming the input after the lines the checkpoint holds");
        } else if self.resumed_from.is_some() {
            tracing::info!(input = %name, key = %resume.key, "the checkpoint has not read this input: reading it from its first line");
        }
        self.core.positions_mut().start_reading(resume.key.clone(), resume.skip);
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
        let max = self.s.pipeline.max_message_bytes;
        let bad = self.core.pipeline_mut().refuse(crate::message::too_large(length, max));
        let position = Position::Line {
            input: started(&self.input)?,
            number,
            line: prefix,
        };
        self.core.sink_mut().refuse_prefix(&position, &bad, prefix, length)?;
        self.core.advance(position);
        Ok(())
    }

    /// One line through the core (as the reader prepared it, when it did).
    fn on_line(
        &mut self,
        number: u64,
        bytes: &[u8],
        prepared: Option<(&mut Prepared, usize)>,
    ) -> Result<(), DaemonError> {
        let record = Record {
            payload: Payload::Json(bytes),
            key: None,
            reporter: None,
            user: None,
            stamp_ms: None,
            position: Position::Line {
                input: started(&self.input)?,
                number,
                line: bytes,
            },
        };
        match prepared {
            Some(p) => self.core.handle_prepared(&record, p),
            None => self.core.handle(&record),
        }
    }

    /// The input ended. With the HTTP endpoint on, the daemon checkpoints
    /// and goes on answering requests until it is stopped.
    fn on_end(&mut self, shutdown: &Shutdown) -> Result<(), DaemonError> {
        if !self.fronts.any() {
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
        drop(std::mem::take(&mut self.fronts));
        let changed = self.core.messages() > 0 || self.core.lessons_learned() > 0;
        if changed || self.resumed_from.is_none() {
            self.core.finish(Duration::ZERO, &mut ())?;
        } else {
            self.core.stop_requests();
        }
        self.core.report();
        Ok(())
    }
}

/// The input a line belongs to: known from its first line, which the
/// source announces ([`LineEvent::Start`]) before any line.
fn started(input: &Option<InputKey>) -> Result<&InputKey, DaemonError> {
    input
        .as_ref()
        .ok_or_else(|| DaemonError::Usage("the JSON-lines source sent a line before its start".into()))
}
