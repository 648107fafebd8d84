//! Command-line flags (clap), each with a `CLASSIFYD_...` environment
//! variable, an optional TOML config file beneath both, and validation of
//! the raw flags into settings values used by the rest of the library.
//!
//! Precedence: a flag wins over its environment variable, which wins over
//! the config file. The file's keys are the flag names (`learning-rate = 0.5`
//! or `learning_rate = 0.5`); an unknown key is an error.

pub mod bytes;
pub mod console;
mod feedback;
mod file;
pub mod http;
pub mod mail;
mod model;
pub mod properties;
pub mod review;
mod run;

pub use file::{ConfigFile, parse_args};
pub use model::{ModelArgs, ModelChoice, Preset};
pub use run::{Given, RunArgs, Source};

use std::path::PathBuf;

use clap::builder::RangedU64ValueParser;
use clap::{Args, Parser, Subcommand};

use crate::pipeline::PipelineConfig;

#[derive(Debug, Parser)]
#[command(
    name = "classifyd",
    version,
    about = "Learns a text classifier online from a message stream"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log filter (tracing's EnvFilter syntax), e.g. info or classifyd=debug.
    #[arg(long, global = true, env = "CLASSIFYD_LOG", default_value = "info")]
    pub log: String,
    /// TOML file with flag values (keys are flag names); flags and env win over it.
    #[arg(long, global = true, env = "CLASSIFYD_CONFIG")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The daemon: learn from labeled messages, predict unlabeled ones.
    Run(Box<RunArgs>),
    /// Progressive (test-then-train) evaluation of a whole JSON-lines stream.
    Eval(Box<EvalArgs>),
    /// Learn mail folders (Maildir, mbox, folders of message files) with
    /// one label into a checkpoint, as sa-learn does.
    Learn(Box<LearnArgs>),
    /// Predict each line of a JSON-lines input with a checkpointed model.
    Predict(PredictArgs),
    /// Summarise a checkpointed model and its strongest features.
    Inspect(InspectArgs),
    /// Stream a labeled JSON-lines file into Kafka, holding some labels back
    /// and sending them later as feedback (demos).
    #[command(mut_arg("brokers", |a| a.required(true)))]
    DemoProduce(DemoArgs),
    /// Print a topic's records (predictions by default) as lines on
    /// stdout, from its start, following it until Ctrl-C.
    #[command(mut_arg("brokers", |a| a.required(true)))]
    Tail(TailArgs),
}

#[derive(Debug, Clone, Args)]
pub struct TailArgs {
    /// The topic to print (default: the output topic).
    #[arg(env = "CLASSIFYD_OUTPUT_TOPIC", default_value = "predictions")]
    pub topic: String,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Stop after this many records.
    #[arg(long, env = "CLASSIFYD_TAIL_MAX")]
    pub max: Option<u64>,
    /// Stop at the topic's end as it is now instead of following it.
    #[arg(long, env = "CLASSIFYD_TAIL_NO_FOLLOW")]
    pub no_follow: bool,
}

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[arg(long, env = "CLASSIFYD_DEMO_INPUT")]
    pub input: PathBuf,
    #[arg(long, env = "CLASSIFYD_INPUT_TOPIC", default_value = "messages")]
    pub input_topic: String,
    #[arg(long, env = "CLASSIFYD_FEEDBACK_TOPIC", default_value = "labels")]
    pub feedback_topic: String,
    /// Messages per second (0: as fast as possible).
    #[arg(long, env = "CLASSIFYD_DEMO_RATE", default_value_t = 50.0)]
    pub rate: f64,
    /// One message in this many is sent without its label.
    #[arg(long, env = "CLASSIFYD_DEMO_HOLDBACK_EVERY", default_value_t = 5)]
    pub holdback_every: usize,
    /// The held-back label follows this many messages later.
    #[arg(long, env = "CLASSIFYD_DEMO_FEEDBACK_DELAY", default_value_t = 50)]
    pub feedback_delay: usize,
    /// Start over at the end of the file (fresh ids, no labels: prediction
    /// requests only, so the live accuracy stays honest) until stopped.
    #[arg(long = "loop", env = "CLASSIFYD_DEMO_LOOP")]
    pub repeat: bool,
}

/// Why the command line, a config file or a flag's value was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}", path.display())]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {}: {detail}", path.display())]
    File { path: PathBuf, detail: String },
    /// Clap's own error (usage, `--help`, `--version`): `exit()` prints it.
    #[error(transparent)]
    Clap(#[from] clap::Error),
    /// A flag's value that clap alone cannot judge (with the flag's name).
    #[error("{0}")]
    Invalid(String),
}

/// How to reach Kafka, for every command that does: declared once.
#[derive(Debug, Clone, Args)]
pub struct KafkaArgs {
    /// Kafka bootstrap servers; without it, `run` uses the embedded default (JSON lines).
    #[arg(long, env = "CLASSIFYD_BROKERS")]
    pub brokers: Option<String>,
    /// librdkafka property key=value (repeatable); also from CLASSIFYD_KAFKA_<NAME>
    /// variables (sasl.password: CLASSIFYD_KAFKA_SASL_PASSWORD) and the config file's [kafka] table.
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub kafka_property: Vec<String>,
}

impl KafkaArgs {
    /// The librdkafka properties in force: `-X` over `CLASSIFYD_KAFKA_*`
    /// variables over the config file's `[kafka]` table.
    pub fn properties(&self, file: &ConfigFile) -> Result<Vec<(String, String)>, ConfigError> {
        properties::properties(&self.kafka_property, file.kafka_env()).map_err(ConfigError::Invalid)
    }

    /// The brokers of a command that needs them (clap requires the flag there).
    pub fn required_brokers(&self) -> Result<String, ConfigError> {
        self.brokers
            .clone()
            .ok_or_else(|| ConfigError::Invalid("--brokers is required".into()))
    }
}

/// At least 1, for counts and durations where 0 means nothing useful.
fn at_least_one() -> RangedU64ValueParser<u64> {
    RangedU64ValueParser::new().range(1..)
}

/// [`at_least_one`] for sizes and counts held as `usize`.
fn at_least_one_usize() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..)
}

/// What an input record's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// A JSON message (the input contract).
    Json,
    /// A raw RFC 5322 e-mail.
    Email,
}

/// Flags of the pipeline around the model, shared by `run` and `eval`.
#[derive(Debug, Clone, Args)]
pub struct PipelineArgs {
    /// Messages over this many bytes are refused (dead-lettered).
    #[arg(long, env = "CLASSIFYD_MAX_MESSAGE_BYTES", default_value_t = crate::message::DEFAULT_MAX_MESSAGE_BYTES,
          value_parser = at_least_one_usize())]
    pub max_message_bytes: usize,
    /// Length of the sliding window of the live metrics.
    #[arg(long, env = "CLASSIFYD_WINDOW", default_value_t = crate::eval::DEFAULT_WINDOW, value_parser = at_least_one_usize(), hide = true)]
    pub window: usize,
    /// Positive class of binary tasks, for ROC (default: "spam", else the second label seen).
    #[arg(long, env = "CLASSIFYD_POSITIVE_LABEL", hide = true)]
    pub positive_label: Option<String>,
    /// Most messages kept to join late feedback labels to.
    #[arg(
        long,
        env = "CLASSIFYD_FEEDBACK_CACHE_ENTRIES",
        default_value_t = 100_000,
        hide = true
    )]
    pub feedback_cache_entries: usize,
    /// Most bytes of text kept to join late feedback labels to (counted
    /// LZ4-compressed, as held, where that saves an eighth or more).
    #[arg(long, env = "CLASSIFYD_FEEDBACK_CACHE_BYTES", default_value_t = 64 << 20, hide = true)]
    pub feedback_cache_bytes: usize,
    /// Seconds a message waits for its late label (`eval` counts each line as one second).
    #[arg(long, env = "CLASSIFYD_FEEDBACK_TTL_SECS", default_value_t = 86_400)]
    pub feedback_ttl_secs: u64,
    #[command(flatten)]
    pub feedback: feedback::FeedbackArgs,
    /// What of a raw e-mail ("email", "email_base64") the model reads:
    /// raw (its first 3,000 bytes as they came), headers (namespaced
    /// tokens), body (subject, decoded text, attachments' types), or all.
    /// A learner's predictors must read the same.
    #[arg(long, env = "CLASSIFYD_EMAIL_VIEWS", default_value = "all", value_parser = crate::email::Views::parse, hide = true)]
    pub email_views: crate::email::Views,
    /// When a learner adds the byte LR (a TREC-style logistic regression
    /// over the byte 4-grams of a message's first 3,000 bytes, 4 MB) to a
    /// binary model's margin: at the first raw e-mail (email), from the
    /// first message (always), or never (off).
    #[arg(long, env = "CLASSIFYD_BYTE_LR", value_enum, default_value_t = crate::pipeline::MemberWhen::Email, hide = true)]
    pub byte_lr: crate::pipeline::MemberWhen,
    /// When a learning model adds the compression member (a byte context
    /// model per class over the document's first bytes, a member of a
    /// binary model's stack): at the first raw e-mail (email), from the
    /// first message (always), or never (off).
    /// On by default for raw e-mail only: on text it ranks better but
    /// costs more time than the text streams' speed floor allows
    /// (docs/accuracy.md).
    #[arg(long, env = "CLASSIFYD_COMPRESSION", value_enum, default_value_t = crate::pipeline::MemberWhen::Email, hide = true)]
    pub compression: crate::pipeline::MemberWhen,
}

impl PipelineArgs {
    pub fn settings(&self) -> PipelineConfig {
        PipelineConfig {
            max_message_bytes: self.max_message_bytes,
            window: self.window,
            positive_label: self.positive_label.clone(),
            cache_entries: self.feedback_cache_entries,
            cache_bytes: self.feedback_cache_bytes,
            cache_ttl_ms: self.feedback_ttl_secs.saturating_mul(1000),
            trust: self.feedback.trust(),
            email_views: self.email_views,
            members: crate::pipeline::AddedWhen::default()
                .with("byte_lr", self.byte_lr)
                .with("compression", self.compression),
            ..PipelineConfig::default()
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct EvalArgs {
    /// The JSON-lines stream to evaluate.
    #[arg(long, env = "CLASSIFYD_INPUT")]
    pub input: PathBuf,
    /// Print one JSON object instead of the readable report.
    #[arg(long, env = "CLASSIFYD_JSON")]
    pub json: bool,
    /// Passes over the training lines of a split stream (the first is progressive).
    #[arg(long, env = "CLASSIFYD_PASSES", default_value_t = 5, value_parser = at_least_one_usize())]
    pub passes: usize,
    /// Stop after this many lines.
    #[arg(long, env = "CLASSIFYD_LIMIT")]
    pub limit: Option<u64>,
    /// Threads that read and prepare lines (parse, render, tokenize, hash)
    /// ahead of the model's; the result is the same with any number
    /// (default: the cores available but the model's, at least 1).
    #[arg(long, env = "CLASSIFYD_THREADS", value_parser = at_least_one_usize())]
    pub threads: Option<usize>,
    /// Bad lines, one JSON record each.
    #[arg(long, env = "CLASSIFYD_DEAD_LETTER")]
    pub dead_letter: Option<PathBuf>,
    /// Draw the learning curve (accuracy over the stream; 1-ROCA or per-class F1) to this SVG file.
    #[arg(long, env = "CLASSIFYD_PLOT")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    #[command(flatten)]
    pub labels: review::LabelBudgetArgs,
}

#[derive(Debug, Clone, Args)]
pub struct LearnArgs {
    /// The label every message learned gets (e.g. spam, ham).
    #[arg(long, env = "CLASSIFYD_LEARN_LABEL")]
    pub label: String,
    /// Where the model lives: resumed from, and saved to at the end.
    #[arg(long, env = "CLASSIFYD_CHECKPOINT_DIR")]
    pub checkpoint_dir: PathBuf,
    /// Who gave these labels (a reporter, as a label's "reporter" field).
    #[arg(long, env = "CLASSIFYD_LEARN_REPORTER")]
    pub reporter: Option<String>,
    /// Whose mail this is (a message's "user" field): the folders teach
    /// that user's personal features too (docs/model.md).
    #[arg(long, env = "CLASSIFYD_LEARN_USER")]
    pub user: Option<String>,
    /// Checkpoints kept in the directory.
    #[arg(long, env = "CLASSIFYD_KEEP_CHECKPOINTS", default_value_t = crate::checkpoint::DEFAULT_KEEP, value_parser = at_least_one_usize(), hide = true)]
    pub keep_checkpoints: usize,
    /// Maildirs, mbox files, folders of message files, or message files
    /// (the variable names one).
    #[arg(required = true, env = "CLASSIFYD_LEARN_PATHS")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
}

#[derive(Debug, Clone, Args)]
pub struct PredictArgs {
    #[arg(long, env = "CLASSIFYD_CHECKPOINT_DIR")]
    pub checkpoint_dir: PathBuf,
    /// JSON lines to predict: a file, or - for stdin.
    #[arg(long, env = "CLASSIFYD_INPUT", default_value = "-")]
    pub input: String,
    /// Predictions: a file (appended), or - for stdout.
    #[arg(long, env = "CLASSIFYD_OUTPUT", default_value = "-")]
    pub output: String,
    /// Each prediction carries its N strongest features (readable n-grams
    /// with their contributions).
    #[arg(long, env = "CLASSIFYD_EXPLAIN", default_value_t = 0)]
    pub explain: usize,
}

#[derive(Debug, Clone, Args)]
pub struct InspectArgs {
    #[arg(long, env = "CLASSIFYD_CHECKPOINT_DIR")]
    pub checkpoint_dir: PathBuf,
    /// Features shown per class.
    #[arg(long, env = "CLASSIFYD_TOP", default_value_t = 20)]
    pub top: usize,
    /// Print one JSON object instead of the readable summary.
    #[arg(long, env = "CLASSIFYD_JSON")]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Learner;

    #[test]
    fn cli_is_well_formed() {
        <Cli as clap::CommandFactory>::command().debug_assert();
    }

    /// Every flag of every command has its own `CLASSIFYD_*` variable,
    /// except help, version and `-X` (whose properties each have their
    /// own `CLASSIFYD_KAFKA_*` variable).
    #[test]
    fn every_flag_has_an_env_var() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>, seen: &mut usize) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if matches!(id, "help" | "version" | "kafka_property") {
                    continue;
                }
                *seen += 1;
                match a.get_env().and_then(|e| e.to_str()) {
                    Some(env) if env.starts_with("CLASSIFYD_") => {}
                    _ => missing.push(format!("{path} {id}")),
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing, seen);
            }
        }
        let (mut missing, mut seen) = (Vec::new(), 0);
        walk(
            &<Cli as clap::CommandFactory>::command(),
            "classifyd",
            &mut missing,
            &mut seen,
        );
        assert!(missing.is_empty(), "flags without a CLASSIFYD_ variable: {missing:?}");
        assert!(seen > 80, "walked only {seen} flags");
    }

    /// `run --help` lists what an operator sets: at most 35 entries.
    #[test]
    fn run_help_fits_an_operator() {
        let mut cmd = <Cli as clap::CommandFactory>::command();
        cmd.build();
        let run = cmd.find_subcommand("run").expect("run");
        let shown = run.get_arguments().filter(|a| !a.is_hide_set()).count();
        assert!(shown <= 35, "run --help lists {shown} flags");
    }

    #[test]
    fn zero_is_refused_where_it_means_nothing() {
        for flag in [
            "--checkpoint-interval-secs",
            "--shutdown-timeout-secs",
            "--keep-checkpoints",
            "--topic-partitions",
            "--window",
            "--max-message-bytes",
        ] {
            let err = Cli::try_parse_from(["classifyd", "run", flag, "0"])
                .unwrap_err()
                .to_string();
            assert!(err.contains(flag), "{flag}: {err}");
            assert!(Cli::try_parse_from(["classifyd", "run", flag, "1"]).is_ok(), "{flag} 1");
        }
        assert!(Cli::try_parse_from(["classifyd", "eval", "--input", "x", "--passes", "0"]).is_err());
        // Commands that only talk to Kafka need --brokers; run does not.
        assert!(Cli::try_parse_from(["classifyd", "tail"]).is_err());
        assert!(Cli::try_parse_from(["classifyd", "tail", "--brokers", "b:9092"]).is_ok());
        // eval computes no explanations: it refuses the flag.
        assert!(Cli::try_parse_from(["classifyd", "eval", "--input", "x", "--explain", "3"]).is_err());
    }

    #[test]
    fn model_flags_validate() {
        let cli = Cli::try_parse_from(["classifyd", "eval", "--input", "x", "--bits", "40"]).unwrap();
        let Command::Eval(e) = cli.command else { panic!() };
        assert!(e.model.settings().unwrap_err().to_string().contains("--bits"));
        let cli =
            Cli::try_parse_from(["classifyd", "eval", "--input", "x", "--model", "hinge", "--l2", "0.001"]).unwrap();
        let Command::Eval(e) = cli.command else { panic!() };
        let (_, h) = e.model.settings().unwrap();
        assert_eq!(h.single.learner, Learner::Hinge);
        assert_eq!(h.multi.learner, Learner::Hinge);
        assert_eq!(h.single.l2, 0.001);
        let cli = Cli::try_parse_from(["classifyd", "eval", "--input", "x", "--learning-rate", "0.25"]).unwrap();
        let Command::Eval(e) = cli.command else { panic!() };
        let (_, h) = e.model.settings().unwrap();
        assert_eq!((h.single.learner, h.multi.learner), (Learner::Logistic, Learner::Hinge));
        assert_eq!((h.single.learning_rate, h.multi.learning_rate), (0.25, 0.25));
        assert!(Cli::try_parse_from(["classifyd", "eval", "--input", "x", "--model", "forest"]).is_err());
        // A preset sets feature defaults; flags given win over it.
        let features = |args: &[&str]| {
            let all = [&["classifyd", "eval", "--input", "x"], args].concat();
            let Command::Eval(e) = Cli::try_parse_from(all).unwrap().command else {
                panic!()
            };
            let (f, _) = e.model.settings().unwrap();
            (f.bits, f.word_ngrams)
        };
        assert_eq!(features(&[]), (21, 2));
        assert_eq!(features(&["--preset", "accurate"]), (22, 3));
        assert_eq!(features(&["--preset", "accurate", "--bits", "20"]), (20, 3));
    }

    #[test]
    fn memory_and_class_bounds_validate() {
        let limits = |args: &[&str]| {
            let mut all = vec!["classifyd", "eval", "--input", "x"];
            all.extend_from_slice(args);
            let Command::Eval(e) = Cli::try_parse_from(all).unwrap().command else {
                panic!()
            };
            let (features, _) = e.model.settings().unwrap();
            e.model.limits(&features)
        };
        let l = limits(&[]).unwrap();
        assert_eq!((l.memory, l.max_classes), (256 << 20, crate::model::MAX_CLASSES));
        let l = limits(&["--model-memory", "1.5GiB", "--max-classes", "50000"]).unwrap();
        assert_eq!((l.memory, l.max_classes), (3 << 29, 50_000));
        // 32 bytes a bucket at least: 64 MiB at the default 2^21 buckets.
        let err = limits(&["--model-memory", "16MiB"]).unwrap_err().to_string();
        assert!(err.contains("--model-memory") && err.contains("--bits 21"), "{err}");
        assert!(limits(&["--model-memory", "16MiB", "--bits", "18"]).is_ok());
        assert!(
            limits(&["--max-classes", "0"])
                .unwrap_err()
                .to_string()
                .contains("--max-classes")
        );
        let bad = ["classifyd", "eval", "--input", "x", "--model-memory", "lots"];
        assert!(Cli::try_parse_from(bad).is_err());
    }
}
