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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::lines::{LEGACY_POSITION, LineEvent, LineSource, record_position};
use super::sinks::{DeadLetterSink, PredictionSink, open_output};
use super::{Cadence, DaemonError, load_or_new};
use crate::checkpoint::{self, CheckpointDir};
use crate::clock::now_ms;
use crate::features::FeatureConfig;
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
    let mut dir = match &s.checkpoint_dir {
        Some(d) => Some(CheckpointDir::open(d, s.keep_checkpoints)?),
        None => None,
    };
    let (mut pipeline, mut positions, resumed_from) =
        load_or_new(dir.as_ref(), &s.features, &s.hyper, s.pipeline.clone())?;
    let mut source = LineSource::open(
        &s.input,
        positions.clone(),
        s.input_name.clone(),
        s.pipeline.max_message_bytes,
    )?;
    let mut predictions = PredictionSink::new(open_output(&s.output)?, &s.output).with_review(s.review.as_deref())?;
    let mut dead = DeadLetterSink::open(s.dead_letter.as_deref())?;
    let mut summary = RunSummary {
        resumed_from,
        ..Default::default()
    };
    // This input's position key, known once its first line is read; until
    // then the checkpoints keep the positions they were given.
    let mut input_key: Option<String> = None;
    // The last line handled, whose mark (see `checkpoint::MARK_PREFIX`) a
    // checkpoint records with the position: kept, not hashed, per line;
    // none until a line is.
    let mut last_line: Option<Vec<u8>> = None;
    let mut cadence = Cadence::new(
        s.checkpoint_interval,
        s.checkpoint_every_updates,
        pipeline.model().version(),
    );
    let name = source.name.clone();
    if let Some(t) = telemetry {
        crate::metrics::publish(&pipeline);
        t.set_ready(true);
    }
    let mut last_publish = Instant::now();

    let mut checkpoint = |pipeline: &Pipeline,
                          positions: &mut BTreeMap<String, u64>,
                          // The input's key (once known), its next line, the last line read.
                          position: (Option<&str>, u64, Option<&[u8]>),
                          predictions: &mut PredictionSink,
                          dead: &mut DeadLetterSink|
     -> Result<(), DaemonError> {
        // Deliver before recording the position past these lines.
        predictions.flush()?;
        dead.flush()?;
        if let Some(dir) = dir.as_mut() {
            if let (Some(key), next_line, last_line) = position {
                record_position(positions, key, next_line, last_line);
            }
            let saved = dir
                .save(&mut checkpoint::capture(pipeline, positions))
                .inspect_err(|_| crate::metrics::checkpoint_failed())?;
            crate::metrics::checkpoint_saved(&saved);
            tracing::debug!(path = %saved.path.display(), bytes = saved.bytes, ms = saved.duration.as_millis() as u64, "checkpoint written");
        }
        Ok(())
    };

    loop {
        if shutdown.is_triggered() {
            tracing::info!("shutdown requested; finishing");
            break;
        }
        if telemetry.is_some() && last_publish.elapsed() >= crate::metrics::PUBLISH_INTERVAL {
            crate::metrics::publish(&pipeline);
            last_publish = Instant::now();
        }
        if cadence.due_by_time() || cadence.due_by_updates(pipeline.model().version()) {
            checkpoint(
                &pipeline,
                &mut positions,
                (input_key.as_deref(), summary.next_line, last_line.as_deref()),
                &mut predictions,
                &mut dead,
            )?;
            summary.checkpoints += 1;
            cadence.done(pipeline.model().version());
        }
        match source.next(Duration::from_millis(100)) {
            None => continue,
            Some(LineEvent::Start(resume)) => {
                if resume.legacy {
                    // Written by a build that kept one position for any input:
                    // the best guess is the input it was given then, as then.
                    tracing::warn!(
                        input = %name,
                        line = resume.skip,
                        "the checkpoint predates per-input positions: assuming this is the input it was reading \
                         and resuming at its line; from now on its position is kept under the input's own key"
                    );
                    positions.remove(LEGACY_POSITION);
                } else if resume.skip > 0 {
                    tracing::info!(input = %name, key = %resume.key, line = resume.skip, "resuming the input after the lines the checkpoint holds");
                } else if summary.resumed_from.is_some() {
                    tracing::info!(input = %name, key = %resume.key, "the checkpoint has not read this input: reading it from its first line");
                }
                summary.next_line = resume.skip;
                input_key = Some(resume.key);
            }
            Some(LineEvent::End) => break,
            Some(LineEvent::Error(e)) => return Err(DaemonError::Io(e)),
            Some(LineEvent::Oversized { number, prefix, length }) => {
                // Read past, never held: refused with its first bytes and its length.
                let bad = pipeline.refuse(crate::message::too_large(length, s.pipeline.max_message_bytes));
                dead.write_prefix(&format!("{name}:{}", number + 1), &bad, &prefix, length)?;
                summary.lines += 1;
                summary.next_line = number + 1;
                last_line = Some(prefix);
            }
            Some(LineEvent::Line { number, bytes }) => {
                let default_id = || (number + 1).to_string();
                let started = Instant::now();
                let outcome = pipeline.handle(&bytes, &default_id, now_ms());
                crate::metrics::handled(&outcome, started.elapsed());
                match outcome {
                    Outcome::Predicted(p) => predictions.write(&p)?,
                    Outcome::Bad(bad) => dead.write(&format!("{name}:{}", number + 1), &bad, &bytes)?,
                    _ => {}
                }
                summary.lines += 1;
                summary.next_line = number + 1;
                last_line = Some(bytes);
            }
        }
    }
    // With nothing new read, the checkpoint it resumed from still says it all.
    if summary.lines > 0 || summary.resumed_from.is_none() {
        let position = (input_key.as_deref(), summary.next_line, last_line.as_deref());
        checkpoint(&pipeline, &mut positions, position, &mut predictions, &mut dead)?;
        summary.checkpoints += 1;
    }
    let r = pipeline.progressive().report();
    tracing::info!(
        lines = summary.lines,
        learned = pipeline.counters().learned,
        predicted = pipeline.counters().predicted,
        bad = pipeline.counters().bad_total(),
        accuracy = r.accuracy,
        "run finished"
    );
    Ok(summary)
}
