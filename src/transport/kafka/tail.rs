//! `classifyd tail TOPIC`: a topic's records on stdout, one line each (the
//! value as it is; predictions and dead letters are JSON), from the start
//! of every partition, so a user needs no other Kafka client to see what
//! the daemon published. Reads outside any group and commits nothing.

use super::context::kafka_error;
use crate::daemon::DaemonError;
use std::io::Write;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::shutdown::Shutdown;

/// With `--no-follow`, how long without a record, past the ends, ends it.
const QUIET: Duration = Duration::from_millis(1000);

/// What to print.
#[derive(Clone, Debug)]
pub(crate) struct TailSettings {
    pub brokers: String,
    pub topic: String,
    pub max: Option<u64>,
    /// Stop at the end the topic has when the command starts.
    pub no_follow: bool,
    pub properties: Vec<(String, String)>,
}

/// Prints the records to `out` until the end (`no_follow`), `max`
/// records, or `shutdown`; returns how many it printed.
pub(crate) fn tail(s: &TailSettings, shutdown: &Shutdown, out: &mut impl Write) -> Result<u64, DaemonError> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &s.brokers)
        .set("group.id", "classifyd-tail")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100");
    for (k, v) in &s.properties {
        c.set(k, v);
    }
    let consumer: BaseConsumer = c.create().map_err(kafka_error("consumer"))?;
    let started = Instant::now();
    let metadata = loop {
        match consumer.fetch_metadata(Some(&s.topic), Duration::from_secs(5)) {
            Ok(m)
                if m.topics()
                    .first()
                    .is_some_and(|t| t.error().is_none() && !t.partitions().is_empty()) =>
            {
                break m;
            }
            Ok(_) if started.elapsed() > Duration::from_secs(10) => {
                return Err(DaemonError::Usage(format!(
                    "topic {} does not exist on {} (classifyd run creates its topics on first use)",
                    s.topic, s.brokers
                )));
            }
            Err(source) if started.elapsed() > Duration::from_secs(10) => {
                return Err(DaemonError::Kafka {
                    what: "cannot reach the brokers",
                    source,
                });
            }
            _ if shutdown.is_triggered() => return Ok(0),
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    let partitions: Vec<i32> = metadata.topics()[0].partitions().iter().map(|p| p.id()).collect();
    let mut tpl = TopicPartitionList::new();
    // The end of each partition now, for --no-follow.
    let mut ends = Vec::new();
    for &p in &partitions {
        tpl.add_partition_offset(&s.topic, p, Offset::Beginning)
            .map_err(kafka_error("partition list"))?;
        let (low, high) = consumer
            .fetch_watermarks(&s.topic, p, Duration::from_secs(10))
            .map_err(kafka_error("watermarks"))?;
        tracing::debug!(partition = p, low, high, "watermarks");
        ends.push((p, low, high));
    }
    consumer.assign(&tpl).map_err(kafka_error("assign"))?;
    let mut next: std::collections::HashMap<i32, i64> = ends.iter().map(|&(p, low, _)| (p, low)).collect();
    let done = |next: &std::collections::HashMap<i32, i64>| ends.iter().all(|&(p, _, high)| next[&p] >= high);
    let mut printed = 0;
    let mut last_record = Instant::now();
    while !shutdown.is_triggered() && s.max.is_none_or(|m| printed < m) {
        // Past the ends, and quiet for a moment: some brokers (the test
        // broker) report ends short of the last record.
        if s.no_follow && done(&next) && last_record.elapsed() >= QUIET {
            break;
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                last_record = Instant::now();
                next.insert(m.partition(), m.offset() + 1);
                out.write_all(m.payload().unwrap_or(&[]))
                    .and_then(|()| out.write_all(b"\n"))
                    .map_err(stdout_error)?;
                printed += 1;
            }
            Some(Err(e)) => tracing::warn!(error = %e, "read error; retrying"),
            None => out.flush().map_err(stdout_error)?,
        }
    }
    out.flush().map_err(stdout_error)?;
    Ok(printed)
}

/// A failed write of the records, naming where they went.
fn stdout_error(e: std::io::Error) -> DaemonError {
    DaemonError::Io(std::io::Error::new(e.kind(), format!("cannot write to stdout: {e}")))
}
