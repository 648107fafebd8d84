//! The Kafka daemon's state: the pipeline, the positions it covers, the
//! producer, and what the loop does with one message ([`KafkaState::handle`])
//! and at a checkpoint ([`KafkaState::checkpoint`]: flush, save, commit). Owns
//! the delivery guarantees; the consumer's callbacks are in [`super::context`].
//! A learner's state also publishes its model ([`KafkaState::publish_model`]);
//! a predictor's has no checkpoint directory (its positions are committed
//! to the group only).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::ClientContext;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::KafkaSettings;
use super::context::Ctx;
use crate::checkpoint::{CheckpointDir, Positions};
use crate::clock::now_ms;
use crate::http::Feed;
use crate::pipeline::{EmailRecord, Outcome, Pipeline};
use crate::replica::Publisher;
use crate::transport::sinks::DEAD_LETTER_PREFIX;
use crate::transport::{Cadence, DaemonError};

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

/// The daemon's state, shared by the message loop and the rebalance callback
/// (which runs inside the consumer's poll, on the loop's thread; the lock is
/// never held across a poll).
pub(super) struct KafkaState {
    pub(super) pipeline: Pipeline,
    /// Next offset per "topic/partition" that the model includes (a
    /// predictor: whose predictions are done).
    pub(super) positions: Positions,
    /// Where checkpoints go (none on a predictor).
    pub(super) dir: Option<CheckpointDir>,
    pub(super) producer: ThreadedProducer<DeliveryCounter>,
    pub(super) output_topic: String,
    pub(super) dead_letter_topic: String,
    /// Where messages to review go (`--review-topic`), if anywhere.
    pub(super) review_topic: Option<String>,
    /// The record header that names a label's reporter.
    pub(super) reporter_header: String,
    /// The input topic and its label header, when its values are raw e-mails.
    pub(super) email_input: Option<(String, String)>,
    pub(super) flush_timeout: Duration,
    pub(super) cadence: Cadence,
    pub(super) checkpoints: u64,
    pub(super) messages: u64,
    /// A learner's publisher and the model topic.
    pub(super) publisher: Option<(Publisher, String)>,
    /// The copies of the model that HTTP requests are answered from
    /// (`--http-addr`).
    pub(super) feed: Option<Feed>,
    /// Model-topic records queued (see [`DeliveryCounter::model_settled`]).
    pub(super) model_sent: u64,
    /// Reused output buffer.
    pub(super) buf: Vec<u8>,
}

impl KafkaState {
    pub(super) fn new(
        s: &KafkaSettings,
        pipeline: Pipeline,
        positions: Positions,
        dir: Option<CheckpointDir>,
        producer: ThreadedProducer<DeliveryCounter>,
        cadence: Cadence,
        publisher: Option<(Publisher, String)>,
    ) -> Self {
        KafkaState {
            pipeline,
            positions,
            dir,
            producer,
            output_topic: s.output_topic.clone(),
            dead_letter_topic: s.dead_letter_topic.clone(),
            review_topic: s.review_topic.clone(),
            reporter_header: s.reporter_header.clone(),
            email_input: s.email_input.clone().map(|label| (s.input_topic.clone(), label)),
            flush_timeout: s.flush_timeout,
            cadence,
            checkpoints: 0,
            messages: 0,
            publisher,
            feed: None,
            model_sent: 0,
            buf: Vec::new(),
        }
    }

    pub(super) fn handle(&mut self, msg: &BorrowedMessage<'_>) {
        let (topic, partition, offset) = (msg.topic(), msg.partition(), msg.offset());
        let payload = msg.payload().unwrap_or(&[]);
        let default_id = || format!("{topic}/{partition}/{offset}");
        let stamp = msg.timestamp().to_millis().and_then(|t| u64::try_from(t).ok());
        let now = stamp.unwrap_or_else(now_ms);
        let started = Instant::now();
        let header = |name: &str| {
            msg.headers()
                .and_then(|h| h.iter().find(|h| h.key == name).map(|h| h.value.unwrap_or_default()))
        };
        let reporter = header(&self.reporter_header);
        let outcome = match &self.email_input {
            Some((input, label)) if input == topic => {
                let record = EmailRecord {
                    id: msg
                        .key()
                        .and_then(|k| std::str::from_utf8(k).ok())
                        .filter(|k| !k.is_empty()),
                    label: header(label),
                    reporter,
                };
                self.pipeline.handle_email(payload, record, &default_id, now)
            }
            _ => self.pipeline.handle_reported(payload, reporter, &default_id, now),
        };
        crate::metrics::handled(&outcome, started.elapsed());
        if let Some((publisher, _)) = &mut self.publisher {
            publisher.observe(self.pipeline.model().version(), now_ms);
        }
        match outcome {
            Outcome::Predicted(p) => {
                self.buf.clear();
                p.write_json(&mut self.buf);
                let key = msg.key().map_or_else(|| p.id.clone().into_bytes(), <[u8]>::to_vec);
                let value = std::mem::take(&mut self.buf);
                self.send(&self.output_topic, &key, &value, None);
                if let (Some(topic), Some(_)) = (&self.review_topic, &p.review) {
                    let mut review = Vec::new();
                    p.write_review_json(&mut review);
                    self.send(topic, &key, &review, None);
                }
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
                // A dead letter is never larger than the prefix cap: a
                // message over it goes as its first bytes and its length.
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
                let key = msg.key().unwrap_or(&[]).to_vec();
                self.send(&self.dead_letter_topic, &key, copy, Some(headers));
            }
            _ => {}
        }
        self.advance(topic, partition, (offset + 1) as u64);
        self.messages += 1;
    }

    /// Records `next` as the next offset of `topic`/`partition`.
    fn advance(&mut self, topic: &str, partition: i32, next: u64) {
        self.positions.set_offset(topic, partition, next);
    }

    /// Queues a message; when the producer's queue is full, waits (the
    /// consumer is not polled meanwhile: consumption pauses, nothing drops).
    fn send(&self, topic: &str, key: &[u8], value: &[u8], headers: Option<OwnedHeaders>) {
        send_opt(&self.producer, topic, key, Some(value), headers);
    }

    /// Flush, checkpoint, commit. If the flush times out (the broker is
    /// away) nothing is written or committed and the caller tries later.
    pub(super) fn checkpoint<C: Consumer<Ctx>>(&mut self, consumer: &C, why: &str) -> Result<bool, DaemonError> {
        if let Err(error) = self.producer.flush(self.flush_timeout) {
            crate::metrics::checkpoint_failed();
            tracing::warn!(%error, why, "outputs not yet delivered; checkpoint put off");
            self.cadence.put_off();
            return Ok(false);
        }
        if let Some(dir) = self.dir.as_mut() {
            let saved = dir
                .save_pipeline(&self.pipeline, &self.positions)
                .inspect_err(|_| crate::metrics::checkpoint_failed())?;
            crate::metrics::checkpoint_saved(&saved);
            tracing::debug!(path = %saved.path.display(), bytes = saved.bytes, why, "checkpoint written");
        }
        self.cadence.done(self.pipeline.model().version());
        self.checkpoints += 1;
        let mut tpl = TopicPartitionList::new();
        if let Ok(assigned) = consumer.assignment() {
            for e in assigned.elements() {
                if let Some(pos) = self.positions.offset(e.topic(), e.partition()) {
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

    /// A learner: publishes the model to the model topic when a new
    /// version is due (or, with `force`, whenever it is not the one last
    /// published). The records are queued on the producer, which the next
    /// checkpoint flushes.
    /// The copies that answer HTTP requests take the model too (for a
    /// predictor, the versions it put in service).
    pub(super) fn publish_model(&mut self, force: bool) {
        if let Some(feed) = &mut self.feed {
            feed.publish(&self.pipeline, force);
        }
        let Some((publisher, topic)) = self.publisher.as_mut() else {
            return;
        };
        let version = self.pipeline.model().version();
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
        let topic = topic.clone();
        let (mut records, mut bytes, mut sent) = (0usize, 0usize, 0u64);
        // Each record queued as it is made (a full version is never whole
        // in memory); queueing waits while librdkafka's queue is full.
        let kind = publisher.publish(self.pipeline.model_mut(), now_ms(), &mut |r| {
            records += 1;
            bytes += r.key.len() + r.value.as_ref().map_or(0, Vec::len);
            sent += u64::from(send_opt(
                &self.producer,
                &topic,
                r.key.as_bytes(),
                r.value.as_deref(),
                None,
            ));
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
