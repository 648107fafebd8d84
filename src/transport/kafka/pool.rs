//! The pool's reports (`--pool-topic`, compacted, one partition): every
//! Kafka instance of any role reports, every [`REPORT_EVERY`], its role
//! and the model version it serves, keyed by its name; an instance that
//! serves a console also reads every report (from the topic's start,
//! outside any group, committing nothing) and shows the pool on its
//! board. What a member says is its own: a predictor's version is the one
//! its copies answer from.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::KafkaSettings;
use super::context::client_config;
use crate::serving::board::{Board, PoolMember};

/// How often an instance reports.
pub(super) const REPORT_EVERY: Duration = Duration::from_secs(5);
/// Reports read in one turn of the loop, at most.
const READ_AT_ONCE: usize = 256;
/// A member not heard from for this long has left the pool (its key
/// stays on the compacted topic when it was killed: no tombstone), so the
/// view stays bounded by the instances of the last minutes.
const GONE_AFTER_MS: u64 = 10 * 60 * 1000;

/// This instance's reporting, and its view of the pool when it shows one.
pub(super) struct Pool {
    producer: ThreadedProducer<DefaultProducerContext>,
    topic: String,
    me: PoolMember,
    /// Reads the reports, when a console shows them.
    reader: Option<(BaseConsumer, Arc<Board>)>,
    seen: BTreeMap<String, PoolMember>,
    next: Instant,
}

impl Pool {
    /// The pool of `s`'s `--pool-topic` (none without one); `board`: the
    /// console's, which then shows it. A client librdkafka refuses is
    /// logged and the daemon goes on without a pool view.
    pub(super) fn open(s: &KafkaSettings, board: Option<Arc<Board>>) -> Option<Pool> {
        let topic = s.pool_topic.clone()?;
        let producer = match client_config(s).set("linger.ms", "0").create() {
            Ok(p) => p,
            Err(error) => {
                tracing::warn!(%error, "no pool reports: the producer cannot be made");
                return None;
            }
        };
        let reader = board.and_then(|b| match reader(s, &topic) {
            Ok(c) => Some((c, b)),
            Err(error) => {
                tracing::warn!(%error, "no pool view: the reader cannot be made");
                None
            }
        });
        let now = crate::clock::now_ms();
        let me = PoolMember {
            instance: instance_name(),
            role: s.pipeline.role.to_string(),
            model_version: 0,
            at_ms: now,
            started_ms: now,
        };
        Some(Pool {
            producer,
            topic,
            me,
            reader,
            seen: BTreeMap::new(),
            next: Instant::now(),
        })
    }

    /// Reports `version` when a report is due, and reads the reports that
    /// came (posting the pool to the board).
    pub(super) fn tick(&mut self, version: u64) {
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
        let Some((reader, board)) = &self.reader else {
            return;
        };
        let mut read = 0;
        while let Some(Ok(m)) = reader.poll(Duration::ZERO) {
            match m.payload() {
                // A tombstone: an instance that stopped cleanly.
                None => {
                    if let Some(key) = m.key().and_then(|k| std::str::from_utf8(k).ok()) {
                        self.seen.remove(key);
                    }
                }
                Some(v) => {
                    if let Ok(member) = serde_json::from_slice::<PoolMember>(v) {
                        self.seen.insert(member.instance.clone(), member);
                    }
                }
            }
            read += 1;
            if read >= READ_AT_ONCE {
                break;
            }
        }
        let before = self.seen.len();
        let now = crate::clock::now_ms();
        self.seen.retain(|_, m| now.saturating_sub(m.at_ms) <= GONE_AFTER_MS);
        if read == 0 && self.seen.len() == before && board.pool().is_some() {
            return;
        }
        let mut members: Vec<PoolMember> = self.seen.values().cloned().collect();
        members.sort_by_key(|m| std::cmp::Reverse(m.at_ms));
        board.set_pool(members);
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
