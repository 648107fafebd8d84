//! `classifyd run` on the embedded default transport (JSON lines): read
//! lines, hand each to the [`Pipeline`], deliver predictions and dead
//! letters, checkpoint periodically and at exit, resume from the newest good
//! checkpoint at the line after the last one it covers of this input (an
//! input is known by its first line: [`super::position_key`];
//! another input starts at its first line).
//!
//! A checkpoint is taken only after the outputs of every line it covers are
//! flushed, so a restart never skips a delivery; predictions of lines after
//! the last checkpoint are delivered again (at least once), and each carries
//! its id for deduplication.
//!
//! The daemon is a type ([`JsonlDaemon`]): started, handed each event of
//! the input's reader thread, ticked for its time-based work, shut down;
//! like the Kafka one, a plain thread that owns the pipeline (HTTP
//! requests are answered from copies of its model: `crate::http`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::lines::{LineEvent, LineSource, Resume, record_position};
use super::sinks::{DeadLetterSink, PredictionSink, open_output};
use super::{Cadence, DaemonError, load_or_new};
use crate::checkpoint::{CheckpointDir, Positions};
use crate::clock::now_ms;
use crate::features::FeatureConfig;
use crate::http::{Feed, HttpServer, HttpSettings};
use crate::metrics::Telemetry;
use crate::model::HyperChoice;
use crate::pipeline::{Outcome, Pipeline, PipelineConfig};
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
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    pub lines: u64,
    /// The next line of this input to read (the lines before it are done).
    pub next_line: u64,
    pub resumed_from: Option<PathBuf>,
    pub checkpoints: u64,
}

/// Runs until the input ends or `shutdown` is triggered; checkpoints at exit.
pub fn run_jsonl(
    s: &JsonlSettings,
    shutdown: &Shutdown,
    telemetry: Option<&Telemetry>,
) -> Result<RunSummary, DaemonError> {
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
            Some(LineEvent::Oversized { number, prefix, length }) => daemon.on_oversized(number, prefix, length)?,
            Some(LineEvent::Line { number, bytes }) => daemon.on_line(number, bytes)?,
        }
    }
    daemon.shutdown()
}

/// The JSON-lines daemon: the pipeline, its input and outputs, and where
/// it stands in the input.
struct JsonlDaemon<'a> {
    s: &'a JsonlSettings,
    telemetry: Option<&'a Telemetry>,
    pipeline: Pipeline,
    /// The HTTP endpoint, stopped before the last checkpoint, and the
    /// copies of the model it answers from.
    http: Option<HttpServer>,
    feed: Option<Feed>,
    positions: Positions,
    dir: Option<CheckpointDir>,
    source: LineSource,
    predictions: PredictionSink,
    dead: DeadLetterSink,
    summary: RunSummary,
    /// This input's position key, known once its first line is read; until
    /// then the checkpoints keep the positions they were given.
    input_key: Option<String>,
    /// The last line handled, whose mark (see `checkpoint::LinePosition`) a
    /// checkpoint records with the position: kept, not hashed, per line;
    /// none until a line is.
    last_line: Option<Vec<u8>>,
    cadence: Cadence,
    last_publish: Instant,
}

impl<'a> JsonlDaemon<'a> {
    /// Opens the checkpoint directory (resuming from it), the input, the
    /// outputs and the HTTP endpoint.
    fn start(s: &'a JsonlSettings, telemetry: Option<&'a Telemetry>) -> Result<Self, DaemonError> {
        let dir = match &s.checkpoint_dir {
            Some(d) => Some(CheckpointDir::open(d, s.keep_checkpoints)?),
            None => None,
        };
        let (mut pipeline, positions, resumed_from) =
            load_or_new(dir.as_ref(), &s.features, &s.hyper, s.pipeline.clone())?;
        let source = LineSource::open(
            &s.input,
            positions.clone(),
            s.input_name.clone(),
            s.pipeline.max_message_bytes,
        )?;
        let predictions = PredictionSink::new(open_output(&s.output)?, &s.output).with_review(s.review.as_deref())?;
        let dead = DeadLetterSink::open(s.dead_letter.as_deref())?;
        let cadence = Cadence::new(
            s.checkpoint_interval,
            s.checkpoint_every_updates,
            pipeline.model().version(),
        );
        if let Some(t) = telemetry {
            crate::metrics::publish(&pipeline);
            t.set_ready(true);
        }
        let feed = s.http.as_ref().map(|_| Feed::start(&mut pipeline));
        let http = crate::http::serve(s.http.as_ref(), feed.as_ref().map(Feed::images))?;
        Ok(JsonlDaemon {
            s,
            telemetry,
            pipeline,
            http,
            feed,
            positions,
            dir,
            source,
            predictions,
            dead,
            summary: RunSummary {
                resumed_from,
                ..Default::default()
            },
            input_key: None,
            last_line: None,
            cadence,
            last_publish: Instant::now(),
        })
    }

    /// The time-based work before each read: the requests' predictions
    /// kept, the model published to the copies that answer them, metrics,
    /// checkpoints by time and by updates.
    fn on_tick(&mut self) -> Result<(), DaemonError> {
        self.pipeline.absorb_requests();
        if let Some(feed) = &mut self.feed {
            feed.publish(&self.pipeline, false);
        }
        if self.telemetry.is_some() && self.last_publish.elapsed() >= crate::metrics::PUBLISH_INTERVAL {
            crate::metrics::publish(&self.pipeline);
            self.last_publish = Instant::now();
        }
        let version = self.pipeline.model().version();
        if self.cadence.due_by_time() || self.cadence.due_by_updates(version) {
            self.checkpoint()?;
            self.cadence.done(version);
        }
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
            self.positions.forget_legacy_line();
        } else if resume.skip > 0 {
            tracing::info!(input = %name, key = %resume.key, line = resume.skip, "resuming the input after the lines the checkpoint holds");
        } else if self.summary.resumed_from.is_some() {
            tracing::info!(input = %name, key = %resume.key, "the checkpoint has not read this input: reading it from its first line");
        }
        self.summary.next_line = resume.skip;
        self.input_key = Some(resume.key);
    }

    /// A line over the size cap: read past, never held, refused with its
    /// first bytes and its length.
    fn on_oversized(&mut self, number: u64, prefix: Vec<u8>, length: u64) -> Result<(), DaemonError> {
        let bad = self
            .pipeline
            .refuse(crate::message::too_large(length, self.s.pipeline.max_message_bytes));
        let position = format!("{}:{}", self.source.name, number + 1);
        self.dead.write_prefix(&position, &bad, &prefix, length)?;
        self.done(number, prefix);
        Ok(())
    }

    /// One line through the pipeline; its prediction or dead letter written.
    fn on_line(&mut self, number: u64, bytes: Vec<u8>) -> Result<(), DaemonError> {
        let default_id = || (number + 1).to_string();
        let started = Instant::now();
        let outcome = self.pipeline.handle(&bytes, &default_id, now_ms());
        crate::metrics::handled(&outcome, started.elapsed());
        match outcome {
            Outcome::Predicted(p) => self.predictions.write(&p)?,
            Outcome::Bad(bad) => {
                let position = format!("{}:{}", self.source.name, number + 1);
                self.dead.write(&position, &bad, &bytes)?;
            }
            _ => {}
        }
        self.done(number, bytes);
        Ok(())
    }

    /// The input ended. With the HTTP endpoint on, the daemon checkpoints
    /// and goes on answering requests until it is stopped.
    fn on_end(&mut self, shutdown: &Shutdown) -> Result<(), DaemonError> {
        if self.http.is_none() {
            return Ok(());
        }
        self.checkpoint()?;
        tracing::info!("the input ended; answering POST /v1/classify until stopped");
        while !shutdown.is_triggered() {
            std::thread::sleep(Duration::from_millis(100));
            self.on_tick()?;
        }
        Ok(())
    }

    /// Line `number` is handled.
    fn done(&mut self, number: u64, line: Vec<u8>) {
        self.summary.lines += 1;
        self.summary.next_line = number + 1;
        self.last_line = Some(line);
    }

    /// Delivers every output so far, then records the position past them
    /// and saves the checkpoint.
    fn checkpoint(&mut self) -> Result<(), DaemonError> {
        self.predictions.flush()?;
        self.dead.flush()?;
        if let Some(dir) = self.dir.as_mut() {
            if let Some(key) = &self.input_key {
                record_position(
                    &mut self.positions,
                    key,
                    self.summary.next_line,
                    self.last_line.as_deref(),
                );
            }
            let saved = dir
                .save_pipeline(&self.pipeline, &self.positions)
                .inspect_err(|_| crate::metrics::checkpoint_failed())?;
            crate::metrics::checkpoint_saved(&saved);
            tracing::debug!(path = %saved.path.display(), bytes = saved.bytes, ms = saved.duration.as_millis() as u64, "checkpoint written");
        }
        self.summary.checkpoints += 1;
        Ok(())
    }

    /// The last checkpoint (none when nothing new was read since the one it
    /// resumed from, which still says it all), and the summary.
    fn shutdown(mut self) -> Result<RunSummary, DaemonError> {
        drop(self.http.take());
        drop(self.feed.take());
        self.pipeline.absorb_requests();
        if self.summary.lines > 0 || self.summary.resumed_from.is_none() {
            self.checkpoint()?;
        }
        let pipeline = &self.pipeline;
        let r = pipeline.progressive().report();
        tracing::info!(
            lines = self.summary.lines,
            learned = pipeline.counters().learned,
            predicted = pipeline.counters().predicted,
            bad = pipeline.counters().bad_total(),
            accuracy = r.accuracy,
            "run finished"
        );
        Ok(self.summary)
    }
}
