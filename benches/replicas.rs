//! One model, many instances, measured through a real broker (not a test):
//! run by `scripts/bench_replicas.sh`, which starts the test broker and
//! sets KAFKA_BOOTSTRAP. Every figure comes from one run on one broker.
//!
//! 1. Published accuracy: the SMS stream sent by `classifyd demo-produce`
//!    (one label in five held back and sent later as feedback) to a
//!    4-partition input, served by (a) one standalone daemon, (b) two
//!    standalone daemons in one group (today's way to scale out), (c) one
//!    learner and two predictors. Accuracy = published predictions that
//!    match the gold label, over all predictions. For (c) also: staleness
//!    p50/p99 (from the predictors' `classifyd_model_staleness_seconds`:
//!    learner learns an update -> a predictor serves a version with it),
//!    bytes published per learned example and per full version.
//! 2. Prediction throughput: BENCH_MESSAGES unlabeled messages preloaded on
//!    a 4-partition topic, drained by a standalone daemon resumed from the
//!    learner's final checkpoint (its predict path, same model), by one
//!    predictor and by two; rate = messages / (last prediction's timestamp
//!    - first's). Peak RSS of each (VmHWM), against the model's bytes.
//!
//! BENCH_DATA (the SMS stream), BENCH_RATE (500 msg/s), BENCH_MESSAGES (50000).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{create_topics, env_or, load, read, unique};

const BIN: &str = env!("CARGO_BIN_EXE_classifyd");

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", l.local_addr().unwrap().port())
}

struct Topics {
    input: String,
    feedback: String,
    output: String,
    dead: String,
    model: String,
}

impl Topics {
    fn create(bootstrap: &str) -> Topics {
        let t = Topics {
            input: unique("in"),
            feedback: unique("fb"),
            output: unique("out"),
            dead: unique("dlq"),
            model: unique("model"),
        };
        let topics = [(t.input.as_str(), 4), (&t.feedback, 4), (&t.output, 4), (&t.dead, 1)];
        create_topics(bootstrap, &topics);
        t
    }

    fn flags(&self) -> Vec<String> {
        [
            ("--input-topic", &self.input),
            ("--feedback-topic", &self.feedback),
            ("--output-topic", &self.output),
            ("--dead-letter-topic", &self.dead),
            ("--model-topic", &self.model),
        ]
        .iter()
        .flat_map(|(f, v)| [f.to_string(), v.to_string()])
        .collect()
    }
}

/// A daemon of `role` with its metrics address.
struct Daemon {
    child: Child,
    addr: String,
}

/// The daemons' log filter: `BENCH_LOG`, else warnings only.
fn bench_log() -> String {
    std::env::var("BENCH_LOG").unwrap_or_else(|_| "warn".into())
}

fn spawn(bootstrap: &str, t: &Topics, group: &str, role: &str, dir: Option<&Path>) -> Daemon {
    let addr = free_addr();
    let mut c = Command::new(BIN);
    c.args([
        "run",
        "--brokers",
        bootstrap,
        "--group-id",
        group,
        "--role",
        role,
        "--metrics-addr",
        &addr,
    ])
    .args(t.flags())
    .args(["-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500"])
    .env("CLASSIFYD_LOG", bench_log())
    .stdout(Stdio::null());
    if let Some(d) = dir {
        c.arg("--checkpoint-dir").arg(d);
    }
    Daemon {
        child: c.spawn().unwrap(),
        addr,
    }
}

fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let code = buf.split_whitespace().nth(1)?.parse().ok()?;
    Some((
        code,
        buf.split_once("\r\n\r\n").map(|x| x.1.to_string()).unwrap_or_default(),
    ))
}

impl Daemon {
    /// Until it holds partitions (`/readyz`): a standalone daemon or a
    /// learner soon after it starts, a predictor only once the learner has
    /// published a model (so only after labeled messages have been sent:
    /// see `warm_up`).
    fn wait_ready(&self) {
        self.wait_for("/readyz", "not ready");
    }

    fn wait_for(&self, path: &str, what: &str) {
        let start = Instant::now();
        while http_get(&self.addr, path).is_none_or(|r| r.0 != 200) {
            assert!(start.elapsed() < Duration::from_secs(120), "{what} after 120 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn metrics(&self) -> String {
        http_get(&self.addr, "/metrics").map(|r| r.1).unwrap_or_default()
    }

    /// Peak resident memory (VmHWM), in MiB.
    fn peak_rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }

    /// CPU seconds used so far (user and system, from /proc: the
    /// exported `process_cpu_seconds_total` counts whole seconds).
    fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // The fields after the command name's closing parenthesis; utime
        // and stime are the 14th and 15th of the line.
        let rest = stat.rsplit_once(')').map_or("", |r| r.1);
        let ticks: f64 = rest
            .split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|t| t.parse::<f64>().ok())
            .sum();
        // SAFETY: sysconf(3) reads a constant.
        ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
    }

    /// Stops it as an operator would (SIGTERM: it checkpoints and exits).
    fn stop(mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// A daemon still running when its handle goes (the bench failed half-way)
/// is killed: a failed bench leaves no process behind.
impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The value of a series: `name{labels}` or `name` alone, summed over its lines.
fn series(body: &str, name: &str) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{', '_']).then_some(()).is_some())
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|s| s == name || s.starts_with(&format!("{name}{{")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Quantile `q` of a histogram summed over `bodies` (linear within a bucket).
fn quantile(bodies: &[String], name: &str, q: f64) -> f64 {
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for body in bodies {
        for l in body.lines().filter(|l| l.starts_with(&format!("{name}_bucket{{le=\""))) {
            let le = l.split('"').nth(1).unwrap();
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            let n: f64 = l.rsplit(' ').next().unwrap().parse().unwrap();
            match buckets.iter_mut().find(|b| b.0 == le) {
                Some(b) => b.1 += n,
                None => buckets.push((le, n)),
            }
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last().map_or(0.0, |b| b.1);
    let rank = q * total;
    let mut prev = (0.0, 0.0);
    for &(le, n) in &buckets {
        if n >= rank {
            if le.is_infinite() {
                return prev.0;
            }
            let within = if n > prev.1 {
                (rank - prev.1) / (n - prev.1)
            } else {
                1.0
            };
            return prev.0 + (le - prev.0) * within;
        }
        prev = (le, n);
    }
    f64::NAN
}

/// The gold label of every id of the stream.
fn gold(data: &Path) -> HashMap<String, String> {
    std::fs::read_to_string(data)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| Some((v["id"].as_str()?.to_string(), v["label"].as_str()?.to_string())))
        .collect()
}

/// Sends the stream with `demo-produce` and waits for its predictions:
/// (accuracy of the published predictions, predictions, distinct ids).
fn stream_through(
    bootstrap: &str,
    t: &Topics,
    data: &Path,
    rate: f64,
    gold: &HashMap<String, String>,
) -> (f64, usize, usize) {
    let st = Command::new(BIN)
        .args([
            "demo-produce",
            "--brokers",
            bootstrap,
            "--input-topic",
            &t.input,
            "--feedback-topic",
            &t.feedback,
        ])
        .arg("--input")
        .arg(data)
        .args(["--rate", &rate.to_string()])
        .env("CLASSIFYD_LOG", bench_log())
        .status()
        .unwrap();
    assert!(st.success());
    let want = gold.len() / 5;
    let preds = read(bootstrap, &t.output, want, Duration::from_secs(120));
    let mut ids = std::collections::HashSet::new();
    let correct = preds
        .iter()
        .filter(|(k, v, _)| {
            ids.insert(k.clone());
            let p: serde_json::Value = serde_json::from_str(v).unwrap();
            gold.get(k).is_some_and(|g| p["label"].as_str() == Some(g))
        })
        .count();
    (correct as f64 / preds.len().max(1) as f64, preds.len(), ids.len())
}

/// Starts `daemons` (in one group), waits until each holds partitions,
/// loads `msgs` as fast as the producer goes, and measures how fast the
/// predictions come out: messages per second, and each daemon's peak RSS.
fn drain(
    bootstrap: &str,
    t: &Topics,
    msgs: &[(String, String)],
    started: impl FnOnce() -> Vec<Daemon>,
) -> (f64, Vec<f64>) {
    let n = msgs.len();
    let daemons = started();
    daemons.iter().for_each(Daemon::wait_ready);
    load(bootstrap, &t.input, msgs);
    let preds = read(bootstrap, &t.output, n, Duration::from_secs(300));
    let (first, last) = preds
        .iter()
        .fold((i64::MAX, i64::MIN), |(a, b), p| (a.min(p.2), b.max(p.2)));
    let rate = preds.len() as f64 / ((last - first).max(1) as f64 / 1000.0);
    let rss = daemons.iter().map(Daemon::peak_rss_mib).collect();
    for d in daemons {
        d.stop();
    }
    (rate, rss)
}

/// The first labeled lines of the stream under ids of their own: sent to
/// every deployment before the stream, so that a learner has published a
/// model and its predictors hold partitions when the stream starts (a
/// predictor serves, and joins the group, only once it has a model).
fn warm_up(data: &Path, n: usize) -> Vec<(String, String)> {
    std::fs::read_to_string(data)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("label").is_some())
        .take(n)
        .enumerate()
        .map(|(i, mut v)| {
            let id = format!("warmup-{i}");
            v["id"] = serde_json::Value::String(id.clone());
            (id, v.to_string())
        })
        .collect()
}

/// What every part of the bench reads.
struct Bench {
    bootstrap: String,
    data: PathBuf,
    rate: f64,
    gold: HashMap<String, String>,
    warm_up: Vec<(String, String)>,
    tmp: PathBuf,
}

fn main() {
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").expect("KAFKA_BOOTSTRAP (scripts/bench_replicas.sh sets it)");
    let data: PathBuf = env_or(
        "BENCH_DATA",
        PathBuf::from("../shared/data/sms_spam_collection/stream.jsonl"),
    );
    let n: usize = env_or("BENCH_MESSAGES", 50_000);
    let b = Bench {
        rate: env_or("BENCH_RATE", 500.0),
        gold: gold(&data),
        warm_up: warm_up(&data, 50),
        tmp: std::env::temp_dir().join(unique("bench-replicas")),
        bootstrap,
        data,
    };
    println!(
        "stream {} ({} messages) at {} msg/s, 4 partitions, after a warm-up of its first {} labeled messages\n",
        b.data.display(),
        b.gold.len(),
        b.rate,
        b.warm_up.len()
    );
    println!("| deployment | published accuracy | predictions | distinct ids |");
    println!("|---|---:|---:|---:|");
    standalone_rows(&b);
    let (learner_dir, model_topic) = learner_and_predictors(&b);
    predict_path(&b, n, &learner_dir, &model_topic);
    let _ = std::fs::remove_dir_all(&b.tmp);
}

/// The published accuracy of one standalone daemon and of two in one group.
fn standalone_rows(b: &Bench) {
    for (name, standalone) in [("one standalone daemon", 1), ("two standalone daemons, one group", 2)] {
        let t = Topics::create(&b.bootstrap);
        let group = unique("g");
        let daemons: Vec<Daemon> = (0..standalone)
            .map(|i| {
                let dir = b.tmp.join(format!("{group}-{i}"));
                spawn(&b.bootstrap, &t, &group, "standalone", Some(&dir))
            })
            .collect();
        daemons.iter().for_each(Daemon::wait_ready);
        load(&b.bootstrap, &t.input, &b.warm_up);
        let (acc, preds, ids) = stream_through(&b.bootstrap, &t, &b.data, b.rate, &b.gold);
        println!("| {name} | {acc:.4} | {preds} | {ids} |");
        daemons.into_iter().for_each(Daemon::stop);
    }
}

/// One learner and two predictors: published accuracy, staleness, bytes
/// published, the size of a full version. Returns the learner's
/// checkpoint directory and the model topic.
fn learner_and_predictors(b: &Bench) -> (PathBuf, String) {
    let t = Topics::create(&b.bootstrap);
    let group = unique("g");
    let learner_dir = b.tmp.join("learner");
    let learner = spawn(&b.bootstrap, &t, &group, "learner", Some(&learner_dir));
    learner.wait_ready();
    let predictors: Vec<Daemon> = (0..2)
        .map(|_| spawn(&b.bootstrap, &t, &group, "predictor", None))
        .collect();
    load(&b.bootstrap, &t.input, &b.warm_up);
    predictors.iter().for_each(Daemon::wait_ready);
    let (acc, preds, ids) = stream_through(&b.bootstrap, &t, &b.data, b.rate, &b.gold);
    println!("| one learner, two predictors | {acc:.4} | {preds} | {ids} |");
    // Let the last feedback be learned and published.
    std::thread::sleep(Duration::from_secs(3));
    let bodies: Vec<String> = predictors.iter().map(Daemon::metrics).collect();
    let lm = learner.metrics();
    let learned = series(&lm, "classifyd_model_version");
    let bytes = |kind: &str| {
        series(
            &lm,
            &format!("classifyd_model_published_bytes_total{{kind=\"{kind}\"}}"),
        )
    };
    let count = |kind: &str| series(&lm, &format!("classifyd_model_publications_total{{kind=\"{kind}\"}}"));
    let q = |name: &str, p: f64| quantile(&bodies, name, p);
    println!(
        "\nstaleness (learner learns an update -> a predictor serves it): p50 {:.3} s, p99 {:.3} s over {} swaps; of it after publication: p50 {:.3} s, p99 {:.3} s",
        q("classifyd_model_staleness_seconds", 0.5),
        q("classifyd_model_staleness_seconds", 0.99),
        bodies
            .iter()
            .map(|b| series(b, "classifyd_model_swaps_total"))
            .sum::<f64>(),
        q("classifyd_model_delivery_seconds", 0.5),
        q("classifyd_model_delivery_seconds", 0.99),
    );
    println!(
        "published: {:.0} bytes per learned example ({} examples; deltas {:.0} B in {}, full versions {:.0} B in {}: {:.0} B each)",
        (bytes("delta") + bytes("snapshot")) / learned.max(1.0),
        learned,
        bytes("delta"),
        count("delta"),
        bytes("snapshot"),
        count("snapshot"),
        bytes("snapshot") / count("snapshot").max(1.0),
    );
    update_costs(&bodies, &predictors, &learner);
    predictors.into_iter().for_each(Daemon::stop);
    learner.stop();
    full_version_size(b, &t, &group, &learner_dir);
    (learner_dir, t.model)
}

/// What putting versions in service cost the predictors (from their
/// `classifyd_model_update_duration_seconds` and process CPU), and the
/// peak RSS of every process.
fn update_costs(bodies: &[String], predictors: &[Daemon], learner: &Daemon) {
    let h = |kind: &str, part: &str| -> f64 {
        bodies
            .iter()
            .map(|b| {
                series(
                    b,
                    &format!("classifyd_model_update_duration_seconds_{part}{{kind=\"{kind}\"}}"),
                )
            })
            .sum()
    };
    let per = |kind: &str| h(kind, "sum") / h(kind, "count").max(1.0) * 1000.0;
    let swaps: f64 = bodies.iter().map(|b| series(b, "classifyd_model_swaps_total")).sum();
    let cpu: f64 = predictors.iter().map(Daemon::cpu_seconds).sum();
    println!(
        "predictors: {} deltas put in place, {:.3} ms each; {} full versions restored, {:.1} ms each; \
         process CPU {:.2} s over {} versions ({:.1} ms per version, predictions included)",
        h("delta", "count"),
        per("delta"),
        h("full", "count"),
        per("full"),
        cpu,
        swaps,
        cpu / swaps.max(1.0) * 1000.0
    );
    let rss: Vec<String> = predictors.iter().map(|p| format!("{:.0}", p.peak_rss_mib())).collect();
    println!(
        "peak RSS: learner {:.0} MiB, predictors {} MiB",
        learner.peak_rss_mib(),
        rss.join(", ")
    );
}

/// A restarted learner publishes its model whole under a new epoch: the
/// size of a full version of the final model.
fn full_version_size(b: &Bench, t: &Topics, group: &str, learner_dir: &Path) {
    let again = spawn(&b.bootstrap, t, group, "learner", Some(learner_dir));
    again.wait_ready();
    let start = Instant::now();
    let full = loop {
        let bytes = series(
            &again.metrics(),
            "classifyd_model_published_bytes_total{kind=\"snapshot\"}",
        );
        if bytes > 0.0 || start.elapsed() > Duration::from_secs(30) {
            break bytes;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    println!("a full version of the final model (a restarted learner's first publication): {full:.0} B");
    again.stop();
}

/// Throughput of the predict path, the same model everywhere: `n` requests
/// drained by a standalone daemon (a copy of the learner's checkpoint),
/// one predictor and two.
fn predict_path(b: &Bench, n: usize, learner_dir: &Path, model_topic: &str) {
    let base: Vec<serde_json::Value> = std::fs::read_to_string(&b.data)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let msgs: Vec<(String, String)> = (0..n)
        .map(|i| {
            let id = format!("req-{i}");
            let v = serde_json::json!({"id": id, "text": base[i % base.len()]["text"]});
            (id, v.to_string())
        })
        .collect();
    println!("\n| predict path ({n} requests) | messages/s | peak RSS MiB |");
    println!("|---|---:|---:|");
    for (name, how) in [
        ("standalone (learner's checkpoint)", 0),
        ("one predictor", 1),
        ("two predictors", 2),
    ] {
        let run = Topics {
            model: model_topic.to_string(),
            ..Topics::create(&b.bootstrap)
        };
        let group = unique("g");
        let (rate, rss) = drain(&b.bootstrap, &run, &msgs, || match how {
            0 => {
                let dir = b.tmp.join(unique("standalone"));
                let st = Command::new("cp")
                    .arg("-r")
                    .arg(learner_dir)
                    .arg(&dir)
                    .status()
                    .unwrap();
                assert!(st.success());
                let _ = std::fs::remove_file(dir.join("LOCK"));
                vec![spawn(&b.bootstrap, &run, &group, "standalone", Some(&dir))]
            }
            k => (0..k)
                .map(|_| spawn(&b.bootstrap, &run, &group, "predictor", None))
                .collect(),
        });
        let rss: Vec<String> = rss.iter().map(|r| format!("{r:.0}")).collect();
        println!("| {name} | {rate:.0} | {} |", rss.join(", "));
    }
}
