//! The Kafka transport's [`Sink`]: one producer for the output, review and
//! dead-letter topics (and, shared with [`super::model_topic`]'s outlet, a
//! learner's model topic), flushed by the core before a checkpoint. The
//! checkpoint protocol itself is the core's ([`crate::daemon::core`]);
//! the commit of its offsets is the consumer's ([`super::context`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rdkafka::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};

use super::KafkaSettings;
use crate::clock::now_ms;
use crate::daemon::DaemonError;
use crate::daemon::core::{Record, Sink};
use crate::message::Bad;
use crate::pipeline::{Outcome, Prediction};
use crate::transport::sinks::DEAD_LETTER_PREFIX;

/// Counts deliveries; librdkafka retries until `message.timeout.ms`, which
/// the daemon sets to infinite, so a failure here is permanent (too large,
/// not authorised, ...).
#[derive(Default)]
pub(super) struct DeliveryCounter {
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
/// refusals to the dead-letter topic with their reason in headers. One
/// producer (shared with a learner's model outlet) queues them all; a
/// flush delivers them.
pub(crate) struct KafkaSink {
    producer: Arc<ThreadedProducer<DeliveryCounter>>,
    output_topic: String,
    dead_letter_topic: String,
    /// Where messages to review go (`--review-topic`), if anywhere.
    review_topic: Option<String>,
    flush_timeout: Duration,
    /// Reused output buffer.
    buf: Vec<u8>,
}

impl KafkaSink {
    pub(super) fn new(s: &KafkaSettings, producer: Arc<ThreadedProducer<DeliveryCounter>>) -> Self {
        KafkaSink {
            producer,
            output_topic: s.output_topic.clone(),
            dead_letter_topic: s.dead_letter_topic.clone(),
            review_topic: s.review_topic.clone(),
            flush_timeout: s.flush_timeout,
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

    fn export_metrics(&self) {
        let c = self.producer.context();
        metrics::counter!("classifyd_delivery_failures_total").absolute(c.failed.load(Ordering::Relaxed));
        metrics::gauge!("classifyd_producer_queue_messages").set(self.producer.in_flight_count() as f64);
    }
}

/// Queues a message on `producer` (a value of none: a deletion, for a
/// compacted topic), waiting while its queue is full; false when it could
/// not be queued (logged, counted).
pub(super) fn send_opt(
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
