//! Command-line flags (clap), each with a `CLASSIFYD_...` environment
//! variable, an optional TOML config file beneath both, and validation of
//! the raw flags into settings values used by the rest of the library.
//!
//! Precedence: a flag wins over its environment variable, which wins over
//! the config file. The file's keys are the flag names (`learning-rate = 0.5`
//! or `learning_rate = 0.5`); an unknown key is an error.

pub mod bytes;
mod model;
pub mod properties;
pub mod review;

pub use model::{ModelArgs, ModelChoice, Preset};

use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory, Parser, Subcommand};

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
    /// Predict each line of a JSON-lines input with a checkpointed model.
    Predict(PredictArgs),
    /// Summarise a checkpointed model and its strongest features.
    Inspect(InspectArgs),
    /// Stream a labeled JSON-lines file into Kafka, holding some labels back
    /// and sending them later as feedback (demos).
    DemoProduce(DemoArgs),
    /// Print a topic's records (predictions by default) as lines on
    /// stdout, from its start, following it until Ctrl-C.
    Tail(TailArgs),
}

#[derive(Debug, Clone, Args)]
pub struct TailArgs {
    /// The topic to print (default: the output topic).
    #[arg(env = "CLASSIFYD_OUTPUT_TOPIC", default_value = "predictions")]
    pub topic: String,
    #[arg(long, env = "CLASSIFYD_BROKERS")]
    pub brokers: String,
    /// Stop after this many records.
    #[arg(long)]
    pub max: Option<u64>,
    /// Stop at the topic's end as it is now instead of following it.
    #[arg(long)]
    pub no_follow: bool,
    /// librdkafka property key=value (repeatable); also from CLASSIFYD_KAFKA_<NAME> variables.
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub kafka_property: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    #[arg(long, env = "CLASSIFYD_BROKERS")]
    pub brokers: String,
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
    /// librdkafka property key=value (repeatable); also from CLASSIFYD_KAFKA_<NAME>
    /// variables (sasl.password: CLASSIFYD_KAFKA_SASL_PASSWORD) and the config file's [kafka] table.
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub kafka_property: Vec<String>,
}

/// Flags of the pipeline around the model, shared by `run` and `eval`.
#[derive(Debug, Clone, Args)]
pub struct PipelineArgs {
    /// Messages over this many bytes are refused (dead-lettered).
    #[arg(long, env = "CLASSIFYD_MAX_MESSAGE_BYTES", default_value_t = crate::message::DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// Length of the sliding window of the live metrics.
    #[arg(long, env = "CLASSIFYD_WINDOW", default_value_t = crate::eval::DEFAULT_WINDOW)]
    pub window: usize,
    /// Positive class of binary tasks, for ROC (default: "spam", else the second label seen).
    #[arg(long, env = "CLASSIFYD_POSITIVE_LABEL")]
    pub positive_label: Option<String>,
    /// Most messages kept to join late feedback labels to.
    #[arg(long, env = "CLASSIFYD_FEEDBACK_CACHE_ENTRIES", default_value_t = 100_000)]
    pub feedback_cache_entries: usize,
    /// Most text bytes kept to join late feedback labels to.
    #[arg(long, env = "CLASSIFYD_FEEDBACK_CACHE_BYTES", default_value_t = 64 << 20)]
    pub feedback_cache_bytes: usize,
    /// Seconds a message waits for its late label.
    #[arg(long, env = "CLASSIFYD_FEEDBACK_TTL_SECS", default_value_t = 86_400)]
    pub feedback_ttl_secs: u64,
    /// Each prediction carries its N strongest features (readable n-grams
    /// with their contributions); 0: none.
    #[arg(long, env = "CLASSIFYD_EXPLAIN", default_value_t = 0)]
    pub explain: usize,
}

impl PipelineArgs {
    pub fn settings(&self) -> Result<PipelineConfig, String> {
        if self.window == 0 {
            return Err("--window must be at least 1".into());
        }
        if self.max_message_bytes == 0 {
            return Err("--max-message-bytes must be at least 1".into());
        }
        Ok(PipelineConfig {
            max_message_bytes: self.max_message_bytes,
            window: self.window,
            positive_label: self.positive_label.clone(),
            cache_entries: self.feedback_cache_entries,
            cache_bytes: self.feedback_cache_bytes,
            cache_ttl_ms: self.feedback_ttl_secs.saturating_mul(1000),
            explain: self.explain,
            ..PipelineConfig::default()
        })
    }
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Kafka bootstrap servers; without it, the embedded default (JSON lines).
    #[arg(long, env = "CLASSIFYD_BROKERS")]
    pub brokers: Option<String>,
    #[arg(long, env = "CLASSIFYD_INPUT_TOPIC", default_value = "messages")]
    pub input_topic: String,
    #[arg(long, env = "CLASSIFYD_FEEDBACK_TOPIC", default_value = "labels")]
    pub feedback_topic: String,
    #[arg(long, env = "CLASSIFYD_OUTPUT_TOPIC", default_value = "predictions")]
    pub output_topic: String,
    #[arg(long, env = "CLASSIFYD_DEAD_LETTER_TOPIC", default_value = "classifyd-dead-letter")]
    pub dead_letter_topic: String,
    #[arg(long, env = "CLASSIFYD_GROUP_ID", default_value = "classifyd")]
    pub group_id: String,
    /// What this process does with the model: standalone (learn and
    /// predict), learner (learn, publish the model to --model-topic) or
    /// predictor (serve the learner's model; needs --brokers).
    #[arg(long, env = "CLASSIFYD_ROLE", default_value = "standalone")]
    pub role: crate::pipeline::Role,
    /// Create the topics this process reads and writes when they are missing.
    #[arg(long, env = "CLASSIFYD_CREATE_TOPICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub create_topics: bool,
    /// Partitions of the topics it creates (the model topic has one).
    #[arg(long, env = "CLASSIFYD_TOPIC_PARTITIONS", default_value_t = 4)]
    pub topic_partitions: i32,
    /// The compacted topic that carries the learner's model to predictors.
    #[arg(long, env = "CLASSIFYD_MODEL_TOPIC", default_value = "classifyd-model")]
    pub model_topic: String,
    /// A learner publishes a new model version at most this often (ms).
    #[arg(long, env = "CLASSIFYD_MODEL_PUBLISH_MS", default_value_t = 250)]
    pub model_publish_ms: u64,
    /// A learner publishes a full version at least this often (seconds); deltas between.
    #[arg(long, env = "CLASSIFYD_MODEL_SNAPSHOT_SECS", default_value_t = 600)]
    pub model_snapshot_secs: u64,
    /// librdkafka property key=value (repeatable); also from CLASSIFYD_KAFKA_<NAME>
    /// variables (sasl.password: CLASSIFYD_KAFKA_SASL_PASSWORD) and the config file's [kafka] table.
    #[arg(short = 'X', value_name = "KEY=VALUE")]
    pub kafka_property: Vec<String>,
    /// JSON-lines input when no brokers: a file, or - for stdin.
    #[arg(long, env = "CLASSIFYD_INPUT", default_value = "-")]
    pub input: String,
    /// Name the JSON-lines input's position is kept under, instead of its
    /// first line (for inputs that begin with the same line).
    #[arg(long, env = "CLASSIFYD_INPUT_NAME")]
    pub input_name: Option<String>,
    /// Predictions when no brokers: a file (appended), or - for stdout.
    #[arg(long, env = "CLASSIFYD_OUTPUT", default_value = "-")]
    pub output: String,
    /// Bad lines when no brokers, one JSON record each (appended).
    #[arg(long, env = "CLASSIFYD_DEAD_LETTER")]
    pub dead_letter: Option<PathBuf>,
    /// Where checkpoints live; the daemon resumes from the newest good one.
    #[arg(long, env = "CLASSIFYD_CHECKPOINT_DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Seconds between checkpoints (one is also written at exit).
    #[arg(long, env = "CLASSIFYD_CHECKPOINT_INTERVAL_SECS", default_value_t = 60)]
    pub checkpoint_interval_secs: u64,
    /// Also checkpoint after this many learned updates (0: time only).
    #[arg(long, env = "CLASSIFYD_CHECKPOINT_EVERY_UPDATES", default_value_t = 0)]
    pub checkpoint_every_updates: u64,
    /// Checkpoints kept on disk.
    #[arg(long, env = "CLASSIFYD_KEEP_CHECKPOINTS", default_value_t = crate::checkpoint::DEFAULT_KEEP)]
    pub keep_checkpoints: usize,
    /// Prometheus endpoint address, e.g. 127.0.0.1:9464.
    #[arg(long, env = "CLASSIFYD_METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// Seconds allowed for the shutdown (finish, checkpoint, flush).
    #[arg(long, env = "CLASSIFYD_SHUTDOWN_TIMEOUT_SECS", default_value_t = 30)]
    pub shutdown_timeout_secs: u64,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    #[command(flatten)]
    pub review: review::ReviewArgs,
}

#[derive(Debug, Clone, Args)]
pub struct EvalArgs {
    /// The JSON-lines stream to evaluate.
    #[arg(long, env = "CLASSIFYD_INPUT")]
    pub input: PathBuf,
    /// Print one JSON object instead of the readable report.
    #[arg(long)]
    pub json: bool,
    /// Passes over the training lines of a split stream (the first is progressive).
    #[arg(long, env = "CLASSIFYD_PASSES", default_value_t = 5)]
    pub passes: usize,
    /// Stop after this many lines.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Bad lines, one JSON record each.
    #[arg(long)]
    pub dead_letter: Option<PathBuf>,
    /// Draw the learning curve (accuracy over the stream; 1-ROCA or per-class F1) to this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    #[command(flatten)]
    pub labels: review::LabelBudgetArgs,
}

#[derive(Debug, Clone, Args)]
pub struct PredictArgs {
    #[arg(long, env = "CLASSIFYD_CHECKPOINT_DIR")]
    pub checkpoint_dir: PathBuf,
    #[arg(long, default_value = "-")]
    pub input: String,
    #[arg(long, default_value = "-")]
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
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    #[arg(long)]
    pub json: bool,
}

/// Sets `CLASSIFYD_*` variables from a TOML config file, for each key not
/// already set in the environment (so flags > env > file). A `[kafka]`
/// table holds librdkafka properties (`CLASSIFYD_KAFKA_*`, see
/// [`properties::properties`]). Unknown keys and other tables are errors.
pub fn apply_config_file(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("config file {}: {e}", path.display()))?;
    let known = known_env_vars();
    let mut to_set = Vec::new();
    let scalar = |key: &str, value: toml::Value| match value {
        toml::Value::String(s) => Ok(s),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        other => Err(format!(
            "config file {}: key {key:?} must be a scalar, got {}",
            path.display(),
            other.type_str()
        )),
    };
    for (key, value) in table {
        // librdkafka properties, as `-X` takes them: `[kafka]` then
        // `"sasl.password" = "..."`.
        if key == "kafka" {
            let toml::Value::Table(properties) = value else {
                return Err(format!(
                    "config file {}: \"kafka\" must be a table of librdkafka properties",
                    path.display()
                ));
            };
            for (property, value) in properties {
                let var = properties::env_of_property(&property);
                let value = scalar(&format!("kafka.{property}"), value)?;
                if std::env::var_os(&var).is_none() {
                    to_set.push((var, value));
                }
            }
            continue;
        }
        let var = format!("CLASSIFYD_{}", key.replace('-', "_").to_ascii_uppercase());
        if !known.contains(&var) {
            return Err(format!("config file {}: unknown key {key:?}", path.display()));
        }
        let value = scalar(&key, value)?;
        if std::env::var_os(&var).is_none() {
            to_set.push((var, value));
        }
    }
    for (var, value) in to_set {
        // SAFETY: called once at start-up, before any thread is spawned.
        unsafe { std::env::set_var(var, value) };
    }
    Ok(())
}

/// Every environment variable a flag reads.
fn known_env_vars() -> Vec<String> {
    fn walk(cmd: &clap::Command, out: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            if let Some(env) = a.get_env() {
                out.push(env.to_string_lossy().into_owned());
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = Vec::new();
    walk(&Cli::command(), &mut out);
    out
}

/// Finds `--config FILE` (or CLASSIFYD_CONFIG) before clap parses, so the
/// file can feed the environment clap reads.
pub fn config_path_from_args(args: &[String]) -> Option<PathBuf> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(p) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(p));
        }
    }
    std::env::var_os("CLASSIFYD_CONFIG").map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Learner;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_has_an_env_var() {
        let vars = known_env_vars();
        for v in [
            "CLASSIFYD_BROKERS",
            "CLASSIFYD_MODEL",
            "CLASSIFYD_BITS",
            "CLASSIFYD_CHECKPOINT_DIR",
            "CLASSIFYD_L2",
        ] {
            assert!(vars.contains(&v.to_string()), "{v}");
        }
    }

    #[test]
    fn model_flags_validate() {
        let cli = Cli::try_parse_from(["classifyd", "eval", "--input", "x", "--bits", "40"]).unwrap();
        let Command::Eval(e) = cli.command else { panic!() };
        assert!(e.model.settings().unwrap_err().contains("--bits"));
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
        let err = limits(&["--model-memory", "16MiB"]).unwrap_err();
        assert!(err.contains("--model-memory") && err.contains("--bits 21"), "{err}");
        assert!(limits(&["--model-memory", "16MiB", "--bits", "18"]).is_ok());
        assert!(limits(&["--max-classes", "0"]).unwrap_err().contains("--max-classes"));
        let bad = ["classifyd", "eval", "--input", "x", "--model-memory", "lots"];
        assert!(Cli::try_parse_from(bad).is_err());
    }
}
