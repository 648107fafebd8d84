//! Criterion benchmarks of the hot path, through the public API, on real
//! messages: tokenize+hash, predict and learn for each learner.
//!
//! Data: the SpamAssassin stream under $CLASSIFYD_DATA_DIR (default
//! ../shared/data), else the committed SMS slice in tests/data.

use std::path::PathBuf;

use classifyd::features::{FeatureConfig, Featurizer, SparseVec};
use classifyd::model::{Hyper, Learner, Model, Scored, Task};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// Up to `n` (text, label) pairs from a stream.
fn messages(n: usize) -> (String, Vec<(String, String)>) {
    let dir = std::env::var("CLASSIFYD_DATA_DIR").unwrap_or_else(|_| "../shared/data".into());
    let big = PathBuf::from(dir).join("spamassassin/stream.jsonl");
    let (name, path) = if big.exists() {
        ("spamassassin".to_string(), big)
    } else {
        (
            "sms-head1000".to_string(),
            PathBuf::from("tests/data/sms_head1000.jsonl"),
        )
    };
    let text = std::fs::read_to_string(&path).expect("benchmark data");
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

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = featurize, learners
}
criterion_main!(benches);
