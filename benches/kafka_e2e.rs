//! End-to-end benchmark through a real broker (not a test): run by
//! `scripts/bench_kafka.sh`, which starts the test broker and sets
//! KAFKA_BOOTSTRAP.
//!
//! 1. Throughput: N messages (the SMS slice repeated, every other one
//!    without a label) are loaded into a topic; then, in the same run on the
//!    same broker, a no-op consume->produce pipe (same librdkafka client
//!    settings as classifyd) and `classifyd run` each drain it. Rate = input
//!    messages / (last output's timestamp - first output's timestamp).
//! 2. Latency: with classifyd running and caught up, requests are produced
//!    at a fixed rate (the generator's producer lingers 1 ms); latency = the
//!    prediction's timestamp minus the request's, per message; p50 and p99
//!    are printed, and the same for the no-op pipe. BENCH_TRACE=1 also
//!    prints the worst latency in each 200 ms of sending (a steady tail or
//!    a few stalls?).
//!
//! BENCH_BIN runs another classifyd build (to compare two on one broker);
//! BENCH_INPUT another stream's messages (JSON lines), repeated.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

mod common;

use common::{env_or, load, unique};

/// How long a fetch may wait at the broker for data (librdkafka's default,
/// 500 ms, is what the latency would measure otherwise); the same for the
/// no-op pipe and classifyd. BENCH_FETCH_WAIT_MS overrides it.
const FETCH_WAIT_MS: usize = 10;

fn fetch_wait_ms() -> usize {
    env_or("BENCH_FETCH_WAIT_MS", FETCH_WAIT_MS)
}

/// How long the request generator's producer batches before sending. With
/// 0, every request is a produce request of its own, and at 10,000 msg/s the
/// test broker falls seconds behind (latency then measures its queue, for
/// the no-op pipe as much as for classifyd); 1 ms is what a client that
/// batches at all adds.
const PACED_LINGER_MS: u32 = 1;

/// (key, timestamp ms) of every message of `topic`, until `want` or the deadline.
fn read(bootstrap: &str, topic: &str, want: usize, deadline: Duration) -> Vec<(String, i64)> {
    common::read(bootstrap, topic, want, deadline)
        .into_iter()
        .map(|(k, _, ts)| (k, ts))
        .collect()
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Creates the topics, one partition each (the mock cluster has no admin API).
fn create(bootstrap: &str, mock: Option<&MockCluster<'static, DefaultProducerContext>>, names: &[&str]) {
    if let Some(m) = mock {
        for n in names {
            m.create_topic(n, 1, 1).unwrap();
        }
        return;
    }
    let topics: Vec<(&str, i32)> = names.iter().map(|n| (*n, 1)).collect();
    common::create_topics(bootstrap, &topics);
}

/// The no-op pipe: consume, produce the same bytes, with classifyd's client settings.
fn noop_pipe(bootstrap: &str, input: &str, output: &str, n: usize) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("noop"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("fetch.wait.max.ms", fetch_wait_ms().to_string())
        .create()
        .unwrap();
    let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("message.timeout.ms", "0")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    c.subscribe(&[input]).unwrap();
    let mut seen = 0;
    while seen < n {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            let mut rec = Some(
                BaseRecord::to(output)
                    .key(m.key().unwrap_or(&[]))
                    .payload(m.payload().unwrap_or(&[])),
            );
            while let Some(r) = rec.take() {
                if let Err((_, r)) = p.send(r) {
                    std::thread::sleep(Duration::from_millis(1));
                    rec = Some(r);
                }
            }
            seen += 1;
        }
    }
    p.flush(Duration::from_secs(60)).unwrap();
}

/// Produces `total` requests at `rate` per second; returns id -> send time (ms).
fn paced(bootstrap: &str, topic: &str, base: &[serde_json::Value], rate: usize, total: usize) -> HashMap<String, i64> {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", PACED_LINGER_MS.to_string())
        .create()
        .unwrap();
    let mut sent = HashMap::new();
    let start = Instant::now();
    for i in 0..total {
        let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
        // Sleep, not spin: the broker and classifyd share this machine's cores.
        while Instant::now() < due {
            p.poll(Duration::ZERO);
            std::thread::sleep(Duration::from_micros(500));
        }
        let id = format!("lat-{i}");
        let v = serde_json::json!({"id": id, "text": base[i % base.len()]["text"]}).to_string();
        let ts = now_ms();
        let mut rec = Some(BaseRecord::to(topic).key(id.as_str()).payload(v.as_str()).timestamp(ts));
        while let Some(r) = rec.take() {
            if let Err((_, r)) = p.send(r) {
                p.poll(Duration::from_millis(1));
                rec = Some(r);
            }
        }
        sent.insert(id, ts);
    }
    p.flush(Duration::from_secs(60)).unwrap();
    sent
}

/// Output timestamp minus input timestamp, per matched key, sorted.
fn latencies(outs: &[(String, i64)], sent: &HashMap<String, i64>) -> Vec<i64> {
    let mut lat: Vec<i64> = outs.iter().filter_map(|(k, ts)| sent.get(k).map(|s| ts - s)).collect();
    lat.sort_unstable();
    assert!(!lat.is_empty(), "no latency samples");
    lat
}

/// BENCH_TRACE=1: the worst latency in each 200 ms of sending, to tell a
/// steady tail from a few stalls.
fn trace(name: &str, outs: &[(String, i64)], sent: &HashMap<String, i64>) {
    if std::env::var_os("BENCH_TRACE").is_none() {
        return;
    }
    let Some(&first) = sent.values().min() else { return };
    let mut worst: std::collections::BTreeMap<i64, i64> = std::collections::BTreeMap::new();
    for (k, ts) in outs {
        if let Some(s) = sent.get(k) {
            let w = worst.entry((s - first) / 200).or_insert(0);
            *w = (*w).max(ts - s);
        }
    }
    let row: Vec<String> = worst.values().map(|w| w.to_string()).collect();
    eprintln!(
        "kafka_e2e: {name}: worst latency (ms) per 200 ms of sending: {}",
        row.join(" ")
    );
}

fn percentile(sorted: &[i64], q: f64) -> i64 {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// Latencies of the no-op pipe at `rate` for `total` messages, for
/// reference (what the broker and client add).
fn noop_latency(
    bootstrap: &str,
    mock: Option<&MockCluster<'static, DefaultProducerContext>>,
    base: &[serde_json::Value],
    rate: usize,
    total: usize,
) -> Vec<i64> {
    let (noop_in, noop_out2) = (unique("bench-noop-in"), unique("bench-noop-out"));
    create(bootstrap, mock, &[&noop_in, &noop_out2]);
    let (b2, i2, o2) = (bootstrap.to_string(), noop_in.clone(), noop_out2.clone());
    let pipe = std::thread::spawn(move || noop_pipe(&b2, &i2, &o2, total + 1));
    // One message through first, so the pipe has joined its group.
    load(bootstrap, &noop_in, &[("warm-up".to_string(), "{}".to_string())]);
    read(bootstrap, &noop_out2, 1, Duration::from_secs(120));
    eprintln!("kafka_e2e: latency, the no-op pipe");
    let sent = paced(bootstrap, &noop_in, base, rate, total);
    pipe.join().unwrap();
    let noop_outs = read(bootstrap, &noop_out2, total + 1, Duration::from_secs(120));
    trace("no-op pipe", &noop_outs, &sent);
    latencies(&noop_outs, &sent)
}

/// `classifyd run` on `topics` (input, feedback, output, dead letters),
/// killed with this process (a bench stopped by a signal or a failed
/// assertion leaves no daemon behind).
fn spawn_classifyd(bin: &Path, bootstrap: &str, topics: [&str; 4], dir: &Path) -> std::process::Child {
    let [input, fb, out, dlq] = topics;
    let mut daemon = Command::new(bin);
    daemon
        .args([
            "run",
            "--brokers",
            bootstrap,
            "--group-id",
            &unique("bench"),
            "--input-topic",
            input,
        ])
        .args([
            "--feedback-topic",
            fb,
            "--output-topic",
            out,
            "--dead-letter-topic",
            dlq,
        ])
        .arg("--checkpoint-dir")
        .arg(dir)
        .args(["--checkpoint-interval-secs", "30"])
        .args(["-X", &format!("fetch.wait.max.ms={}", fetch_wait_ms())])
        // As in the tests: quick group joins (with librdkafka's 45 s
        // default, the first join here took ~25 s).
        .args(["-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500"])
        .env("CLASSIFYD_LOG", "warn")
        .stdout(Stdio::null());
    // SAFETY: prctl only sets a flag of the child about to exec; it
    // allocates nothing and touches no memory of the parent's.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut daemon, || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    daemon.spawn().unwrap()
}

/// The results table: throughput (no-op pipe, classifyd) and latency at
/// `rate` msg/s for `secs` seconds (`total` messages).
fn report(
    n: usize,
    (noop_rate, classifyd_rate): (f64, f64),
    (rate, secs, total): (usize, usize, usize),
    lat: &[i64],
    noop_lat: &[i64],
) {
    println!("| measure | value |\n|---|---:|");
    println!("| messages | {n} (half labeled) |");
    println!("| no-op consume->produce pipe | {noop_rate:.0} msg/s |");
    println!("| classifyd broker->classifyd->broker | {classifyd_rate:.0} msg/s |");
    println!("| ratio classifyd / no-op | {:.2} |", classifyd_rate / noop_rate);
    println!(
        "| latency at {rate} msg/s for {secs} s: p50 | {} ms |",
        percentile(lat, 0.5)
    );
    println!("| latency p99 | {} ms |", percentile(lat, 0.99));
    println!("| latency samples | {} of {total} |", lat.len());
    println!(
        "| no-op pipe latency at the same rate: p50 | {} ms |",
        percentile(noop_lat, 0.5)
    );
    println!("| no-op pipe latency p99 | {} ms |", percentile(noop_lat, 0.99));
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benches; nothing to list here
    }
    // BENCH_BROKER=mock: librdkafka's mock cluster, in this process, on
    // loopback, instead of a broker of its own.
    let mock = (std::env::var("BENCH_BROKER").as_deref() == Ok("mock")).then(|| MockCluster::new(1).unwrap());
    let bootstrap = match (&mock, std::env::var("KAFKA_BOOTSTRAP")) {
        (Some(m), _) => m.bootstrap_servers(),
        (None, Ok(b)) => b,
        (None, Err(_)) => {
            eprintln!("kafka_e2e: set KAFKA_BOOTSTRAP (scripts/bench_kafka.sh starts a broker) or BENCH_BROKER=mock");
            return;
        }
    };
    let mock = mock.as_ref();
    let n = env_or("BENCH_MESSAGES", 50_000);
    let rate = env_or("BENCH_RATE", 10_000);
    let secs = env_or("BENCH_SECONDS", 5);
    // The mock cluster keeps the last 5 MB (or 100,000 messages) of each
    // partition and deletes older ones; past that, messages would be lost
    // before they are read, and the bench would wait on them.
    if mock.is_some() && (n > 10_000 || rate * secs > 20_000) {
        eprintln!(
            "kafka_e2e: with BENCH_BROKER=mock keep BENCH_MESSAGES <= 10000 and BENCH_RATE x BENCH_SECONDS <= 20000"
        );
        return;
    }
    // BENCH_BIN: another build to compare (A/B) on the same broker.
    let bin = std::env::var_os("BENCH_BIN").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/classifyd"),
        std::path::PathBuf::from,
    );
    // BENCH_INPUT: another stream's messages (JSON lines) instead of SMS's.
    let input = std::env::var_os("BENCH_INPUT").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sms_head1000.jsonl"),
        std::path::PathBuf::from,
    );
    let text = std::fs::read_to_string(&input).unwrap_or_else(|e| panic!("cannot read {}: {e}", input.display()));
    let base: Vec<serde_json::Value> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{} line {}: not JSON: {e}", input.display(), i + 1))
        })
        .collect();
    assert!(!base.is_empty(), "{} has no messages", input.display());
    let msgs: Vec<(String, String)> = (0..n)
        .map(|i| {
            let mut v = base[i % base.len()].clone();
            let id = format!("m-{i}");
            v["id"] = id.clone().into();
            if i % 2 == 1 {
                v.as_object_mut().unwrap().remove("label");
            }
            (id, v.to_string())
        })
        .collect();
    let requests = n / 2;

    // Throughput: the no-op pipe.
    let (input, noop_out) = (unique("bench-in"), unique("bench-noop"));
    create(&bootstrap, mock, &[&input, &noop_out]);
    eprintln!("kafka_e2e: loading {n} messages");
    load(&bootstrap, &input, &msgs);
    eprintln!("kafka_e2e: the no-op pipe drains them");
    noop_pipe(&bootstrap, &input, &noop_out, n);
    let outs = read(&bootstrap, &noop_out, n, Duration::from_secs(120));
    let span =
        |o: &[(String, i64)]| (o.iter().map(|x| x.1).max().unwrap() - o.iter().map(|x| x.1).min().unwrap()).max(1);
    let noop_rate = n as f64 / (span(&outs) as f64 / 1000.0);

    // Throughput: classifyd on the same input.
    let (fb, out, dlq) = (unique("bench-fb"), unique("bench-out"), unique("bench-dlq"));
    create(&bootstrap, mock, &[&fb, &out, &dlq]);
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = spawn_classifyd(&bin, &bootstrap, [&input, &fb, &out, &dlq], dir.path());
    eprintln!("kafka_e2e: classifyd drains them");
    let outs = read(&bootstrap, &out, requests, Duration::from_secs(300));
    assert_eq!(outs.len(), requests, "classifyd delivered every prediction");
    let classifyd_rate = n as f64 / (span(&outs) as f64 / 1000.0);

    // Latency at a fixed rate, with classifyd caught up.
    let total = rate * secs;
    eprintln!("kafka_e2e: latency, classifyd");
    let sent = paced(&bootstrap, &input, &base, rate, total);
    let outs = read(&bootstrap, &out, requests + total, Duration::from_secs(120));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let _ = daemon.wait();
    trace("classifyd", &outs, &sent);
    let lat = latencies(&outs, &sent);

    let noop_lat = noop_latency(&bootstrap, mock, &base, rate, total);
    report(n, (noop_rate, classifyd_rate), (rate, secs, total), &lat, &noop_lat);
}
