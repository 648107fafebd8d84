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
//! The transport is [`Kafka`], which the daemon drives
//! (`crate::daemon::Transport`). Roles (`--role`, the pipeline's [`Role`]) share this loop: a standalone
//! process does all of the above; a learner reads the input and feedback
//! topics in its own group (`GROUP-learner`: it must see every partition),
//! learns, checkpoints and publishes its model to the model topic; a
//! predictor reads the model topic ([`model_topic`]), serves the newest
//! complete version, reads the input topic in the group, publishes
//! predictions and commits its offsets after they are delivered (it keeps
//! no checkpoint). See docs/scaling.md.

mod context;
mod errors;
mod forward;
mod model_topic;
mod poll;
mod pool;
mod publication;
pub(crate) mod sink;
pub(crate) mod tail;
mod topics;

use std::time::Duration;

pub(crate) use self::poll::Kafka;
use crate::pipeline::Role;
use crate::replica::PublishSettings;

/// Settings of a Kafka run: its brokers, topics and headers.
#[derive(Clone, Debug)]
pub struct KafkaSettings {
    pub brokers: String,
    /// The process's role (`--role`, the pipeline's too): which topics it
    /// reads and writes, in which group.
    pub role: Role,
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
    /// How long the producer may take to deliver what is queued at a
    /// checkpoint or at shutdown before the checkpoint is put off.
    pub flush_timeout: Duration,
    /// How a learner publishes its model.
    pub publish: PublishSettings,
    /// Create the topics this process needs when they are missing.
    pub create_topics: bool,
    /// Partitions of the topics it creates (the model topic has one).
    pub topic_partitions: i32,
}
