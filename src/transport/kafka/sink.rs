//! The Kafka transport's [`Sink`]: one producer for the output, review,
//! dead-letter and model topics, flushed by the core before a checkpoint,
//! and the commit of the checkpoint's offsets to the group after it
//! ([`GroupCommit`]). The checkpoint protocol itself is the core's
//! ([`crate::transport::core`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::ClientContext;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::KafkaSettings;
use super::context::Ctx;
use crate::checkpoint::Positions;
use crate::clock::now_ms;
use crate::message::Bad;
use crate::model::Model;
use crate::pipeline::{Outcome, Prediction};
use crate::replica::Publisher;
use crate::transport::DaemonError;
use crate::transport::core::{Checkpointed, Record, Sink};
use crate::transport::sinks::DEAD_LETTER_PREFIX;

/// Counts deliveries; librdkafka retries until `message.timeout.ms`, which
/// the daemon sets to infinite, so a failure here is permanent (too large,
/// not authorised, ...).
#[derive(Default)]
pub struct DeliveryCounter {
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
    /// The model topic (a learner's), whose records are counted apart.
    pub model_topic: Option<String>,
    /// Model-topic records delivered or failed for good.
    pub model_settled: AtomicU64,
}

impl ClientContext for DeliveryCounter {}

impl ProducerContext for DeliveryCounter {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let topic = match result {
            Ok(m) => m.topic(),
            Err((_, m)) => m.topic(),
        };
        if self.model_topic.as_deref() == Some(topic) {
            self.model_settled.fetch_add(1, Ordering::Relaxed);
        }
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

/// Where a Kafka daemon's outputs go: predictions to the output topic
/// (keyed by the input's key, or its id), messages to review to theirs,
/// refusals to the dead-letter topic with their reason in headers, and a
/// learner's model to the model topic. One producer queues them all; a
/// flush delivers them.
pub(super) struct KafkaSink {
    producer: ThreadedProducer<DeliveryCounter>,
    output_topic: String,
    dead_letter_topic: String,
    /// Where messages to review go (`--review-topic`), if anywhere.
    review_topic: Option<String>,
    flush_timeout: Duration,
    /// A learner's publisher and the model topic.
    publisher: Option<(Publisher, String)>,
    /// Model-topic records queued (see [`DeliveryCounter::model_settled`]).
    model_sent: u64,
    /// Reused output buffer.
    buf: Vec<u8>,
}

impl KafkaSink {
    pub(super) fn new(
        s: &KafkaSettings,
        producer: ThreadedProducer<DeliveryCounter>,
        publisher: Option<(Publisher, String)>,
    ) -> Self {
        KafkaSink {
            producer,
            output_topic: s.output_topic.clone(),
            dead_letter_topic: s.dead_letter_topic.clone(),
            review_topic: s.review_topic.clone(),
            flush_timeout: s.flush_timeout,
            publisher,
            model_sent: 0,
            buf: Vec::new(),
        }
    }

    /// Queues a message; when the producer's queue is full, waits (the
    /// consumer is not polled meanwhile: consumption pauses, nothing drops).
    fn send(&self, topic: &str, key: &[u8], value: &[u8], headers: Option<OwnedHeaders>) {
        send_opt(&self.producer, topic, key, Some(value), headers);
    }

    /// A prediction to the output topic (and to review), and how long it
    /// took from the record's timestamp.
    fn deliver_prediction(&mut self, record: &Record<'_>, p: &Prediction) {
        self.buf.clear();
        p.write_json(&mut self.buf);
        let key = record.key.map_or_else(|| p.id.clone().into_bytes(), <[u8]>::to_vec);
        let value = std::mem::take(&mut self.buf);
        self.send(&self.output_topic, &key, &value, None);
        if let (Some(topic), Some(_)) = (&self.review_topic, &p.review) {
            let mut review = Vec::new();
            p.write_review_json(&mut review);
            self.send(topic, &key, &review, None);
        }
        self.buf = value;
        if let Some(t) = record.stamp_ms {
            let secs = now_ms().saturating_sub(t) as f64 / 1000.0;
            metrics::histogram!("classifyd_end_to_end_latency_seconds").record(secs);
        }
    }

    /// A refusal to the dead-letter topic: the record's bytes (at most
    /// [`DEAD_LETTER_PREFIX`] of them, with the length when cut), the
    /// reason, the error and where it came from in headers.
    fn deliver_refusal(&mut self, record: &Record<'_>, bad: &Bad) {
        let payload = record.payload.bytes();
        let source = record.position.default_id();
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
        let length = payload.len().to_string();
        let (copy, headers) = if payload.len() > DEAD_LETTER_PREFIX {
            let headers = headers.insert(Header {
                key: "classifyd-length",
                value: Some(length.as_str()),
            });
            (&payload[..DEAD_LETTER_PREFIX], headers)
        } else {
            (payload, headers)
        };
        let key = record.key.unwrap_or(&[]);
        self.send(&self.dead_letter_topic, key, copy, Some(headers));
    }
}

impl Sink for KafkaSink {
    fn deliver(&mut self, record: &Record<'_>, outcome: Outcome) -> Result<(), DaemonError> {
        match outcome {
            Outcome::Predicted(p) => self.deliver_prediction(record, &p),
            Outcome::Bad(bad) => self.deliver_refusal(record, &bad),
            _ => {}
        }
        Ok(())
    }

    /// Waits up to the flush timeout for every queued message to be
    /// delivered; `Ok(false)` when the broker did not take them all.
    fn flush(&mut self, why: &str) -> Result<bool, DaemonError> {
        if let Err(error) = self.producer.flush(self.flush_timeout) {
            tracing::warn!(%error, why, "outputs not yet delivered; checkpoint put off");
            return Ok(false);
        }
        Ok(true)
    }

    fn observe(&mut self, version: u64) {
        if let Some((publisher, _)) = &mut self.publisher {
            publisher.observe(version, now_ms);
        }
    }

    /// A learner: publishes the model to the model topic when a new
    /// version is due (or, with `force`, whenever it is not the one last
    /// published). The records are queued on the producer, which the next
    /// checkpoint flushes.
    fn publish_model(&mut self, model: &mut Model, force: bool) {
        let Some((publisher, topic)) = self.publisher.as_mut() else {
            return;
        };
        let version = model.version();
        // A model that has learned nothing predicts nothing: replicas wait
        // (not ready) for the first one that has.
        if version == 0 {
            return;
        }
        // The next version waits until the broker has taken the last one
        // whole: a model that changes faster than the broker stores it is
        // published less often, each version bringing more (a bucket moved
        // twice travels once), instead of queueing without end.
        let settled = self.producer.context().model_settled.load(Ordering::Relaxed);
        let due = if force {
            publisher.published_version() != Some(version)
        } else {
            settled >= self.model_sent && publisher.due(version)
        };
        if !due {
            return;
        }
        let started = Instant::now();
        let (mut records, mut bytes, mut sent) = (0usize, 0usize, 0u64);
        let producer = &self.producer;
        // Each record queued as it is made (a full version is never whole
        // in memory); queueing waits while librdkafka's queue is full.
        let kind = publisher.publish(model, now_ms(), &mut |r| {
            records += 1;
            bytes += r.key.len() + r.value.as_ref().map_or(0, Vec::len);
            sent += u64::from(send_opt(producer, topic, r.key.as_bytes(), r.value.as_deref(), None));
        });
        self.model_sent += sent;
        crate::metrics::model_published(kind.as_str(), bytes as u64);
        tracing::debug!(
            version,
            kind = kind.as_str(),
            records,
            bytes,
            ms = started.elapsed().as_millis() as u64,
            "model published"
        );
    }

    fn export_metrics(&self) {
        let c = self.producer.context();
        metrics::counter!("classifyd_delivery_failures_total").absolute(c.failed.load(Ordering::Relaxed));
        metrics::gauge!("classifyd_producer_queue_messages").set(self.producer.in_flight_count() as f64);
    }
}

/// The Kafka transport's part in a checkpoint: once it is saved, its
/// offsets of the partitions the consumer is assigned are committed to
/// the group.
pub(super) struct GroupCommit<'c, C>(pub(super) &'c C);

impl<C: Consumer<Ctx>> Checkpointed for GroupCommit<'_, C> {
    fn commit(&mut self, positions: &Positions, why: &str) {
        commit(self.0, positions, why);
    }
}

/// Commits `positions`' offsets of the partitions `consumer` is assigned.
fn commit<C: Consumer<Ctx>>(consumer: &C, positions: &Positions, why: &str) {
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

/// Queues a message on `producer` (a value of none: a deletion, for a
/// compacted topic), waiting while its queue is full; false when it could
/// not be queued (logged, counted).
fn send_opt(
    producer: &ThreadedProducer<DeliveryCounter>,
    topic: &str,
    key: &[u8],
    value: Option<&[u8]>,
    headers: Option<OwnedHeaders>,
) -> bool {
    let mut record = BaseRecord::<[u8], [u8]>::to(topic).key(key);
    record.payload = value;
    if let Some(h) = headers {
        record = record.headers(h);
    }
    loop {
        match producer.send(record) {
            Ok(()) => return true,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                record = r;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err((error, _)) => {
                producer.context().failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(%error, topic, "cannot queue message");
                return false;
            }
        }
    }
}
