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
pub struct DemoSettings {
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
    /// Start over at the end of the file, with fresh ids, until stopped.
    pub repeat: bool,
    pub properties: Vec<(String, String)>,
}

/// Runs until the file ends (or, repeating, until `stop` is set). Returns
/// (messages, feedback labels) sent.
pub fn run(s: &DemoSettings, stop: &crate::shutdown::Shutdown) -> Result<(u64, u64), String> {
    let text = std::fs::read_to_string(&s.input).map_err(|e| format!("cannot read {}: {e}", s.input.display()))?;
    let rows: Vec<serde_json::Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    if rows.is_empty() {
        return Err(format!("{} has no JSON lines", s.input.display()));
    }
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", &s.brokers).set("linger.ms", "5");
    for (k, v) in &s.properties {
        cfg.set(k, v);
    }
    let producer: BaseProducer = cfg.create().map_err(|e| format!("kafka: {e}"))?;
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
            let mut row = row.clone();
            let id = match row.get("id").and_then(|v| v.as_str()) {
                Some(id) if round == 0 => id.to_string(),
                Some(id) => format!("{id}-r{round}"),
                None => format!("demo-{round}-{i}"),
            };
            row["id"] = id.clone().into();
            if s.holdback_every > 0
                && i % s.holdback_every == s.holdback_every - 1
                && let Some(label) = row.as_object_mut().and_then(|o| o.remove("label"))
            {
                let fb = serde_json::json!({"id": id, "label": label}).to_string();
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
    producer
        .flush(Duration::from_secs(30))
        .map_err(|e| format!("kafka: {e}"))?;
    Ok((sent, labels))
}
