//! The pool's reports (`--pool-topic`, compacted, one partition): every
//! Kafka instance of any role reports, every [`REPORT_EVERY`], its role
//! and the model version it serves, keyed by its name; an instance that
//! serves a console also reads every report (from the topic's start,
//! outside any group, committing nothing) and hands the pool it sees
//! (`crate::pool::View`) to the daemon, whose console shows it. What a
//! member says is its own: a predictor's version is the one its copies
//! answer from.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::KafkaSettings;
use super::context::client_config;
use crate::pool::{Instance, View};

/// How often an instance reports.
pub(super) const REPORT_EVERY: Duration = Duration::from_secs(5);
/// Reports read in one turn of the loop, at most.
const READ_AT_ONCE: usize = 256;

/// This instance's reporting, and its view of the pool when it shows one.
pub(super) struct Pool {
    producer: ThreadedProducer<DefaultProducerContext>,
    topic: String,
    me: Instance,
    /// Reads the reports, when a console shows them, into the pool's view.
    reader: Option<(BaseConsumer, View)>,
    next: Instant,
}

impl Pool {
    /// The pool of `s`'s `--pool-topic` (none without one); with `shown`
    /// (a console shows it), its reports are read too. A client librdkafka
    /// refuses is logged and the daemon goes on without a pool view.
    pub(super) fn open(s: &KafkaSettings, shown: bool) -> Option<Pool> {
        let topic = s.pool_topic.clone()?;
        let producer = match client_config(s).set("linger.ms", "0").create() {
            Ok(p) => p,
            Err(error) => {
                tracing::warn!(%error, "no pool reports: the producer cannot be made");
                return None;
            }
        };
        let reader = shown.then(|| reader(s, &topic)).and_then(|r| match r {
            Ok(c) => Some((c, View::default())),
            Err(error) => {
                tracing::warn!(%error, "no pool view: the reader cannot be made");
                None
            }
        });
        let now = crate::clock::now_ms();
        let me = Instance {
            instance: instance_name(),
            role: s.role.to_string(),
            model_version: 0,
            at_ms: now,
            started_ms: now,
        };
        Some(Pool {
            producer,
            topic,
            me,
            reader,
            next: Instant::now(),
        })
    }

    /// Reports `version` when a report is due, and reads the reports that
    /// came: the pool's members when they changed since the last call.
    pub(super) fn tick(&mut self, version: u64) -> Option<Vec<Instance>> {
        if Instant::now() >= self.next {
            self.next = Instant::now() + REPORT_EVERY;
            self.me.model_version = version;
            self.me.at_ms = crate::clock::now_ms();
            // A struct of strings and numbers always serializes.
            let value = serde_json::to_vec(&self.me).unwrap_or_default();
            let record = BaseRecord::to(&self.topic).key(&self.me.instance).payload(&value);
            if let Err((error, _)) = self.producer.send(record) {
                tracing::debug!(%error, "pool report not queued");
            }
        }
        let (reader, view) = self.reader.as_mut()?;
        let mut read = 0;
        while let Some(Ok(m)) = reader.poll(Duration::ZERO) {
            view.read(m.key(), m.payload());
            read += 1;
            if read >= READ_AT_ONCE {
                break;
            }
        }
        view.changed(read, crate::clock::now_ms())
    }

    /// Leaves the pool (at shutdown): a tombstone for this instance's key,
    /// which readers drop and compaction removes.
    pub(super) fn finish(&self) {
        let gone = BaseRecord::<str, [u8]>::to(&self.topic).key(&self.me.instance);
        if let Err((error, _)) = self.producer.send(gone) {
            tracing::debug!(%error, "pool tombstone not queued");
        }
        let _ = self.producer.flush(Duration::from_secs(1));
    }
}

/// A consumer of every partition of `topic` from its start.
fn reader(s: &KafkaSettings, topic: &str) -> Result<BaseConsumer, rdkafka::error::KafkaError> {
    let consumer: BaseConsumer = client_config(s)
        .set("group.id", "classifyd-pool-view")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)?;
    consumer.assign(&tpl)?;
    Ok(consumer)
}

/// This instance's name: its host and process id.
fn instance_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".into());
    format!("{host}-{}", std::process::id())
}
