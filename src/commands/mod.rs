//! Every command, run from its parsed flags ([`execute`]): the daemon
//! ([`run`]), `eval`, `learn`, `predict`, `inspect` and, with Kafka,
//! `demo-produce` and `tail`. The binary only parses flags, sets up
//! logging and maps errors to an exit status.

mod eval;
#[cfg(feature = "kafka")]
mod kafka;
mod learn;
mod run;

pub use eval::{EvalResult, LabelBudget, eval};
#[cfg(feature = "kafka")]
pub use kafka::{demo, tail};
pub use learn::{LearnSummary, learn};
pub use run::{RunSettings, run};

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::PathBuf;

use serde::Serialize;

use crate::checkpoint::{self, CheckpointDir, CheckpointError, Positions};
use crate::config::{Command, ConfigFile, InspectArgs, PredictArgs};
use crate::eval::Report;
use crate::features::FeatureConfig;
use crate::model::{Hyper, State, Task};
use crate::pipeline::{Pipeline, PipelineConfig};
use crate::transport::bounded::{Got, read_bounded};
use crate::transport::sinks::{PredictionSink, open_output};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    // The cause is in the message itself, not the error chain, so it is
    // printed once.
    #[error("{path}: {error}")]
    Io { path: String, error: io::Error },
    /// An output's error, which names its file itself.
    #[error(transparent)]
    Output(io::Error),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("no checkpoint in {0}")]
    NoCheckpoint(PathBuf),
    #[error(transparent)]
    Plot(#[from] crate::plot::PlotError),
    /// The daemon's error, or opening or resuming a checkpoint directory
    /// (`learn`).
    #[error(transparent)]
    Daemon(#[from] crate::daemon::DaemonError),
    #[error(transparent)]
    Metrics(#[from] crate::metrics::MetricsError),
    #[error("cannot install signal handlers")]
    Signals(#[source] io::Error),
    #[cfg(feature = "kafka")]
    #[error(transparent)]
    Demo(#[from] crate::demo::DemoError),
}

/// Runs `command`, whose results go to stdout (a report, an inspection)
/// or the log (what `learn` and `predict` did).
pub fn execute(command: Command, file: &ConfigFile) -> Result<(), CommandError> {
    let mut out = io::stdout().lock();
    match command {
        Command::Run(a) => run(*a, file)?,
        Command::Eval(a) => {
            let (result, _) = eval(&a)?;
            if a.json {
                print_json(&mut out, &result)?;
            } else {
                write!(out, "{}", result.render()).map_err(CommandError::Output)?;
            }
        }
        Command::Learn(a) => {
            let s = learn(&a)?;
            eprintln!("{}", s.render(&a.label));
        }
        Command::Predict(a) => {
            let (ok, bad) = predict(&a)?;
            tracing::info!(predicted = ok, skipped = bad, "predict finished");
        }
        Command::Inspect(a) => {
            let i = inspect(&a)?;
            if a.json {
                print_json(&mut out, &i)?;
            } else {
                i.render(&mut out).map_err(CommandError::Output)?;
            }
        }
        #[cfg(feature = "kafka")]
        Command::DemoProduce(a) => {
            let (sent, labels) = demo(&a, file)?;
            tracing::info!(sent, labels, "demo producer finished");
        }
        #[cfg(feature = "kafka")]
        Command::Tail(a) => {
            let n = tail(&a, file)?;
            tracing::debug!(records = n, "tail finished");
        }
        #[cfg(not(feature = "kafka"))]
        Command::DemoProduce(_) | Command::Tail(_) => {
            return Err(CommandError::Usage("this classifyd was built without Kafka".into()));
        }
    }
    Ok(())
}

/// `value` as pretty JSON and a newline.
fn print_json(out: &mut impl Write, value: &impl Serialize) -> Result<(), CommandError> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(|e| CommandError::Output(e.into()))?;
    writeln!(out).map_err(CommandError::Output)
}

fn io_at(path: impl Into<String>) -> impl FnOnce(io::Error) -> CommandError {
    let path = path.into();
    move |error| CommandError::Io { path, error }
}

/// The newest good checkpoint in `dir`: its pipeline, its input positions
/// and its path.
fn load_checkpoint(dir: &std::path::Path, explain: usize) -> Result<(Pipeline, Positions, PathBuf), CommandError> {
    let d = CheckpointDir::open_read(dir)?;
    // Read, never learned from: the model as it was saved.
    let cfg = PipelineConfig {
        limits: crate::model::Limits::unbounded(),
        explain,
        ..PipelineConfig::default()
    };
    d.load_latest(&cfg)?
        .ok_or_else(|| CommandError::NoCheckpoint(dir.to_path_buf()))
}

/// `predict`: one prediction line per input line with text; bad lines are
/// reported on stderr and skipped. Returns (predicted, refused).
pub fn predict(args: &PredictArgs) -> Result<(u64, u64), CommandError> {
    let mut pipeline = load_checkpoint(&args.checkpoint_dir, args.explain)?.0;
    let input: Box<dyn io::Read> = if args.input == "-" {
        Box::new(io::stdin())
    } else {
        Box::new(File::open(&args.input).map_err(io_at(&args.input))?)
    };
    let mut out = PredictionSink::new(open_output(&args.output).map_err(CommandError::Output)?, &args.output);
    let (mut ok, mut bad) = (0, 0);
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let max = pipeline.config().max_message_bytes;
    let mut line = Vec::new();
    for i in 1u64.. {
        let got = read_bounded(&mut reader, max, &mut line).map_err(io_at(&args.input))?;
        let refused = match got {
            Got::End => break,
            Got::Oversized { length, .. } => Err(crate::message::too_large(length, max)),
            Got::Line { .. } if line.iter().all(u8::is_ascii_whitespace) => continue,
            Got::Line { .. } => pipeline
                .predictor_mut()
                .predict_only(&line, &|| i.to_string())
                .map(|p| out.write(&p)),
        };
        match refused {
            Ok(written) => {
                written.map_err(CommandError::Output)?;
                ok += 1;
            }
            Err(b) => {
                tracing::warn!(line = i, reason = %b.reason, error = %b.detail, "skipping line");
                bad += 1;
            }
        }
    }
    out.flush().map_err(CommandError::Output)?;
    Ok((ok, bad))
}

/// A model summary for `inspect`.
#[derive(Debug, Serialize)]
pub struct Inspection {
    /// The checkpoint file read.
    pub checkpoint: PathBuf,
    /// Where it stands in its inputs: the next line of each JSON-lines
    /// input (`jsonl:` and its first line's hash) and the next offset of
    /// each Kafka partition (`topic/partition`).
    pub positions: BTreeMap<String, u64>,
    pub model: Hyper,
    pub features: FeatureConfig,
    pub task: Option<Task>,
    pub version: u64,
    pub labels: Vec<String>,
    pub non_zero_buckets: u64,
    pub named_buckets: usize,
    /// The xxh3-64 of the model's state as a checkpoint holds it (labels,
    /// weights, averaging and optimizer state, version): two checkpoints
    /// with the same digest hold the same model.
    pub model_digest: String,
    pub progressive: Report,
    /// Published predictions judged by their late labels.
    pub published: Report,
    /// Per class: its strongest features (name, weight).
    pub top_features: Vec<(String, Vec<(String, f32)>)>,
    /// The fused naive Bayes (binary tasks): its weight in the scores and
    /// the examples it has counted; none without a fusion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fusion: Option<FusionSummary>,
    /// A binary linear model's stack: each member's weight and the bias;
    /// none without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<StackSummary>,
    /// How far labels were believed, and the least trusted reporters.
    pub feedback: FeedbackSummary,
}

/// What `inspect` says of the labels and their reporters.
#[derive(Debug, Serialize)]
pub struct FeedbackSummary {
    /// The recent share of labels that contradicted a confident prediction.
    pub contradiction_share: f32,
    pub labels_in_full: u64,
    pub labels_down_weighted: u64,
    pub labels_held: u64,
    pub labels_corroborated: u64,
    /// Labels as facts (docs/feedback.md): said again (not learned),
    /// replaced, forgotten; forgets of ids not in the record, and refused.
    pub labels_repeated: u64,
    pub labels_replaced: u64,
    pub labels_forgotten: u64,
    pub forgets_unmatched: u64,
    pub forgets_refused: u64,
    pub reporters_tracked: usize,
    pub reporters_evicted: u64,
    pub reporters_unreliable: usize,
    /// The least trusted reporters, least first ("" is the anonymous one).
    pub least_trusted: Vec<ReporterSummary>,
}

/// One reporter, as `inspect` lists it.
#[derive(Debug, Serialize)]
pub struct ReporterSummary {
    pub reporter: String,
    pub trust: f32,
    pub labels: u64,
    pub held: u64,
    /// Its labels that another reporter replaced or forgot.
    pub overridden: u64,
    pub contradiction_share: f32,
    pub excess_over_everyone: f32,
}

/// Reporters `inspect` lists.
const LEAST_TRUSTED_SHOWN: usize = 10;

fn feedback_summary(p: &crate::pipeline::Pipeline) -> FeedbackSummary {
    let (c, r) = (p.counters(), p.reporters());
    FeedbackSummary {
        contradiction_share: p.contradiction_share(),
        labels_in_full: c.labels_in_full,
        labels_down_weighted: c.labels_down_weighted,
        labels_held: c.labels_held,
        labels_corroborated: c.labels_corroborated,
        labels_repeated: c.labels_repeated,
        labels_replaced: c.labels_replaced,
        labels_forgotten: c.labels_forgotten,
        forgets_unmatched: c.forgets_unmatched,
        forgets_refused: c.forgets_refused,
        reporters_tracked: r.len(),
        reporters_evicted: r.evicted,
        reporters_unreliable: r.unreliable(),
        least_trusted: r
            .least_trusted(LEAST_TRUSTED_SHOWN)
            .into_iter()
            .map(|(name, rec, trust)| ReporterSummary {
                reporter: name.to_string(),
                trust,
                labels: rec.labels,
                held: rec.held,
                overridden: rec.overridden,
                contradiction_share: rec.share(),
                excess_over_everyone: rec.excess(),
            })
            .collect(),
    }
}

impl FeedbackSummary {
    fn render(&self, out: &mut impl Write) -> io::Result<()> {
        writeln!(
            out,
            "labels: {} learned in full, {} down-weighted, {} held, {} held then confirmed; \
             recent share contradicting a confident prediction {:.4}",
            self.labels_in_full,
            self.labels_down_weighted,
            self.labels_held,
            self.labels_corroborated,
            self.contradiction_share
        )?;
        writeln!(
            out,
            "labels as facts: {} said again (not learned), {} replaced, {} forgotten; \
             forgets: {} of ids not in the record, {} refused",
            self.labels_repeated,
            self.labels_replaced,
            self.labels_forgotten,
            self.forgets_unmatched,
            self.forgets_refused
        )?;
        writeln!(
            out,
            "reporters: {} tracked ({} dropped at the cap), {} unreliable; least trusted:",
            self.reporters_tracked, self.reporters_evicted, self.reporters_unreliable
        )?;
        writeln!(
            out,
            "  {:>6}  {:>8}  {:>6}  {:>10}  {:>6}  {:>7}  reporter",
            "trust", "labels", "held", "overridden", "share", "excess"
        )?;
        for r in &self.least_trusted {
            let name = if r.reporter.is_empty() {
                "(anonymous)"
            } else {
                &r.reporter
            };
            writeln!(
                out,
                "  {:>6.3}  {:>8}  {:>6}  {:>10}  {:>6.3}  {:>7.3}  {name}",
                r.trust, r.labels, r.held, r.overridden, r.contradiction_share, r.excess_over_everyone
            )?;
        }
        Ok(())
    }
}

/// What `inspect` says of a model's fusion.
#[derive(Debug, Serialize)]
pub struct FusionSummary {
    pub weight: f32,
    pub examples: u64,
}

/// What `inspect` says of a model's stack (src/model/stack.rs).
#[derive(Debug, Serialize)]
pub struct StackSummary {
    /// Each member's weight, by name (`linear`, `personal`,
    /// `naive_bayes`, `byte_lr`).
    pub weights: BTreeMap<&'static str, f32>,
    pub bias: f32,
    /// The members' soft bound (0: none, a model from before the stack).
    pub bound: f32,
}

impl StackSummary {
    fn of(s: &crate::model::stack::Stack) -> Self {
        use crate::model::stack::Member;
        StackSummary {
            weights: Member::ALL.iter().map(|&m| (m.name(), s.weight(m))).collect(),
            bias: s.bias(),
            bound: s.bound(),
        }
    }
}

pub fn inspect(args: &InspectArgs) -> Result<Inspection, CommandError> {
    let (pipeline, positions, checkpoint) = load_checkpoint(&args.checkpoint_dir, 0)?;
    // As the checkpoint keys them; the marks beside the JSON-lines
    // positions are for the reader's check, not for people.
    let positions = positions.to_maps().0.into_iter().collect();
    let m = pipeline.model();
    let model_digest = format!("{:016x}", checkpoint::model_digest(m));
    let k = m.labels().len();
    let non_zero = match m.state() {
        State::Linear(w) => (0..m.features().buckets() as u32)
            .filter(|&b| (0..k).any(|c| w.get(b, c) != 0.0))
            .count() as u64,
        State::NaiveBayes(nb) => nb.vocabulary,
    };
    let top_features = (0..k)
        .map(|c| {
            let feats = m
                .top_features(c, args.top)
                .into_iter()
                .map(|(b, w)| (m.sketch().name(b).map_or_else(|| format!("#{b}"), str::to_string), w))
                .collect();
            (m.labels().name(c).to_string(), feats)
        })
        .collect();
    Ok(Inspection {
        checkpoint,
        positions,
        model: m.hyper().clone(),
        features: *m.features(),
        task: m.task(),
        version: m.version(),
        labels: m.labels().names().to_vec(),
        non_zero_buckets: non_zero,
        named_buckets: m.sketch().len(),
        model_digest,
        progressive: pipeline.progressive().report(),
        published: pipeline.published().report(),
        top_features,
        fusion: m.fusion.as_ref().map(|f| FusionSummary {
            weight: f.weight,
            examples: f.nb.docs,
        }),
        stack: m.stack().map(StackSummary::of),
        feedback: feedback_summary(&pipeline),
    })
}

impl Inspection {
    pub fn render(&self, out: &mut impl Write) -> io::Result<()> {
        writeln!(out, "checkpoint {}", self.checkpoint.display())?;
        writeln!(
            out,
            "positions (next line of each JSON-lines input, next offset of each Kafka partition):"
        )?;
        if self.positions.is_empty() {
            writeln!(out, "  none (no input read yet)")?;
        }
        for (key, next) in &self.positions {
            writeln!(out, "  {key}  {next}")?;
        }
        let task = match self.task {
            Some(Task::SingleLabel) => "single-label",
            Some(Task::MultiLabel) => "multi-label",
            None => "no labels learned yet",
        };
        writeln!(
            out,
            "model {} ({task}), version {} (examples learned), {} labels",
            self.model.learner,
            self.version,
            self.labels.len()
        )?;
        let chars = match self.features.char_ngrams {
            Some((lo, hi)) => format!("{lo}-{hi} of the first {} bytes", self.features.char_prefix_bytes),
            None => "off".into(),
        };
        writeln!(
            out,
            "features: {} bits, word n-grams up to {}, char n-grams {chars}, {} values, idf {}, normalised {}",
            self.features.bits,
            self.features.word_ngrams,
            self.features.value,
            self.features.idf,
            self.features.normalize
        )?;
        writeln!(
            out,
            "{} non-zero buckets, {} with known names",
            self.non_zero_buckets, self.named_buckets
        )?;
        if let Some(f) = &self.fusion {
            writeln!(
                out,
                "fusion: naive Bayes on the words, weight {:.4} in the scores, {} examples counted (feature weights below include it)",
                f.weight, f.examples
            )?;
        }
        if let Some(s) = &self.stack {
            let members: Vec<String> = s.weights.iter().map(|(m, w)| format!("{m} {w:.4}")).collect();
            writeln!(out, "stack: {}, bias {:.4}", members.join(", "), s.bias)?;
        }
        write!(out, "{}", self.progressive.render("progressive"))?;
        if self.published.examples > 0 {
            write!(out, "{}", self.published.render("published (judged by late labels)"))?;
        }
        self.feedback.render(out)?;
        for (label, feats) in &self.top_features {
            writeln!(out, "strongest features of {label:?}:")?;
            for (name, w) in feats {
                writeln!(out, "  {w:>10.4}  {name}")?;
            }
        }
        Ok(())
    }
}
