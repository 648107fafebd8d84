//! What one model-topic delta costs each side, in process (no broker):
//! the learner's publication (reading the changed rows, encoding) and a
//! replica's taking it in (`offer`: the records decoded and spooled) and
//! putting it in place (`apply`). A model is learned from the first
//! BENCH_WARM lines of BENCH_DATA (20 Newsgroups by default: its sparse
//! model, 20 classes in a 2^21-bucket table, is where deltas are large),
//! published whole, then every BENCH_EXAMPLES more labeled examples
//! (140: what a learner learns between two publications of the replica
//! bench's 20 Newsgroups run) are published as a delta and applied, 40
//! times. Prints the medians, ms per delta, and the bytes per delta.
//!
//!     cargo bench --bench deltas
//!
//! BENCH_DATA (../shared/data/20newsgroups/stream.jsonl), BENCH_WARM (5000;
//! that stream's first 11,314 lines are its training set), BENCH_EXAMPLES.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use clap::Parser;
use classifyd::config::{Cli, Command};
use classifyd::replica::{Assembler, Outgoing, PublishSettings, Publisher};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let path = std::env::var("BENCH_DATA").unwrap_or_else(|_| "../shared/data/20newsgroups/stream.jsonl".into());
    let (warm, per) = (env_or("BENCH_WARM", 5000), env_or("BENCH_EXAMPLES", 140));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e} (set BENCH_DATA)"));
    let lines: Vec<&str> = text.lines().collect();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let head = tmp.path().join("head.jsonl");
    std::fs::write(&head, lines[..warm.min(lines.len())].join("\n") + "\n").expect("the warm-up lines");
    let cli = Cli::parse_from(["classifyd", "eval", "--input", head.to_str().expect("a UTF-8 path")]);
    let Command::Eval(args) = cli.command else {
        unreachable!("parsed an eval command line")
    };
    let (_, mut p) = classifyd::commands::eval(&args).expect("eval of the warm-up lines");
    let limits = p.config().limits;
    let settings = PublishSettings {
        interval: Duration::ZERO,
        snapshot_interval: Duration::from_secs(3600),
        ..PublishSettings::default()
    };
    let mut publisher = Publisher::new(1, settings, BTreeSet::new());
    let (mut replica, mut served, mut records) = (Assembler::default(), None, Vec::<Outgoing>::new());
    let (mut publish, mut offer, mut apply, mut bytes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut next = warm;
    for now in 1..=41u64 {
        let started = Instant::now();
        publisher.publish(p.model_mut(), now * 1000, &mut |r| records.push(r));
        publish.push(started.elapsed().as_secs_f64() * 1e3);
        bytes.push(
            records
                .iter()
                .filter_map(|r| r.value.as_ref())
                .map(Vec::len)
                .sum::<usize>() as f64,
        );
        let started = Instant::now();
        for r in records.drain(..) {
            replica
                .offer(&r.key, r.value.as_deref())
                .expect("a record the replica takes");
        }
        let updates = replica.take_updates();
        offer.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        for u in updates {
            u.apply(&mut served, limits).expect("an update that fits");
        }
        apply.push(started.elapsed().as_secs_f64() * 1e3);
        let mut learned = 0;
        while learned < per && next < lines.len() {
            learned += usize::from(lines[next].contains("\"label\""));
            p.handle(lines[next].as_bytes(), &|| format!("bench-{next}"), next as u64);
            next += 1;
        }
    }
    // The first publication is the full version.
    let deltas = |v: &[f64]| median(v[1..].to_vec());
    println!(
        "{path}: {} deltas of {per} examples after {warm} lines, medians: {:.2} MB; publish {:.1} ms, offer {:.1} ms, apply {:.1} ms",
        publish.len() - 1,
        deltas(&bytes) / 1e6,
        deltas(&publish),
        deltas(&offer),
        deltas(&apply)
    );
}
