//! `classifyd run`'s flags, and the rules between them: which flags
//! belong to one transport (Kafka with `--brokers`, JSON lines without),
//! refused by their presence on the other; which need a role or another
//! flag. Every rule is here, in [`RunArgs::check`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;

use super::{InputFormat, at_least_one, at_least_one_usize};
use crate::pipeline::Role;

/// The flags of `run` given on the command line, in their variables or in
/// the config file (by clap's id: the field's name), as opposed to those
/// left at their defaults; each with where it came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Given(BTreeMap<String, Source>);

/// Where a given flag's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    CommandLine,
    /// Its environment variable (named).
    Variable(String),
    ConfigFile,
}

impl Given {
    /// Given flags, by id.
    pub fn of(ids: impl IntoIterator<Item = (String, Source)>) -> Self {
        Given(ids.into_iter().collect())
    }

    pub fn has(&self, id: &str) -> bool {
        self.0.contains_key(id)
    }

    /// A given flag's name as an operator set it: `--group-id`, or
    /// `--group-id (set by CLASSIFYD_GROUP_ID)`.
    fn name(&self, id: &str) -> String {
        let flag = match id {
            "kafka_property" => "-X".into(),
            _ => format!("--{}", id.replace('_', "-")),
        };
        match self.0.get(id) {
            Some(Source::Variable(var)) => format!("{flag} (set by {var})"),
            Some(Source::ConfigFile) => format!("{flag} (set in the config file)"),
            _ => flag,
        }
    }
}

/// Flags only the Kafka transport reads (by id).
const KAFKA_ONLY: &[&str] = &[
    "kafka_property",
    "input_topic",
    "feedback_topic",
    "output_topic",
    "dead_letter_topic",
    "group_id",
    "create_topics",
    "topic_partitions",
    "model_topic",
    "pool_topic",
    "input_format",
    "reporter_header",
    "user_header",
    "model_publish_ms",
    "model_snapshot_secs",
    "review_topic",
    "shutdown_timeout_secs",
];

/// Flags only the JSON-lines transport reads (by id).
const LINES_ONLY: &[&str] = &["input", "input_name", "output", "dead_letter", "review"];

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub kafka: super::KafkaArgs,
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
    pub role: Role,
    /// Create the topics this process reads and writes when they are missing.
    #[arg(long, env = "CLASSIFYD_CREATE_TOPICS", default_value_t = true, action = clap::ArgAction::Set, hide = true)]
    pub create_topics: bool,
    /// Partitions of the topics it creates (the model topic has one).
    #[arg(long, env = "CLASSIFYD_TOPIC_PARTITIONS", default_value_t = 4,
          value_parser = clap::value_parser!(i32).range(1..), hide = true)]
    pub topic_partitions: i32,
    /// The compacted topic that carries the learner's model to predictors.
    #[arg(long, env = "CLASSIFYD_MODEL_TOPIC", default_value = "classifyd-model")]
    pub model_topic: String,
    /// A compacted topic where every instance (learner, predictors)
    /// reports its role and served model version, for a console's pool
    /// view; off unless set (give every instance the same one).
    #[arg(long, env = "CLASSIFYD_POOL_TOPIC", hide = true)]
    pub pool_topic: Option<String>,
    /// What an input record's value is: json (the message contract) or
    /// email (the raw RFC 5322 message; its key is its id, a --label-header
    /// header its label).
    #[arg(long, env = "CLASSIFYD_INPUT_FORMAT", value_enum, default_value = "json")]
    pub input_format: InputFormat,
    /// With --input-format email, the record header that holds the label.
    #[arg(long, env = "CLASSIFYD_LABEL_HEADER", default_value = "label", hide = true)]
    pub label_header: String,
    /// The Kafka record header that names who gave a label (over the
    /// JSON "reporter" field).
    #[arg(long, env = "CLASSIFYD_REPORTER_HEADER", default_value = "reporter", hide = true)]
    pub reporter_header: String,
    /// The Kafka record header that names who a message or a label is for
    /// (over the JSON "user" field): their personal features learn from
    /// their labels (docs/model.md).
    #[arg(long, env = "CLASSIFYD_USER_HEADER", default_value = "user", hide = true)]
    pub user_header: String,
    /// A learner publishes a new model version at most this often (ms).
    #[arg(long, env = "CLASSIFYD_MODEL_PUBLISH_MS", default_value_t = 250, hide = true)]
    pub model_publish_ms: u64,
    /// A learner publishes a full version at least this often (seconds); deltas between.
    #[arg(long, env = "CLASSIFYD_MODEL_SNAPSHOT_SECS", default_value_t = 600, value_parser = at_least_one(), hide = true)]
    pub model_snapshot_secs: u64,
    /// JSON-lines input when no brokers: a file, or - for stdin.
    #[arg(long, env = "CLASSIFYD_INPUT", default_value = "-")]
    pub input: String,
    /// Name the JSON-lines input's position is kept under, instead of its
    /// first line (for inputs that begin with the same line).
    #[arg(long, env = "CLASSIFYD_INPUT_NAME", hide = true)]
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
    #[arg(long, env = "CLASSIFYD_CHECKPOINT_INTERVAL_SECS", default_value_t = 60, value_parser = at_least_one())]
    pub checkpoint_interval_secs: u64,
    /// Also checkpoint after this many learned updates (0: time only).
    #[arg(long, env = "CLASSIFYD_CHECKPOINT_EVERY_UPDATES", default_value_t = 0, hide = true)]
    pub checkpoint_every_updates: u64,
    /// Checkpoints kept on disk.
    #[arg(long, env = "CLASSIFYD_KEEP_CHECKPOINTS", default_value_t = crate::checkpoint::DEFAULT_KEEP,
          value_parser = at_least_one_usize(), hide = true)]
    pub keep_checkpoints: usize,
    /// Prometheus endpoint address, e.g. 127.0.0.1:9464.
    #[arg(long, env = "CLASSIFYD_METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// Seconds allowed for the shutdown (finish, checkpoint, flush).
    #[arg(long, env = "CLASSIFYD_SHUTDOWN_TIMEOUT_SECS", default_value_t = 30, value_parser = at_least_one(), hide = true)]
    pub shutdown_timeout_secs: u64,
    /// Each prediction carries its N strongest features (readable n-grams
    /// with their contributions); 0: none.
    #[arg(long, env = "CLASSIFYD_EXPLAIN", default_value_t = 0)]
    pub explain: usize,
    /// Connections one address may hold open at once on each endpoint
    /// (spamd, rspamd, HTTP, the console); past it a new one is closed.
    #[arg(long, env = "CLASSIFYD_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = crate::serving::bounds::DEFAULT_PER_ADDRESS,
          value_parser = at_least_one_usize(), hide = true)]
    pub max_connections_per_address: usize,
    /// Milliseconds a client has to send a request's head, and as long
    /// again for its body, on every endpoint; a slower one is cut off.
    #[arg(long, env = "CLASSIFYD_READ_TIMEOUT_MS", default_value_t = crate::serving::bounds::DEFAULT_READ_TIMEOUT_MS,
          value_parser = at_least_one(), hide = true)]
    pub read_timeout_ms: u64,
    #[command(flatten)]
    pub model: super::ModelArgs,
    #[command(flatten)]
    pub pipeline: super::PipelineArgs,
    #[command(flatten)]
    pub review: super::review::ReviewArgs,
    #[command(flatten)]
    pub http: super::http::HttpArgs,
    #[command(flatten)]
    pub mail: super::mail::MailArgs,
    #[command(flatten)]
    pub console: super::console::ConsoleArgs,
    /// Which of these flags were given, filled by [`super::parse_args`]: a
    /// flag of the other transport is refused by its presence, whatever
    /// its value (see [`RunArgs::check`]).
    #[arg(skip)]
    pub given: Given,
}

impl RunArgs {
    /// Every rule between `run`'s flags, in one place: a flag that does
    /// not apply to the chosen transport is refused by its presence (given
    /// at all, even at its default value), with what to use instead; a role
    /// that needs a transport or a flag is refused by its value. A role's
    /// own flags (`--model-topic`, `--model-publish-ms`, ...) are read by
    /// the roles that use them and left to the others, so that a learner
    /// and its predictors can share one configuration (one Kubernetes
    /// ConfigMap, say).
    pub fn check(&self) -> Result<(), String> {
        self.mail.check()?;
        self.console.check()?;
        if self.given.has("label_header") && self.input_format != InputFormat::Email {
            return Err(
                "--label-header names the record header that holds a raw e-mail's label, with \
                        --input-format email; a JSON message carries its \"label\""
                    .into(),
            );
        }
        if self.kafka.brokers.is_some() {
            return self.check_kafka();
        }
        if let Some(id) = KAFKA_ONLY.iter().find(|id| self.given.has(id)) {
            return Err(match *id {
                "review_topic" => {
                    "--review-topic needs --brokers; without them, --review FILE writes the messages to review".into()
                }
                "input_format" => format!(
                    "--input-format {} is for Kafka records and needs --brokers; a JSON line carries a raw \
                     e-mail as \"email\" or \"email_base64\"",
                    if self.input_format == InputFormat::Email {
                        "email"
                    } else {
                        "json"
                    }
                ),
                _ => format!(
                    "{} is for Kafka and needs --brokers; without them run reads JSON lines (--input, --output)",
                    self.given.name(id)
                ),
            });
        }
        if self.role != Role::Standalone {
            return Err(format!(
                "--role {} needs --brokers: the model travels from the learner to predictors on a Kafka topic",
                self.role
            ));
        }
        Ok(())
    }

    /// The rules of a Kafka run: no JSON-lines flag, a checkpoint
    /// directory but on a predictor.
    fn check_kafka(&self) -> Result<(), String> {
        if let Some(id) = LINES_ONLY.iter().find(|id| self.given.has(id)) {
            return Err(match *id {
                "review" => "--review FILE is for JSON lines; with --brokers, --review-topic names the topic".into(),
                _ => format!(
                    "{} is for JSON lines; with --brokers the messages come from --input-topic, predictions go to \
                     --output-topic and bad input to --dead-letter-topic",
                    self.given.name(id)
                ),
            });
        }
        if self.checkpoint_dir.is_none() && self.role != Role::Predictor {
            return Err(format!(
                "--checkpoint-dir is required with --brokers and --role {} (it holds the model and the offsets)",
                self.role
            ));
        }
        Ok(())
    }
}
