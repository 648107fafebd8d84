//! The uncertainty review end to end: uncertain predictions are marked and
//! written for review within the budget even under a burst, and a reviewed
//! message's label, sent back as feedback, is joined and learned, on JSON
//! lines and on the real broker (KAFKA_BOOTSTRAP; scripts/test.sh starts one).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::*;

/// The SMS slice's first `labeled` lines as they are, then the rest (and
/// `repeat` times more, under new ids) as prediction requests; and every
/// line's gold label by id.
fn stream(labeled: usize, repeat: usize) -> (Vec<String>, HashMap<String, String>) {
    let mut lines = Vec::new();
    let mut gold = HashMap::new();
    for round in 0..repeat {
        for (i, l) in sms_lines().iter().enumerate() {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if round == 0 && i < labeled {
                lines.push(l.clone());
                continue;
            }
            let id = format!("r{round}-{}", v["id"].as_str().unwrap());
            let label = v.as_object_mut().unwrap().remove("label").unwrap();
            gold.insert(id.clone(), label.as_str().unwrap().to_string());
            v["id"] = id.into();
            lines.push(v.to_string());
        }
    }
    (lines, gold)
}

fn read_json_lines(path: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `classifyd run` over `input` on JSON lines, writing predictions and
/// the review file into `tmp`; returns how long it took.
fn run(tmp: &Path, input: &Path, extra: &[&str]) -> Duration {
    let started = Instant::now();
    let out = Command::new(BIN)
        .arg("run")
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(tmp.join("predictions.jsonl"))
        .arg("--review")
        .arg(tmp.join("review.jsonl"))
        .arg("--checkpoint-dir")
        .arg(tmp.join("ck"))
        .args(["--bits", "16"])
        .args(extra)
        .env("CLASSIFYD_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    started.elapsed()
}

#[test]
fn a_burst_gets_only_the_review_budget() {
    // 300 labeled messages, then a burst of 14,000 requests at once.
    let (lines, _) = stream(300, 20);
    let requests = lines.len() - 300;
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.jsonl");
    write_lines(&input, &lines);

    // By traffic: 1 % of the requests, after a first burst of 10.
    let took = run(tmp.path(), &input, &["--review-budget", "0.01"]);
    let review = read_json_lines(&tmp.path().join("review.jsonl"));
    assert!(review.len() <= requests / 100 + 10, "{} reviewed", review.len());
    assert!(review.len() >= requests / 200, "{} reviewed", review.len());
    // Each reviewed message carries its text and prediction, and its
    // published prediction is marked uncertain; about 1 % are.
    let texts: HashMap<String, String> = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| {
            (
                v["id"].as_str().unwrap().to_string(),
                v["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let predictions = read_json_lines(&tmp.path().join("predictions.jsonl"));
    let uncertain: HashSet<&str> = predictions
        .iter()
        .filter(|p| p["uncertain"] == true)
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert!(uncertain.len() < requests / 20, "{} uncertain", uncertain.len());
    for r in &review {
        let id = r["id"].as_str().unwrap();
        assert_eq!(r["text"].as_str(), texts.get(id).map(String::as_str));
        assert!(r["label"].is_string() && r["scores"].is_object(), "{r}");
        assert!(uncertain.contains(id), "{id} reviewed but not marked");
    }

    // By time: at most 25 a minute, whatever the traffic share allows.
    let tmp = tempfile::tempdir().unwrap();
    let took_too = run(
        tmp.path(),
        &input,
        &["--review-budget", "0.5", "--review-per-minute", "25"],
    );
    let minutes = (took + took_too).as_secs_f64() / 60.0;
    let reviewed = read_json_lines(&tmp.path().join("review.jsonl")).len();
    assert!(reviewed as f64 <= 25.0 * (1.0 + minutes), "{reviewed} in {minutes} min");
    assert!(reviewed >= 25, "{reviewed}");
}

#[test]
fn a_reviewed_label_sent_back_is_learned() {
    let (lines, gold) = stream(300, 1);
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.jsonl");
    write_lines(&input, &lines);
    run(tmp.path(), &input, &["--review-budget", "0.05"]);
    let review = read_json_lines(&tmp.path().join("review.jsonl"));
    assert!(!review.is_empty());
    let before = newest_checkpoint(&tmp.path().join("ck")).unwrap();
    let before = before.pipeline.unwrap().counters.unwrap();

    // The reviewer's labels, as feedback lines of a later input.
    let feedback: Vec<String> = review
        .iter()
        .map(|r| {
            let id = r["id"].as_str().unwrap();
            serde_json::json!({"id": id, "label": gold[id]}).to_string()
        })
        .collect();
    let labels = tmp.path().join("labels.jsonl");
    write_lines(&labels, &feedback);
    run(tmp.path(), &labels, &[]);
    let after = newest_checkpoint(&tmp.path().join("ck")).unwrap();
    let after = after.pipeline.unwrap().counters.unwrap();
    assert_eq!(after.feedback_matched - before.feedback_matched, review.len() as u64);
    assert!(after.feedback_corrections == 0, "{after:?}");
    assert_eq!(after.feedback_unmatched, before.feedback_unmatched);
}

#[test]
fn on_the_broker_a_reviewed_label_comes_back_on_the_feedback_topic_and_is_learned() {
    let topics = Topics::create(1);
    let review_topic = unique("review");
    let (lines, gold) = stream(300, 1);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let daemon = spawn_daemon(
        &topics,
        &unique("g"),
        &dir,
        &["--review-topic", &review_topic, "--review-budget", "0.05"],
    );
    produce(&topics.input, Some(0), &lines_as_messages(&lines));
    wait_for("all messages consumed", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.input) == lines.len() as u64)
    });
    let before = newest_checkpoint(&dir).unwrap();
    let version = before.model.unwrap().version;
    let before = before.pipeline.unwrap().counters.unwrap();
    assert!(before.feedback_matched == 0 && before.learned == 300, "{before:?}");

    // A reviewer reads the review topic and answers on the feedback topic.
    let review = consume_all(&review_topic, 1, Duration::from_secs(60));
    assert!(!review.is_empty(), "nothing to review");
    let answers: Vec<(String, Vec<u8>, Option<i64>)> = review
        .iter()
        .map(|(key, value, _)| {
            let r: serde_json::Value = serde_json::from_slice(value).unwrap();
            let id = r["id"].as_str().unwrap().to_string();
            assert_eq!(key, id.as_bytes());
            assert!(r["text"].is_string(), "{r}");
            let label = gold[&id].clone();
            (
                id.clone(),
                serde_json::json!({"id": id, "label": label}).to_string().into_bytes(),
                None,
            )
        })
        .collect();
    produce(&topics.feedback, Some(0), &answers);
    wait_for("the reviewed labels learned", Duration::from_secs(60), || {
        newest_checkpoint(&dir).is_some_and(|c| {
            let learned = c.model.unwrap().version - version;
            let n = c.pipeline.unwrap().counters.unwrap();
            n.feedback_matched == answers.len() as u64 && learned == answers.len() as u64
        })
    });
    terminate(daemon);
}
