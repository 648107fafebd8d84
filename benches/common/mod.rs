//! What the end-to-end benches share: names, creating topics, loading a
//! topic, reading one.
#![allow(dead_code)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, Timestamp};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

/// An environment variable's value, or `default`.
pub fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A name no other run uses.
pub fn unique(p: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{p}-{}-{nanos}", std::process::id())
}

/// Produces `(key, value)` messages to `topic` and waits for delivery.
pub fn load(bootstrap: &str, topic: &str, msgs: &[(String, String)]) {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    for (k, v) in msgs {
        let mut rec = Some(BaseRecord::to(topic).key(k.as_str()).payload(v.as_str()));
        while let Some(r) = rec.take() {
            if let Err((_, r)) = p.send(r) {
                p.poll(Duration::from_millis(5));
                rec = Some(r);
            }
        }
        p.poll(Duration::ZERO);
    }
    p.flush(Duration::from_secs(60)).unwrap();
}

/// (key, value, timestamp ms) of every message of `topic`, until `want`
/// or the deadline.
pub fn read(bootstrap: &str, topic: &str, want: usize, deadline: Duration) -> Vec<(String, String, i64)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("bench-reader"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    c.subscribe(&[topic]).unwrap();
    let start = Instant::now();
    let mut out = Vec::with_capacity(want);
    while out.len() < want && start.elapsed() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            let ts = match m.timestamp() {
                Timestamp::CreateTime(t) | Timestamp::LogAppendTime(t) => t,
                Timestamp::NotAvailable => 0,
            };
            let key = String::from_utf8_lossy(m.key().unwrap_or(&[])).into_owned();
            out.push((
                key,
                String::from_utf8_lossy(m.payload().unwrap_or(&[])).into_owned(),
                ts,
            ));
        }
    }
    out
}

/// Creates `topics` (name, partitions) on the broker, one replica each.
pub fn create_topics(bootstrap: &str, topics: &[(&str, i32)]) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|(n, p)| NewTopic::new(n, *p, TopicReplication::Fixed(1)))
        .collect();
    for r in rt.block_on(admin.create_topics(&new, &AdminOptions::new())).unwrap() {
        r.unwrap();
    }
}
