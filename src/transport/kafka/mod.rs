//! `classifyd run --brokers ...`: the Kafka transport on the same
//! [`Pipeline`] as the JSON-lines one.
//!
//! A consumer group reads the input and feedback topics; predictions go to
//! the output topic (keyed by the input's key, or its id), bad input to the
//! dead-letter topic with its reason in headers.
//!
//! Exactly-once learning: a checkpoint holds, beside the model, the next
//! offset of every partition whose messages the model includes. Before one
//! is written the producer is flushed (so every prediction and dead letter of
//! those messages is delivered); after it, the same offsets are committed to
//! the group. Checkpoints are taken every N seconds and M updates, before
//! partitions are revoked, and at shutdown. On every assignment, consumption
//! starts at the later of the checkpoint's offset and the group's committed
//! one, so after a restart or a kill -9 no labeled message is learned twice
//! and none is skipped; predictions after the last checkpoint may repeat (at
//! least once, each carrying its id).
//!
//! Roles (`--role`, the pipeline's [`Role`]) share this loop: a standalone
//! process does all of the above; a learner reads the input and feedback
//! topics in its own group (`GROUP-learner`: it must see every partition),
//! learns, checkpoints and publishes its model to the model topic; a
//! predictor reads the model topic ([`model_topic`]), serves the newest
//! complete version, reads the input topic in the group, publishes
//! predictions and commits its offsets after they are delivered (it keeps
//! no checkpoint). See docs/scaling.md.

mod context;
mod daemon;
mod errors;
mod forward;
mod model_topic;
mod pool;
mod sink;
pub(crate) mod tail;
mod topics;

use std::path::PathBuf;
use std::time::Duration;

use self::daemon::Daemon;
use crate::features::FeatureConfig;
use crate::metrics::Telemetry;
use crate::model::HyperChoice;
use crate::pipeline::PipelineConfig;
use crate::replica::PublishSettings;
use crate::shutdown::Shutdown;
use crate::transport::DaemonError;

/// Settings of a Kafka run.
#[derive(Clone, Debug)]
pub struct KafkaSettings {
    pub brokers: String,
    pub input_topic: String,
    pub feedback_topic: String,
    pub output_topic: String,
    pub dead_letter_topic: String,
    /// Messages to review for a person to label (`--review-topic`).
    pub review_topic: Option<String>,
    /// The compacted topic that carries the learner's model to predictors.
    pub model_topic: String,
    /// The compacted topic where each instance reports what it serves
    /// (`--pool-topic`; none: no reports).
    pub pool_topic: Option<String>,
    /// The record header that names a label's reporter (`--reporter-header`).
    pub reporter_header: String,
    /// The record header that names who a message is for (`--user-header`).
    pub user_header: String,
    /// With `--input-format email`, the input topic's values are raw
    /// e-mails, and this record header holds their label.
    pub email_input: Option<String>,
    pub group_id: String,
    /// librdkafka properties (`-X key=value`), applied to consumer and producer.
    pub properties: Vec<(String, String)>,
    /// Required but for a predictor (which keeps no checkpoint).
    pub checkpoint_dir: Option<PathBuf>,
    pub checkpoint_interval: Duration,
    pub checkpoint_every_updates: u64,
    pub keep_checkpoints: usize,
    /// How long the producer may take to deliver what is queued at a
    /// checkpoint or at shutdown before the checkpoint is put off.
    pub flush_timeout: Duration,
    /// How a learner publishes its model.
    pub publish: PublishSettings,
    pub features: FeatureConfig,
    pub hyper: HyperChoice,
    /// Its `role` says what this process does.
    pub pipeline: PipelineConfig,
    /// Predictions on request (`--http-addr`).
    pub http: Option<crate::http::HttpSettings>,
    /// The mail protocols (`--spamd-addr`, `--rspamd-addr`).
    pub mail: Option<crate::mail::MailSettings>,
    /// The web console (`--console-addr`).
    pub console: Option<crate::console::ConsoleSettings>,
    /// Create the topics this process needs when they are missing.
    pub create_topics: bool,
    /// Partitions of the topics it creates (the model topic has one).
    pub topic_partitions: i32,
}

/// Runs until `shutdown`; then finishes the message in hand, flushes,
/// checkpoints, commits (a learner publishes its last version first).
/// Blocks the calling thread, which it uses as the daemon's loop
/// ([`daemon`] says why).
pub(crate) fn run(s: &KafkaSettings, shutdown: &Shutdown, telemetry: Option<&Telemetry>) -> Result<(), DaemonError> {
    let Some(mut daemon) = Daemon::start(s, shutdown, telemetry)? else {
        return Ok(());
    };
    daemon.run()?;
    daemon.shutdown()
}
