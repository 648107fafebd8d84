//! The consumer's side: its context (start offsets on assignment, the
//! later of the checkpoint's and the group's; a checkpoint before
//! partitions are revoked; consumer lag from librdkafka's statistics), its
//! part in a checkpoint (the group commit of the saved offsets:
//! [`GroupCommit`]); and the client configuration every Kafka client of
//! the daemon starts from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;

use super::KafkaSettings;
use super::sink::KafkaSink;
use crate::checkpoint::Positions;
use crate::daemon::DaemonError;
use crate::daemon::core::{Checkpointed, Core};
use crate::pipeline::Role;

/// The consumer's context: sets start offsets on assignment and checkpoints
/// before partitions are revoked.
pub(super) struct ConsumerCtx {
    pub(super) core: Arc<Mutex<KafkaCore>>,
    /// Partitions currently assigned (for `/readyz`).
    pub(super) assigned: Arc<AtomicU64>,
    /// Rebalances so far (each assignment and revocation): records taken
    /// before one are not handled after it (`super::poll`).
    pub(super) rebalances: Arc<AtomicU64>,
}

/// The daemon core over the Kafka sink, shared by the loop and the
/// rebalance callback (see `super::poll`).
pub(super) type KafkaCore = Core<KafkaSink>;

pub(super) fn lock(core: &Mutex<KafkaCore>) -> MutexGuard<'_, KafkaCore> {
    // A panic while holding the lock would already have ended the daemon.
    core.lock().unwrap_or_else(|p| p.into_inner())
}

impl ClientContext for ConsumerCtx {
    /// librdkafka's statistics (every `statistics.interval.ms`): consumer lag
    /// per partition.
    fn stats(&self, stats: rdkafka::Statistics) {
        for (topic, t) in &stats.topics {
            for (id, p) in &t.partitions {
                if p.partition >= 0 && p.consumer_lag >= 0 {
                    metrics::gauge!("classifyd_consumer_lag_messages", "topic" => topic.clone(), "partition" => id.to_string())
                        .set(p.consumer_lag as f64);
                }
            }
        }
    }
}

impl ConsumerContext for ConsumerCtx {
    fn rebalance(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr, tpl: &mut TopicPartitionList) {
        self.rebalances.fetch_add(1, Ordering::SeqCst);
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let committed = consumer.committed_offsets(tpl.clone(), Duration::from_secs(10)).ok();
                let core = lock(&self.core);
                let parts: Vec<(String, i32)> = tpl
                    .elements()
                    .iter()
                    .map(|e| (e.topic().to_string(), e.partition()))
                    .collect();
                for (topic, partition) in &parts {
                    let from_checkpoint = core.positions().offset(topic, *partition).map(|p| p as i64);
                    let from_group = committed
                        .as_ref()
                        .and_then(|c| c.find_partition(topic, *partition))
                        .and_then(|e| match e.offset() {
                            Offset::Offset(o) => Some(o),
                            _ => None,
                        });
                    // Later of the two: the checkpoint may be ahead of a failed
                    // commit; the group ahead of a stale checkpoint (another
                    // instance owned the partition since).
                    if let Some(start) = from_checkpoint.max(from_group) {
                        let _ = tpl.set_partition_offset(topic, *partition, Offset::Offset(start));
                    }
                    tracing::info!(topic, partition, ?from_checkpoint, ?from_group, "partition assigned");
                    // A series from the assignment on: NaN ("no value yet")
                    // until librdkafka's first statistics, seconds later.
                    let labels = [("topic", topic.clone()), ("partition", partition.to_string())];
                    metrics::gauge!("classifyd_consumer_lag_messages", &labels).set(f64::NAN);
                }
                drop(core);
                metrics::counter!("classifyd_rebalances_total", "kind" => "assign").increment(1);
                self.assigned.store(tpl.count() as u64, Ordering::SeqCst);
                if let Err(error) = consumer.assign(tpl) {
                    tracing::error!(%error, "assign failed");
                }
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                let mut core = lock(&self.core);
                if let Err(error) = core.checkpoint("revoke", &mut GroupCommit(consumer)) {
                    tracing::error!(%error, "checkpoint before revoke failed");
                }
                drop(core);
                tracing::info!(partitions = tpl.count(), "partitions revoked");
                metrics::counter!("classifyd_rebalances_total", "kind" => "revoke").increment(1);
                self.assigned.store(0, Ordering::SeqCst);
                let _ = consumer.unassign();
            }
            other => {
                tracing::error!(error = ?other, "rebalance error");
                let _ = consumer.unassign();
            }
        }
    }
}

/// The Kafka transport's part in a checkpoint: once it is saved, its
/// offsets of the partitions the consumer is assigned are committed to
/// the group.
pub(super) struct GroupCommit<'c, C>(pub(super) &'c C);

impl<C: Consumer<ConsumerCtx>> Checkpointed for GroupCommit<'_, C> {
    fn commit(&mut self, positions: &Positions, why: &str) {
        commit(self.0, positions, why);
    }
}

/// Commits `positions`' offsets of the partitions `consumer` is assigned.
fn commit<C: Consumer<ConsumerCtx>>(consumer: &C, positions: &Positions, why: &str) {
    let mut tpl = TopicPartitionList::new();
    if let Ok(assigned) = consumer.assignment() {
        for e in assigned.elements() {
            if let Some(pos) = positions.offset(e.topic(), e.partition()) {
                let _ = tpl.add_partition_offset(e.topic(), e.partition(), Offset::Offset(pos as i64));
            }
        }
    }
    if tpl.count() > 0
        && let Err(error) = consumer.commit(&tpl, CommitMode::Sync)
    {
        // The checkpoint holds the offsets: a later commit, or the
        // checkpoint itself on the next assignment, covers them.
        tracing::warn!(%error, why, "offset commit failed");
    }
}

/// The input consumer's configuration: the group (a learner's own, since it
/// must see every partition), offsets stored and committed by the daemon
/// only, range assignment, statistics for the lag, quick rebalances.
pub(super) fn consumer_config(s: &KafkaSettings) -> ClientConfig {
    let group = match s.role {
        Role::Learner => format!("{}-learner", s.group_id),
        _ => s.group_id.clone(),
    };
    let mut cc = client_config(s);
    cc.set("group.id", &group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "range")
        .set("statistics.interval.ms", "5000")
        // Notice topics created after start (e.g. the feedback topic on first use) within seconds.
        .set("topic.metadata.refresh.interval.ms", "10000")
        // A 10 s session (librdkafka's default is 45 s): a dead member's
        // partitions move within 10 s, and a fresh group is assigned within
        // seconds on brokers that wait out part of the session timeout
        // before the first assignment (the test broker took 23 s at 45 s).
        // -X session.timeout.ms=... overrides it.
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000")
        // librdkafka queues up to 64 MiB per partition ahead of the loop and
        // fetches up to 50 MB at once: memory outside the model's budget
        // that a backlog fills. 16 MiB (thousands of messages) per
        // partition keeps the loop fed; -X overrides either.
        .set("fetch.max.bytes", "16777216")
        .set("queued.max.messages.kbytes", "16384");
    with_properties(cc, s)
}

/// The producer's configuration: deliveries retried for as long as the
/// broker is away (nothing is dropped), small batches.
pub(super) fn producer_config(s: &KafkaSettings) -> ClientConfig {
    let mut pc = client_config(s);
    pc.set("message.timeout.ms", "0")
        .set("linger.ms", "5")
        // librdkafka's queue holds up to 1 GiB by default: a learner whose
        // model versions outrun the broker would fill it. Past 32 MiB the
        // daemon waits for deliveries (KafkaSink's send), which slows its
        // consumption rather than its memory's growth.
        .set("queue.buffering.max.kbytes", "32768");
    with_properties(pc, s)
}

pub(super) fn client_config(s: &KafkaSettings) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &s.brokers);
    with_properties(c, s)
}

/// `c` with the user's librdkafka properties (`-X`, ...) set last, so
/// that they win over the daemon's own choices.
pub(super) fn with_properties(mut c: ClientConfig, s: &KafkaSettings) -> ClientConfig {
    for (k, v) in &s.properties {
        c.set(k, v);
    }
    c
}

/// A Kafka client error as the error a run stops with, saying what failed.
pub(super) fn kafka_error(what: &'static str) -> impl Fn(rdkafka::error::KafkaError) -> DaemonError {
    move |source| DaemonError::Kafka { what, source }
}
