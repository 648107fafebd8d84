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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;

use super::kafka_errors::{ErrorSpell, SpellNote};
use super::{Cadence, DaemonError, load_or_new};
use crate::checkpoint::{self, CheckpointDir};
use crate::clock::now_ms;
use crate::features::FeatureConfig;
use crate::metrics::Telemetry;
use crate::model::HyperChoice;
use crate::pipeline::{Outcome, Pipeline, PipelineConfig};
use crate::shutdown::Shutdown;

/// Settings of a Kafka run.
#[derive(Clone, Debug)]
pub struct KafkaSettings {
    pub brokers: String,
    pub input_topic: String,
    pub feedback_topic: String,
    pub output_topic: String,
    pub dead_letter_topic: String,
    pub group_id: String,
    /// librdkafka properties (`-X key=value`), applied to consumer and producer.
    pub properties: Vec<(String, String)>,
    pub checkpoint_dir: PathBuf,
    pub checkpoint_interval: Duration,
    pub checkpoint_every_updates: u64,
    pub keep_checkpoints: usize,
    /// How long the producer may take to deliver what is queued at a
    /// checkpoint or at shutdown before the checkpoint is put off.
    pub flush_timeout: Duration,
    pub features: FeatureConfig,
    pub hyper: HyperChoice,
    pub pipeline: PipelineConfig,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct KafkaSummary {
    pub messages: u64,
    pub checkpoints: u64,
    pub resumed_from: Option<PathBuf>,
}

/// Counts deliveries; librdkafka retries until `message.timeout.ms`, which
/// the daemon sets to infinite, so a failure here is permanent (too large,
/// not authorised, ...).
#[derive(Default)]
pub struct DeliveryCounter {
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
}

impl ClientContext for DeliveryCounter {}

impl ProducerContext for DeliveryCounter {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Err((error, msg)) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(%error, topic = msg.topic(), "delivery failed permanently");
            }
        }
    }
}

/// The daemon's state, shared by the message loop and the rebalance callback
/// (which runs inside the consumer's poll, on the loop's thread; the lock is
/// never held across an await).
struct State {
    pipeline: Pipeline,
    /// Next offset per "topic/partition" that the model includes.
    positions: BTreeMap<String, u64>,
    dir: CheckpointDir,
    producer: ThreadedProducer<DeliveryCounter>,
    output_topic: String,
    dead_letter_topic: String,
    flush_timeout: Duration,
    cadence: Cadence,
    checkpoints: u64,
    messages: u64,
    /// Reused output buffer.
    buf: Vec<u8>,
    /// Reused buffer for a position's key.
    key: String,
}

fn position_key(topic: &str, partition: i32) -> String {
    let mut key = String::new();
    write_position_key(&mut key, topic, partition);
    key
}

/// Writes the checkpoint's key of a partition's position into `out`.
fn write_position_key(out: &mut String, topic: &str, partition: i32) {
    use std::fmt::Write;
    // Writing to a String cannot fail.
    let _ = write!(out, "{topic}/{partition}");
}

impl State {
    fn handle(&mut self, msg: &BorrowedMessage<'_>) {
        let (topic, partition, offset) = (msg.topic(), msg.partition(), msg.offset());
        let payload = msg.payload().unwrap_or(&[]);
        let default_id = || format!("{topic}/{partition}/{offset}");
        let stamp = msg.timestamp().to_millis().and_then(|t| u64::try_from(t).ok());
        let now = stamp.unwrap_or_else(now_ms);
        let started = Instant::now();
        let outcome = self.pipeline.handle(payload, &default_id, now);
        crate::metrics::handled(&outcome, started.elapsed());
        match outcome {
            Outcome::Predicted(p) => {
                self.buf.clear();
                p.write_json(&mut self.buf);
                let key = msg.key().map_or_else(|| p.id.clone().into_bytes(), <[u8]>::to_vec);
                let value = std::mem::take(&mut self.buf);
                self.send(&self.output_topic, &key, &value, None);
                self.buf = value;
                if let Some(t) = stamp {
                    let secs = now_ms().saturating_sub(t) as f64 / 1000.0;
                    metrics::histogram!("classifyd_end_to_end_latency_seconds").record(secs);
                }
            }
            Outcome::Bad(bad) => {
                let source = default_id();
                let headers = OwnedHeaders::new()
                    .insert(Header {
                        key: "classifyd-reason",
                        value: Some(bad.reason.as_str()),
                    })
                    .insert(Header {
                        key: "classifyd-error",
                        value: Some(bad.detail.as_str()),
                    })
                    .insert(Header {
                        key: "classifyd-source",
                        value: Some(source.as_str()),
                    });
                let key = msg.key().unwrap_or(&[]).to_vec();
                self.send(&self.dead_letter_topic, &key, payload, Some(headers));
            }
            _ => {}
        }
        self.advance(topic, partition, (offset + 1) as u64);
        self.messages += 1;
    }

    /// Records `next` as the next offset of `topic`/`partition`, without
    /// allocating a key per message.
    fn advance(&mut self, topic: &str, partition: i32, next: u64) {
        self.key.clear();
        write_position_key(&mut self.key, topic, partition);
        match self.positions.get_mut(self.key.as_str()) {
            Some(p) => *p = next,
            None => {
                self.positions.insert(self.key.clone(), next);
            }
        }
    }

    /// Queues a message; when the producer's queue is full, waits (the
    /// consumer is not polled meanwhile: consumption pauses, nothing drops).
    fn send(&self, topic: &str, key: &[u8], value: &[u8], headers: Option<OwnedHeaders>) {
        let mut record = BaseRecord::to(topic).key(key).payload(value);
        if let Some(h) = headers {
            record = record.headers(h);
        }
        loop {
            match self.producer.send(record) {
                Ok(()) => return,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err((error, _)) => {
                    self.producer.context().failed.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(%error, topic, "cannot queue message");
                    return;
                }
            }
        }
    }

    /// Flush, checkpoint, commit. If the flush times out (the broker is
    /// away) nothing is written or committed and the caller tries later.
    fn checkpoint<C: Consumer<Ctx>>(&mut self, consumer: &C, why: &str) -> Result<bool, DaemonError> {
        if let Err(error) = self.producer.flush(self.flush_timeout) {
            crate::metrics::checkpoint_failed();
            tracing::warn!(%error, why, "outputs not yet delivered; checkpoint put off");
            self.cadence.put_off();
            return Ok(false);
        }
        let saved = self
            .dir
            .save(&mut checkpoint::capture(&self.pipeline, &self.positions))
            .inspect_err(|_| crate::metrics::checkpoint_failed())?;
        crate::metrics::checkpoint_saved(&saved);
        self.cadence.done(self.pipeline.model().version());
        self.checkpoints += 1;
        tracing::debug!(path = %saved.path.display(), bytes = saved.bytes, why, "checkpoint written");
        let mut tpl = TopicPartitionList::new();
        if let Ok(assigned) = consumer.assignment() {
            for e in assigned.elements() {
                if let Some(&pos) = self.positions.get(&position_key(e.topic(), e.partition())) {
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
        Ok(true)
    }
}

/// The consumer's context: sets start offsets on assignment and checkpoints
/// before partitions are revoked.
pub struct Ctx {
    state: Arc<Mutex<State>>,
    /// Partitions currently assigned (for `/readyz`).
    assigned: Arc<AtomicU64>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding the lock would already have ended the daemon.
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl ClientContext for Ctx {
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

impl ConsumerContext for Ctx {
    fn rebalance(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr, tpl: &mut TopicPartitionList) {
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let committed = consumer.committed_offsets(tpl.clone(), Duration::from_secs(10)).ok();
                let state = lock(&self.state);
                let parts: Vec<(String, i32)> = tpl
                    .elements()
                    .iter()
                    .map(|e| (e.topic().to_string(), e.partition()))
                    .collect();
                for (topic, partition) in &parts {
                    let from_checkpoint = state.positions.get(&position_key(topic, *partition)).map(|&p| p as i64);
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
                }
                drop(state);
                metrics::counter!("classifyd_rebalances_total", "kind" => "assign").increment(1);
                self.assigned.store(tpl.count() as u64, Ordering::SeqCst);
                if let Err(error) = consumer.assign(tpl) {
                    tracing::error!(%error, "assign failed");
                }
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                let mut state = lock(&self.state);
                if let Err(error) = state.checkpoint(consumer, "revoke") {
                    tracing::error!(%error, "checkpoint before revoke failed");
                }
                drop(state);
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

fn client_config(s: &KafkaSettings) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &s.brokers);
    for (k, v) in &s.properties {
        c.set(k, v);
    }
    c
}

/// How often the loop does its time-based work.
const TICK: Duration = Duration::from_millis(100);

/// Runs until `shutdown`; then finishes the message in hand, flushes,
/// checkpoints, commits.
pub async fn run(
    s: &KafkaSettings,
    shutdown: &Shutdown,
    telemetry: Option<&Telemetry>,
) -> Result<KafkaSummary, DaemonError> {
    let dir = CheckpointDir::open(&s.checkpoint_dir, s.keep_checkpoints)?;
    let (pipeline, positions, resumed_from) = load_or_new(Some(&dir), &s.features, &s.hyper, s.pipeline.clone())?;
    let kafka = |e: KafkaError| DaemonError::Io(std::io::Error::other(format!("kafka: {e}")));
    let mut pc = client_config(s);
    // Retry deliveries for as long as the broker is away: nothing is dropped.
    pc.set("message.timeout.ms", "0").set("linger.ms", "5");
    for (k, v) in &s.properties {
        pc.set(k, v);
    }
    let producer: ThreadedProducer<DeliveryCounter> =
        pc.create_with_context(DeliveryCounter::default()).map_err(kafka)?;
    let cadence = Cadence::new(
        s.checkpoint_interval,
        s.checkpoint_every_updates,
        pipeline.model().version(),
    );
    let state = Arc::new(Mutex::new(State {
        pipeline,
        positions,
        dir,
        producer,
        output_topic: s.output_topic.clone(),
        dead_letter_topic: s.dead_letter_topic.clone(),
        flush_timeout: s.flush_timeout,
        cadence,
        checkpoints: 0,
        messages: 0,
        buf: Vec::new(),
        key: String::new(),
    }));
    let mut cc = client_config(s);
    cc.set("group.id", &s.group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "range")
        .set("statistics.interval.ms", "5000")
        // Notice topics created after start (e.g. the feedback topic on first use) within seconds.
        .set("topic.metadata.refresh.interval.ms", "10000");
    for (k, v) in &s.properties {
        cc.set(k, v);
    }
    let assigned = Arc::new(AtomicU64::new(0));
    let ctx = Ctx {
        state: Arc::clone(&state),
        assigned: Arc::clone(&assigned),
    };
    let consumer: StreamConsumer<Ctx> = cc.create_with_context(ctx).map_err(kafka)?;
    let mut last_publish = Instant::now();
    let topics: Vec<&str> = if s.feedback_topic == s.input_topic {
        vec![&s.input_topic]
    } else {
        vec![&s.input_topic, &s.feedback_topic]
    };
    consumer.subscribe(&topics).map_err(kafka)?;
    tracing::info!(brokers = %s.brokers, ?topics, group = %s.group_id, "consuming");
    // Time-based work (checkpoints, metrics, the shutdown check while no
    // messages come) runs on a tick rather than per message: one timer for
    // the whole run, not a timer and clock reads for every message.
    let tick = tokio::time::sleep(TICK);
    tokio::pin!(tick);
    let mut errors = ErrorSpell::default();
    // Exported from the start, at 0, so a rate over it is defined before the first error.
    metrics::counter!("classifyd_consumer_errors_total").increment(0);
    loop {
        if shutdown.is_triggered() {
            tracing::info!("shutdown requested; finishing");
            break;
        }
        tokio::select! {
            biased;
            () = &mut tick => {
                tick.as_mut().reset(tokio::time::Instant::now() + TICK);
                if let Some(SpellNote::Over { errors, seconds }) = errors.tick(Instant::now()) {
                    tracing::info!(errors, seconds, "consumer errors stopped");
                }
                let mut st = lock(&state);
                if st.cadence.due_by_time() {
                    st.checkpoint(&consumer, "interval")?;
                }
                if let Some(t) = telemetry
                    && last_publish.elapsed() >= crate::metrics::PUBLISH_INTERVAL
                {
                    crate::metrics::publish(&st.pipeline);
                    let c = st.producer.context();
                    metrics::counter!("classifyd_delivery_failures_total").absolute(c.failed.load(Ordering::Relaxed));
                    metrics::gauge!("classifyd_producer_queue_messages").set(st.producer.in_flight_count() as f64);
                    t.set_ready(assigned.load(Ordering::SeqCst) > 0);
                    last_publish = Instant::now();
                }
            }
            received = consumer.recv() => match received {
                Err(error) => {
                    metrics::counter!("classifyd_consumer_errors_total").increment(1);
                    match errors.error(Instant::now()) {
                        Some(SpellNote::Began) => tracing::warn!(%error, "consumer error; retrying"),
                        Some(SpellNote::GoesOn { errors, seconds }) => {
                            tracing::warn!(%error, errors, seconds, "consumer errors go on; retrying");
                        }
                        _ => {}
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(msg) => {
                    let mut st = lock(&state);
                    st.handle(&msg);
                    if st.cadence.due_by_updates(st.pipeline.model().version()) {
                        st.checkpoint(&consumer, "updates")?;
                    }
                }
            },
        }
    }
    let mut st = lock(&state);
    let deadline = Instant::now() + s.flush_timeout;
    while !st.checkpoint(&consumer, "shutdown")? {
        if Instant::now() >= deadline {
            tracing::error!("could not deliver outputs before the shutdown deadline; last checkpoint kept");
            break;
        }
    }
    let summary = KafkaSummary {
        messages: st.messages,
        checkpoints: st.checkpoints,
        resumed_from,
    };
    let r = st.pipeline.progressive().report();
    tracing::info!(
        messages = summary.messages,
        learned = st.pipeline.counters().learned,
        predicted = st.pipeline.counters().predicted,
        bad = st.pipeline.counters().bad_total(),
        accuracy = r.accuracy,
        "run finished"
    );
    Ok(summary)
}
