//! `classifyd demo-produce`: streams a labeled JSON-lines file into Kafka
//! the way users produce it: most messages labeled, some without their label
//! (prediction requests) whose gold label follows later on the feedback
//! topic, as a user's "spam / not spam" click would. For demos and the
//! deploy/ loop, not for production.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

/// Settings of the demo producer.
#[derive(Clone, Debug)]
pub(crate) struct DemoSettings {
    pub brokers: String,
    pub input: std::path::PathBuf,
    pub input_topic: String,
    pub feedback_topic: String,
    /// Messages per second (0: as fast as possible).
    pub rate: f64,
    /// One message in this many is sent without its label.
    pub holdback_every: usize,
    /// The held-back label is sent this many messages later.
    pub feedback_delay: usize,
    /// Start over at the end of the file, with fresh ids and without
    /// labels (prediction requests only), until stopped.
    pub repeat: bool,
    pub properties: Vec<(String, String)>,
}

/// Why the demo producer stopped.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot read {}", path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} has no JSON lines", .0.display())]
    Empty(std::path::PathBuf),
    #[error("kafka")]
    Kafka(#[source] rdkafka::error::KafkaError),
}

/// Runs until the file ends (or, repeating, until `stop` is set). Returns
/// (messages, feedback labels) sent.
pub(crate) fn run(s: &DemoSettings, stop: &crate::shutdown::Shutdown) -> Result<(u64, u64), DemoError> {
    let text = std::fs::read_to_string(&s.input).map_err(|source| DemoError::Read {
        path: s.input.clone(),
        source,
    })?;
    let rows: Vec<serde_json::Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    if rows.is_empty() {
        return Err(DemoError::Empty(s.input.clone()));
    }
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", &s.brokers).set("linger.ms", "5");
    for (k, v) in &s.properties {
        cfg.set(k, v);
    }
    let producer: BaseProducer = cfg.create().map_err(DemoError::Kafka)?;
    let send = |topic: &str, key: &str, value: &str| {
        let mut rec = Some(BaseRecord::to(topic).key(key).payload(value));
        while let Some(r) = rec.take() {
            if let Err((_, r)) = producer.send(r) {
                producer.poll(Duration::from_millis(10));
                rec = Some(r);
            }
        }
        producer.poll(Duration::ZERO);
    };
    let start = Instant::now();
    let (mut sent, mut labels) = (0u64, 0u64);
    let mut pending: VecDeque<(u64, String, String)> = VecDeque::new();
    let mut round = 0u64;
    'outer: loop {
        for (i, row) in rows.iter().enumerate() {
            if stop.is_triggered() {
                break 'outer;
            }
            if s.rate > 0.0 {
                let due = start + Duration::from_secs_f64(sent as f64 / s.rate);
                while Instant::now() < due {
                    producer.poll(Duration::from_millis(1));
                }
            }
            let (id, row, feedback) = shape(row, i, round, s.holdback_every);
            if let Some(fb) = feedback {
                pending.push_back((sent + s.feedback_delay as u64, id.clone(), fb));
            }
            send(&s.input_topic, &id, &row.to_string());
            sent += 1;
            while pending.front().is_some_and(|p| p.0 <= sent) {
                if let Some((_, key, fb)) = pending.pop_front() {
                    send(&s.feedback_topic, &key, &fb);
                    labels += 1;
                }
            }
        }
        round += 1;
        if !s.repeat {
            break;
        }
    }
    for (_, key, fb) in pending.drain(..) {
        send(&s.feedback_topic, &key, &fb);
        labels += 1;
    }
    producer.flush(Duration::from_secs(30)).map_err(DemoError::Kafka)?;
    Ok((sent, labels))
}

/// The `i`-th row of round `round` as sent: its id (fresh past the first
/// round), the message, and the feedback record of a held-back label. The
/// first round is the file as users label it (one label in
/// `holdback_every` held back for feedback); later rounds carry no labels
/// at all: the model has learned these texts, and learning or scoring
/// them again would drive the live accuracy to 1.0 and say nothing (it
/// stays at the first round's, and predictions keep flowing).
fn shape(
    row: &serde_json::Value,
    i: usize,
    round: u64,
    holdback_every: usize,
) -> (String, serde_json::Value, Option<String>) {
    let mut row = row.clone();
    let id = match row.get("id").and_then(|v| v.as_str()) {
        Some(id) if round == 0 => id.to_string(),
        Some(id) => format!("{id}-r{round}"),
        None => format!("demo-{round}-{i}"),
    };
    row["id"] = id.clone().into();
    let mut feedback = None;
    if let Some(o) = row.as_object_mut() {
        if round > 0 {
            o.remove("label");
            o.remove("labels");
        } else if holdback_every > 0
            && i % holdback_every == holdback_every - 1
            && let Some(label) = o.remove("label")
        {
            feedback = Some(serde_json::json!({"id": id, "label": label}).to_string());
        }
    }
    (id, row, feedback)
}

#[cfg(test)]
mod tests {
    use super::shape;

    #[test]
    fn later_rounds_send_no_labels() {
        let row = serde_json::json!({"id": "m1", "text": "free prize", "label": "spam"});
        let (id, sent, fb) = shape(&row, 4, 0, 5);
        assert_eq!(id, "m1");
        assert!(sent.get("label").is_none(), "the fifth label is held back");
        assert_eq!(fb.as_deref(), Some(r#"{"id":"m1","label":"spam"}"#));
        let (_, sent, fb) = shape(&row, 0, 0, 5);
        assert_eq!(sent["label"], "spam");
        assert!(fb.is_none());
        for i in [0, 4] {
            let (id, sent, fb) = shape(&row, i, 2, 5);
            assert_eq!(id, "m1-r2");
            assert!(
                sent.get("label").is_none() && fb.is_none(),
                "round 2 is prediction requests only"
            );
            assert_eq!(sent["text"], "free prize");
        }
    }
}
