//! Criterion benchmarks of the hot path, through the public API, on real
//! messages: each front stage alone (JSON parsing, tokenizing, hashing,
//! counting repeats), tokenize+hash+count together, predict and learn for
//! each learner; and whole-file `eval` throughput on each shared stream.
//!
//! Data: the SpamAssassin stream under $CLASSIFYD_DATA_DIR (default
//! ../shared/data), else the committed SMS slice in tests/data; `eval/*`
//! runs on the SMS and SpamAssassin streams found there (the committed
//! slice otherwise).

use std::path::PathBuf;

use clap::Parser;
use classifyd::config::{Cli, Command};
use classifyd::features::{FeatureConfig, FeatureHash, Featurizer, SparseVec, tokenize};
use classifyd::model::{Hyper, Learner, Model, Scored, Task};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// The binary's allocator, so that the whole-file figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn data_dir() -> PathBuf {
    PathBuf::from(std::env::var("CLASSIFYD_DATA_DIR").unwrap_or_else(|_| "../shared/data".into()))
}

/// The stream the message benchmarks read: its name and its lines.
fn stream() -> (String, String) {
    let big = data_dir().join("spamassassin/stream.jsonl");
    let (name, path) = if big.exists() {
        ("spamassassin".to_string(), big)
    } else {
        (
            "sms-head1000".to_string(),
            PathBuf::from("tests/data/sms_head1000.jsonl"),
        )
    };
    (name, std::fs::read_to_string(&path).expect("benchmark data"))
}

/// Up to `n` (text, label) pairs from a stream.
fn messages(n: usize) -> (String, Vec<(String, String)>) {
    let (name, text) = stream();
    let msgs = text
        .lines()
        .take(n)
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some((v["text"].as_str()?.to_string(), v["label"].as_str()?.to_string()))
        })
        .collect();
    (name, msgs)
}

fn configs() -> Vec<(&'static str, FeatureConfig)> {
    vec![
        (
            "words-1-2/bits-20",
            FeatureConfig {
                bits: 20,
                char_ngrams: None,
                ..FeatureConfig::default()
            },
        ),
        ("default", FeatureConfig::default()),
    ]
}

fn featurize(c: &mut Criterion) {
    let (data, msgs) = messages(1000);
    let bytes: usize = msgs.iter().map(|m| m.0.len()).sum();
    let mut g = c.benchmark_group(format!("featurize/{data}"));
    g.throughput(Throughput::Bytes(bytes as u64));
    for (name, cfg) in configs() {
        let mut f = Featurizer::new(cfg);
        let mut x = SparseVec::default();
        g.bench_function(name, |b| {
            b.iter(|| {
                for (t, _) in &msgs {
                    f.featurize(t, &mut x);
                }
                x.len()
            })
        });
    }
    g.finish();
}

/// `text` with its ASCII letters mapped to the 26 chars from `first` on
/// (capitals to their uppercase, where the script has one).
fn transliterate(text: &str, first: char) -> String {
    text.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' => {
                let k = (c.to_ascii_lowercase() as u32) - ('a' as u32);
                let m = char::from_u32(first as u32 + k).unwrap_or(c);
                if c.is_ascii_uppercase() {
                    m.to_uppercase().next().unwrap_or(m)
                } else {
                    m
                }
            }
            _ => c,
        })
        .collect()
}

/// The front stages one at a time, with VW's features (words and word
/// bigrams, 2^20 buckets), in message-text bytes per second (JSON line
/// bytes for parsing): where `eval`'s reader thread spends its time.
fn stages(c: &mut Criterion) {
    let (data, text) = stream();
    let lines: Vec<&str> = text.lines().take(1000).collect();
    let (_, msgs) = messages(1000);
    let bytes: usize = msgs.iter().map(|m| m.0.len()).sum();
    let cfg = configs()[0].1;
    let mut g = c.benchmark_group(format!("stages/{data}"));
    g.throughput(Throughput::Bytes(lines.iter().map(|l| l.len() as u64).sum()));
    g.bench_function("parse", |b| {
        b.iter(|| {
            lines
                .iter()
                .filter(|l| classifyd::message::parse(l.as_bytes(), 1 << 20).is_ok())
                .count()
        })
    });
    g.throughput(Throughput::Bytes(bytes as u64));
    let mut scratch = String::new();
    g.bench_function("tokenize", |b| {
        b.iter(|| {
            let mut n = 0;
            for (t, _) in &msgs {
                tokenize(t, &mut scratch, |tok| n += tok.len());
            }
            n
        })
    });
    // The same messages in other scripts (ASCII letters mapped one to one),
    // where the tokenizer leaves its ASCII fast path: Cyrillic (two-byte
    // UTF-8, lowercased by table) and CJK ideographs (three bytes, no case).
    for (script, first) in [("cyrillic", 'а'), ("cjk", '\u{4E00}')] {
        let mapped: Vec<String> = msgs.iter().map(|(t, _)| transliterate(t, first)).collect();
        g.throughput(Throughput::Bytes(mapped.iter().map(|t| t.len() as u64).sum()));
        g.bench_function(format!("tokenize/{script}"), |b| {
            b.iter(|| {
                let mut n = 0;
                for t in &mapped {
                    tokenize(t, &mut scratch, |tok| n += tok.len());
                }
                n
            })
        });
    }
    g.throughput(Throughput::Bytes(bytes as u64));
    let mut buckets = Vec::new();
    // Each version of the feature hash, on VW's features (words) and on
    // the defaults (character 3- and 4-grams too).
    for (name, features) in [("words", cfg), ("default", FeatureConfig::default())] {
        for hash in [FeatureHash::V1, FeatureHash::V2] {
            let mut f = Featurizer::new(FeatureConfig { hash, ..features });
            g.bench_function(format!("tokenize+hash/{name}/{hash:?}"), |b| {
                b.iter(|| {
                    let mut n = 0;
                    for (t, _) in &msgs {
                        buckets.clear();
                        f.hash_buckets(t, &mut buckets);
                        n += buckets.len();
                    }
                    n
                })
            });
        }
    }
    let mut f = Featurizer::new(cfg);
    let hashed: Vec<Vec<u32>> = msgs
        .iter()
        .map(|(t, _)| {
            let mut b = Vec::new();
            f.hash_buckets(t, &mut b);
            b
        })
        .collect();
    let mut x = SparseVec::default();
    g.bench_function("count", |b| {
        b.iter(|| {
            let mut n = 0;
            for h in &hashed {
                f.count_buckets(h, &mut x);
                n += x.len();
            }
            n
        })
    });
    g.finish();
}

fn learners(c: &mut Criterion) {
    let (data, msgs) = messages(1000);
    for (fname, cfg) in configs() {
        let mut f = Featurizer::new(cfg);
        let xs: Vec<(SparseVec, String)> = msgs
            .iter()
            .map(|(t, l)| {
                let mut x = SparseVec::default();
                f.featurize(t, &mut x);
                (x, l.clone())
            })
            .collect();
        let nnz: usize = xs.iter().map(|x| x.0.len()).sum();
        let mut g = c.benchmark_group(format!("model/{data}/{fname}"));
        g.throughput(Throughput::Elements(nnz as u64));
        for learner in [
            Learner::Perceptron,
            Learner::Logistic,
            Learner::Hinge,
            Learner::NaiveBayes,
        ] {
            let mut model = Model::new(Hyper::defaults(learner), cfg);
            model.ensure_task(Task::SingleLabel);
            let ids: Vec<usize> = xs.iter().map(|(_, l)| model.intern(l).unwrap()).collect();
            g.bench_function(BenchmarkId::new("learn", learner), |b| {
                b.iter(|| {
                    for ((x, _), &id) in xs.iter().zip(&ids) {
                        model.learn(x, &[id]).unwrap();
                    }
                })
            });
            let mut out = Scored::default();
            g.bench_function(BenchmarkId::new("predict", learner), |b| {
                b.iter(|| {
                    let mut n = 0;
                    for (x, _) in &xs {
                        model.predict(x, &mut out);
                        n += out.labels.len();
                    }
                    n
                })
            });
        }
        g.finish();
    }
}

/// Whole-file `classifyd eval` (reader and model threads, metrics and all),
/// with VW's features and with the defaults, in message-text bytes per
/// second: the figures `scripts/bench_vs_vw.sh` takes from the binary.
fn eval_files(c: &mut Criterion) {
    let mut files: Vec<(String, PathBuf)> = ["sms_spam_collection", "spamassassin"]
        .iter()
        .map(|n| (n.to_string(), data_dir().join(n).join("stream.jsonl")))
        .filter(|(_, p)| p.exists())
        .collect();
    if files.is_empty() {
        files.push(("sms-head1000".into(), PathBuf::from("tests/data/sms_head1000.jsonl")));
    }
    for (name, path) in files {
        let text = std::fs::read_to_string(&path).expect("benchmark data");
        let bytes: usize = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["text"].as_str().map(str::len))
            .sum();
        let mut g = c.benchmark_group(format!("eval/{name}"));
        g.throughput(Throughput::Bytes(bytes as u64));
        g.sample_size(10);
        for (label, extra) in [
            ("vw-features", &["--char-ngrams", "0", "--idf", "false"][..]),
            ("defaults", &[][..]),
        ] {
            let argv = ["classifyd", "eval", "--input", path.to_str().expect("a UTF-8 path")];
            let cli = Cli::parse_from(argv.iter().chain(extra));
            let Command::Eval(args) = cli.command else {
                unreachable!("parsed an eval command line")
            };
            g.bench_function(label, |b| {
                b.iter(|| classifyd::commands::eval(&args).expect("eval").0.examples)
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = stages, featurize, learners, eval_files
}
criterion_main!(benches);
