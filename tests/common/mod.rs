//! Helpers for the tests that run classifyd against a real Kafka-protocol
//! broker. The broker's address comes from KAFKA_BOOTSTRAP (scripts/test.sh
//! starts one on loopback); each test uses its own random topics and group.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use classifyd::checkpoint::{self, pb};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

pub mod deployment;
pub mod http;
pub mod mail;

pub const BIN: &str = env!("CARGO_BIN_EXE_classifyd");

/// The broker address, or a panic that says how to get one.
pub fn bootstrap() -> String {
    std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| {
        panic!("KAFKA_BOOTSTRAP is not set: run ./scripts/test.sh, which starts a broker on 127.0.0.1")
    })
}

pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// (id, label, raw bytes) of the first `n` raw SpamAssassin messages, in
/// the stream's order (`../shared/data/spamassassin/raw/index.tsv`).
pub fn raw_emails(n: usize) -> Vec<(String, String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/spamassassin/raw");
    let index = fs::read_to_string(root.join("index.tsv")).expect("../shared/data/spamassassin/raw");
    index
        .lines()
        .filter(|l| !l.starts_with('#'))
        .take(n)
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[1].to_string(), f[2].to_string(), fs::read(root.join(f[3])).unwrap())
        })
        .collect()
}

/// Peak RSS, in MiB, of the children this process has waited for (a test
/// binary of its own measures one daemon: tests in one binary run at once).
pub fn children_peak_rss_mib() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) }, 0);
    usage.ru_maxrss as f64 / 1024.0
}

/// Runs `classifyd run` on JSON-lines `input` with `flags`, predictions
/// to /dev/null, bad lines to `dead`, checkpoints in `dir`; asserts that it
/// succeeds and returns the peak RSS of the children waited for, in MiB.
pub fn run_jsonl_peak_rss(flags: &[&str], input: &Path, dead: &Path, dir: &Path) -> f64 {
    let out = Command::new(BIN)
        .args(["run", "--output", "/dev/null"])
        .args(flags)
        .arg("--input")
        .arg(input)
        .arg("--dead-letter")
        .arg(dead)
        .arg("--checkpoint-dir")
        .arg(dir)
        .env("CLASSIFYD_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    children_peak_rss_mib()
}

/// The lines of the 1,000-message SMS slice.
pub fn sms_lines() -> Vec<String> {
    fs::read_to_string(data("sms_head1000.jsonl"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// The SMS slice's texts and labels from line `from`, `n` of them.
pub fn sms_examples(from: usize, n: usize) -> Vec<(String, String)> {
    sms_lines()
        .iter()
        .skip(from)
        .take(n)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["text"].as_str().unwrap().to_string(),
                v["label"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Writes `lines` to `path` as JSON lines (each ended by a newline).
pub fn write_lines(path: &Path, lines: &[String]) {
    fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// The SMS slice with every 10th label removed (a prediction request).
pub fn with_requests(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if i % 10 == 9 {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                v.as_object_mut().unwrap().remove("label");
                v.to_string()
            } else {
                l.clone()
            }
        })
        .collect()
}

/// A name no other test (or earlier run) uses.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// The four topics of one daemon, created with `partitions` partitions each.
pub struct Topics {
    pub input: String,
    pub feedback: String,
    pub output: String,
    pub dead: String,
}

impl Topics {
    pub fn create(partitions: i32) -> Topics {
        let t = Topics {
            input: unique("in"),
            feedback: unique("fb"),
            output: unique("out"),
            dead: unique("dlq"),
        };
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", bootstrap())
            .create()
            .expect("admin client");
        let names = [&t.input, &t.feedback, &t.output, &t.dead];
        let new: Vec<NewTopic> = names
            .iter()
            .map(|n| NewTopic::new(n, partitions, TopicReplication::Fixed(1)))
            .collect();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let results = rt
            .block_on(admin.create_topics(&new, &AdminOptions::new()))
            .expect("create topics");
        for r in results {
            r.expect("topic created");
        }
        t
    }

    /// Flags naming these topics.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--input-topic".into(),
            self.input.clone(),
            "--feedback-topic".into(),
            self.feedback.clone(),
            "--output-topic".into(),
            self.output.clone(),
            "--dead-letter-topic".into(),
            self.dead.clone(),
        ]
    }
}

pub fn producer() -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("linger.ms", "2")
        .create()
        .expect("producer")
}

/// Produces `(key, value, timestamp_ms)` to `partition` of `topic`, in order, and waits for delivery.
pub fn produce(topic: &str, partition: Option<i32>, msgs: &[(String, Vec<u8>, Option<i64>)]) {
    send_all(msgs.iter().map(|(key, value, ts)| {
        let mut rec = BaseRecord::to(topic).key(key.as_bytes()).payload(value.as_slice());
        if let Some(part) = partition {
            rec = rec.partition(part);
        }
        if let Some(ts) = ts {
            rec = rec.timestamp(*ts);
        }
        rec
    }));
}

/// Sends every record in order (waiting while the queue is full) and
/// waits for their delivery.
fn send_all<'a>(records: impl Iterator<Item = BaseRecord<'a, [u8], [u8]>>) {
    let p = producer();
    for rec in records {
        let mut rec = Some(rec);
        while let Some(r) = rec.take() {
            if let Err((_, r)) = p.send(r) {
                p.poll(Duration::from_millis(10));
                rec = Some(r);
            }
        }
        p.poll(Duration::ZERO);
    }
    p.flush(Duration::from_secs(30)).expect("flush");
}

/// A message to produce: key, value, and one optional record header (name, value).
pub type Headed = (String, Vec<u8>, Option<(String, Vec<u8>)>);

/// Produces `(key, value, header)` to partition 0 of `topic`, each with
/// its one record header `(name, value)` if any, and waits for delivery.
pub fn produce_with_headers(topic: &str, msgs: &[Headed]) {
    use rdkafka::message::{Header, OwnedHeaders};
    send_all(msgs.iter().map(|(key, value, header)| {
        let mut rec = BaseRecord::to(topic)
            .key(key.as_bytes())
            .payload(value.as_slice())
            .partition(0);
        if let Some((name, v)) = header {
            rec = rec.headers(OwnedHeaders::new().insert(Header {
                key: name,
                value: Some(v.as_slice()),
            }));
        }
        rec
    }));
}

/// The lines of a JSON-lines file as (id, bytes) messages.
pub fn lines_as_messages(lines: &[String]) -> Vec<(String, Vec<u8>, Option<i64>)> {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let id = serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v["id"].as_str().map(String::from))
                .unwrap_or_else(|| format!("line-{i}"));
            (id, l.clone().into_bytes(), None)
        })
        .collect()
}

/// A consumed message: key, value, and headers as (name, value) pairs.
pub type Consumed = (Vec<u8>, Vec<u8>, Vec<(String, String)>);

/// Reads every message of `topic` until `want` have arrived or the deadline passes.
pub fn consume_all(topic: &str, want: usize, deadline: Duration) -> Vec<Consumed> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", unique("reader"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .create()
        .expect("consumer");
    c.subscribe(&[topic]).unwrap();
    let start = Instant::now();
    let mut out = Vec::new();
    while out.len() < want && start.elapsed() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(200)) {
            let headers = m
                .headers()
                .map(|h| {
                    h.iter()
                        .map(|x| {
                            (
                                x.key.to_string(),
                                String::from_utf8_lossy(x.value.unwrap_or(&[])).into_owned(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.push((
                m.key().unwrap_or(&[]).to_vec(),
                m.payload().unwrap_or(&[]).to_vec(),
                headers,
            ));
        }
    }
    out
}

/// `c`, whose child is killed when the thread that started it ends: a
/// test that fails (its thread unwinds) leaves no daemon behind, holding
/// the broker's partitions and CI's output.
pub fn dies_with_test(c: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec the child only sets its own death
    // signal; prctl(2) is async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        })
    }
}

/// Starts `classifyd run` against the broker (killed if the test's thread
/// ends first: [`dies_with_test`]).
pub fn spawn_daemon(topics: &Topics, group: &str, dir: &Path, extra: &[&str]) -> Child {
    dies_with_test(&mut Command::new(BIN))
        .arg("run")
        .args(["--brokers", &bootstrap(), "--group-id", group, "--checkpoint-dir"])
        .arg(dir)
        .args(topics.flags())
        .args(["-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500"])
        .args(["--bits", "16", "--checkpoint-interval-secs", "1"])
        .args(extra)
        .env(
            "CLASSIFYD_LOG",
            std::env::var("CLASSIFYD_TEST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn classifyd")
}

/// SIGTERM, then wait for a clean exit.
pub fn terminate(mut child: Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "classifyd exited with {status}");
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "classifyd did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn newest_checkpoint(dir: &Path) -> Option<pb::Checkpoint> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ckpt"))
        .collect();
    files.sort();
    checkpoint::read_file(files.last()?).ok()
}

/// Sum of the checkpointed next offsets of `topic`'s partitions.
pub fn consumed(c: &pb::Checkpoint, topic: &str) -> u64 {
    c.positions
        .iter()
        .filter(|(k, _)| k.rsplit_once('/').is_some_and(|(t, _)| t == topic))
        .map(|(_, v)| v)
        .sum()
}

/// Sets the soft file size limit of process `pid` (`None`: unlimited):
/// a write past it fails with EFBIG (the daemon ignores SIGXFSZ), as a
/// full disk fails a write part-way.
pub fn limit_file_size(pid: u32, bytes: Option<u64>) {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit reads `new` and writes `old`, both valid for the call.
    let got = unsafe { libc::prlimit(pid as libc::pid_t, libc::RLIMIT_FSIZE, std::ptr::null(), &mut old) };
    assert_eq!(got, 0, "{}", std::io::Error::last_os_error());
    let new = libc::rlimit {
        rlim_cur: bytes.unwrap_or(old.rlim_max),
        rlim_max: old.rlim_max,
    };
    // SAFETY: as above.
    let set = unsafe { libc::prlimit(pid as libc::pid_t, libc::RLIMIT_FSIZE, &new, std::ptr::null_mut()) };
    assert_eq!(set, 0, "{}", std::io::Error::last_os_error());
}

/// Polls until `f` holds or the deadline passes.
pub fn wait_for(what: &str, deadline: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A plain HTTP GET on loopback: (status code, body).
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let code = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|x| x.1.to_string()).unwrap_or_default();
    Some((code, body))
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The checkpoint an uninterrupted JSON-lines run over `lines` ends with:
/// the reference a Kafka run over the same sequence must reach.
pub fn reference_checkpoint(lines: &[String], tmp: &Path) -> pb::Checkpoint {
    let file = tmp.join("seq.jsonl");
    write_lines(&file, lines);
    let reference = tmp.join("reference");
    let st = Command::new(BIN)
        .args(["run", "--bits", "16", "--output", "/dev/null", "--input"])
        .arg(&file)
        .arg("--checkpoint-dir")
        .arg(&reference)
        .env("CLASSIFYD_LOG", "warn")
        .status()
        .unwrap();
    assert!(st.success());
    newest_checkpoint(&reference).unwrap()
}

/// Starts `classifyd run` on stdin (predictions to /dev/null) serving
/// metrics on `metrics_addr`, with `extra` flags, and writes `input` to it.
/// Its stdin stays open: drop it to let the daemon finish.
pub fn spawn_metrics_daemon(metrics_addr: &str, checkpoint_dir: &Path, extra: &[&str], input: &[u8]) -> Child {
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--input",
            "-",
            "--output",
            "/dev/null",
            "--metrics-addr",
            metrics_addr,
        ])
        .arg("--checkpoint-dir")
        .arg(checkpoint_dir)
        .args(extra)
        .env("CLASSIFYD_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start classifyd");
    let stdin = child.stdin.as_mut().expect("piped stdin");
    stdin.write_all(input).expect("write the input");
    stdin.flush().expect("flush the input");
    child
}
