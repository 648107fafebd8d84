//! A predictor's mail lessons, forwarded to the learner through Kafka: a
//! lesson taught to a predictor (spamc `-L`, rspamc `learn_spam`,
//! `/forget`) is
//! produced as the labeled message it teaches (or a forget) to the input
//! topic, keyed by the message's id so that one message's lessons keep
//! their order (a forget goes to the feedback topic on a raw-e-mail
//! input, which takes no JSON), with the idempotent producer and
//! `acks=all`, and answered once the broker has it. The learner then
//! learns it exactly once through its offsets, as any other record, and
//! the predictor's next model version carries it.
//!
//! A labeled message goes in the input's own form: a JSON line with the
//! e-mail in `email_base64` and its `label`, or, on a raw-e-mail input
//! (`--input-format email`), the raw bytes with the label in their header;
//! the reporter and the user in their headers (`--reporter-header`,
//! `--user-header`). Its key is the message's id.
//!
//! A producer the client library has given up on (a fatal error, or the
//! broker fencing its producer id: after a long broker stall every send
//! fails with `ProducerFenced` for good) is built anew, so forwarding
//! recovers by itself; lessons refused meanwhile are failures to their
//! clients, and `classifyd_lessons_forwarding` says 0 until a forward
//! succeeds again.

use std::borrow::Cow;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use super::KafkaSettings;
use super::context::producer_config;
use crate::checkpoint::lessons::Recorded;
use crate::daemon::lessons::{Forward, json_of};

/// How long the broker has to take a batch of lessons before they are
/// refused (the client retries).
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// The topics and headers a lesson goes to, and the producer.
pub(super) struct TopicForward {
    producer: FutureProducer,
    /// What the producer is built from, and built again from when it is
    /// broken for good.
    config: ClientConfig,
    runtime: tokio::runtime::Runtime,
    input_topic: String,
    feedback_topic: String,
    /// The input's label header, when it carries raw e-mails.
    email_label: Option<String>,
    reporter_header: String,
    user_header: String,
}

impl TopicForward {
    pub(super) fn new(s: &KafkaSettings) -> Result<Self, String> {
        let mut config = producer_config(s);
        config
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("message.timeout.ms", DELIVERY_TIMEOUT.as_millis().to_string());
        let producer = create(&config)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| format!("the lessons' producer runtime: {e}"))?;
        crate::metrics::lessons_forwarding(true);
        Ok(TopicForward {
            producer,
            config,
            runtime,
            input_topic: s.input_topic.clone(),
            feedback_topic: s.feedback_topic.clone(),
            email_label: s.email_input.clone(),
            reporter_header: s.reporter_header.clone(),
            user_header: s.user_header.clone(),
        })
    }

    /// The topic, value and headers of `r` (a raw e-mail borrowed as it is).
    fn record_of<'a>(&'a self, r: &'a Recorded) -> (&'a str, Cow<'a, [u8]>, OwnedHeaders) {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        pairs.extend(r.reporter.as_deref().map(|v| (self.reporter_header.as_str(), v)));
        pairs.extend(r.user.as_deref().map(|v| (self.user_header.as_str(), v)));
        let json = |topic| (topic, Cow::Owned(json_of(r).to_string().into_bytes()));
        let (topic, value) = match (&r.learn, &self.email_label) {
            // A forget, or a label for a message the record knows by its id,
            // goes where the message's labels go, keyed alike: the learner
            // reads one message's lessons in the order they were taught. A
            // raw-e-mail input takes no JSON: the feedback topic.
            (None, Some(_)) => json(&self.feedback_topic),
            (None, None) => json(&self.input_topic),
            (Some(_), _) if r.email.is_empty() && r.text.is_none() => json(&self.feedback_topic),
            // A text on a raw-e-mail input: its bytes, as a message of no
            // headers, with the label in its header.
            (Some(label), Some(label_header)) => {
                pairs.push((label_header, label));
                let body = r.text.as_deref().map_or(&r.email[..], str::as_bytes);
                (&self.input_topic, Cow::Borrowed(body))
            }
            (Some(_), None) if r.email.is_empty() => json(&self.input_topic),
            (Some(label), None) => {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD.encode(&r.email);
                let line = serde_json::json!({"id": r.id, "email_base64": b64, "label": label});
                (&self.input_topic, Cow::Owned(line.to_string().into_bytes()))
            }
        };
        let headers = pairs.into_iter().fold(OwnedHeaders::new(), |h, (key, v)| {
            h.insert(Header { key, value: Some(v) })
        });
        (topic, value, headers)
    }
}

fn create(config: &ClientConfig) -> Result<FutureProducer, String> {
    config.create().map_err(|e| format!("the lessons' producer: {e}"))
}

/// Whether `e` means the producer can send nothing more: the broker no
/// longer knows or accepts its producer id and epoch (idempotence), or
/// the library marked it fatal.
fn broken_for_good(e: &KafkaError) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        e.rdkafka_error_code(),
        Some(
            C::ProducerFenced
                | C::InvalidProducerEpoch
                | C::InvalidProducerIdMapping
                | C::UnknownProducerId
                | C::OutOfOrderSequenceNumber
                | C::Fatal
        )
    )
}

impl TopicForward {
    /// Builds the producer anew when it is broken for good (`seen`, or a
    /// fatal error it holds): the next lessons go through the new one.
    fn mend(&mut self, seen: Option<&KafkaError>) {
        let fatal = self.producer.client().fatal_error();
        if fatal.is_none() && !seen.is_some_and(broken_for_good) {
            return;
        }
        let why = fatal.map_or_else(|| seen.map(ToString::to_string).unwrap_or_default(), |(_, s)| s);
        match create(&self.config) {
            Ok(p) => {
                tracing::warn!(error = %why, "the lessons' producer was broken for good: built anew");
                crate::metrics::lessons_producer_rebuilt();
                self.producer = p;
            }
            Err(error) => tracing::error!(%error, cause = %why, "the lessons' producer could not be built anew"),
        }
    }

    /// Produces every lesson, then waits until the broker has them all.
    fn send(&self, lessons: &[Recorded]) -> Result<(), KafkaError> {
        let mut deliveries = Vec::with_capacity(lessons.len());
        for r in lessons {
            let (topic, value, headers) = self.record_of(r);
            let record = FutureRecord::to(topic)
                .key(r.id.as_bytes())
                .payload(&*value)
                .headers(headers);
            deliveries.push(self.producer.send_result(record).map_err(|(e, _)| e)?);
        }
        self.runtime.block_on(async {
            for delivery in deliveries {
                match delivery.await {
                    Ok(Ok(_)) => {}
                    Ok(Err((e, _))) => return Err(e),
                    Err(_) => return Err(KafkaError::Canceled),
                }
            }
            Ok(())
        })
    }
}

impl Forward for TopicForward {
    /// Sends the lessons (through a producer built anew first, when the
    /// last one is broken for good); refused when the broker does not take
    /// them all, the producer mended for the next ones.
    fn forward(&mut self, lessons: &[Recorded]) -> Result<(), String> {
        self.mend(None);
        let sent = self.send(lessons);
        crate::metrics::lessons_forwarding(sent.is_ok());
        sent.map_err(|e| {
            self.mend(Some(&e));
            format!("the broker did not take the lesson: {e}")
        })
    }
}
