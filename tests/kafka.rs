//! `classifyd run --brokers` end to end against a real Kafka-protocol
//! broker on loopback (KAFKA_BOOTSTRAP; scripts/test.sh starts one).

mod common;

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::time::Duration;

use common::*;

/// `{"id", "label": "ham"}` feedback for the first `n` requests of `lines`.
fn late_labels(lines: &[String], n: usize) -> Vec<(String, Vec<u8>, Option<i64>)> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("label").is_none())
        .take(n)
        .map(|v| {
            let id = v["id"].as_str().unwrap().to_string();
            (
                id.clone(),
                serde_json::json!({"id": id, "label": "ham"}).to_string().into_bytes(),
                None,
            )
        })
        .collect()
}

/// Until every documented metric is exported (consumer lag comes with
/// librdkafka's statistics, every 5 s) and the lag of `input`'s partition
/// 0, there from the assignment (NaN until the first statistics), reads 0;
/// fails after 60 s.
fn wait_for_every_metric(addr: &str, input: &str) {
    let missing = |body: &str| -> Vec<&str> {
        classifyd::metrics::METRICS
            .iter()
            .filter(|(name, kind, _)| !body.contains(&format!("# TYPE {name} {kind}")))
            .map(|m| m.0)
            .collect()
    };
    let lag = format!("classifyd_consumer_lag_messages{{topic=\"{input}\",partition=\"0\"}}");
    let start = std::time::Instant::now();
    loop {
        let body = http_get(addr, "/metrics").map(|r| r.1).unwrap_or_default();
        let value = body.lines().find_map(|l| l.strip_prefix(lag.as_str())).map(str::trim);
        let m = missing(&body);
        if m.is_empty() && value == Some("0") {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "missing metrics: {m:?}, lag {value:?}\n{body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn end_to_end_predictions_and_progressive_accuracy_match_eval() {
    let topics = Topics::create(1);
    let lines = with_requests(&sms_lines());
    produce(&topics.input, Some(0), &lines_as_messages(&lines));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let addr = format!("127.0.0.1:{}", free_port());
    let daemon = spawn_daemon(&topics, &unique("g"), &dir, &["--metrics-addr", &addr]);
    wait_for("all messages consumed", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.input) == lines.len() as u64)
    });
    // Late labels for a few requests (after the stream, so the progressive
    // metrics compared below are untouched): the published accuracy appears.
    produce(&topics.feedback, Some(0), &late_labels(&lines, 5));
    wait_for_every_metric(&addr, &topics.input);
    assert_eq!(http_get(&addr, "/readyz").unwrap().0, 200);
    terminate(daemon);

    // Exactly one prediction per unlabeled message, keyed by its id.
    let requests: Vec<String> = lines
        .iter()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.get("label").is_none().then(|| v["id"].as_str().unwrap().to_string())
        })
        .collect();
    let preds = consume_all(&topics.output, requests.len(), Duration::from_secs(60));
    let ids: Vec<String> = preds
        .iter()
        .map(|(k, v, _)| {
            let p: serde_json::Value = serde_json::from_slice(v).unwrap();
            assert_eq!(
                p["id"].as_str().unwrap().as_bytes(),
                k.as_slice(),
                "keyed by the input's key"
            );
            p["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids, requests);

    // The progressive accuracy the daemon kept equals `eval` on the same sequence.
    let tmpf = tmp.path().join("seq.jsonl");
    write_lines(&tmpf, &lines);
    let out = Command::new(BIN)
        .args(["eval", "--json", "--bits", "16", "--input"])
        .arg(&tmpf)
        .output()
        .unwrap();
    assert!(out.status.success());
    let eval: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ck = newest_checkpoint(&dir).unwrap();
    let total = ck.pipeline.unwrap().progressive.unwrap().total.unwrap();
    assert_eq!(total.examples, eval["progressive"]["examples"].as_u64().unwrap());
    let eval_accuracy = eval["progressive"]["accuracy"].as_f64().unwrap();
    assert_eq!(
        total.exact,
        (eval_accuracy * total.examples as f64).round() as u64,
        "same correct count"
    );
    assert!((total.exact as f64 / total.examples as f64 - eval_accuracy).abs() < 1e-12);
}

/// Kills the daemon with SIGKILL at several points and resumes each time:
/// the final weights equal an uninterrupted run's over the same sequence.
#[test]
fn kill_9_mid_stream_then_resume_learns_each_message_once() {
    let topics = Topics::create(1);
    let lines = sms_lines();
    let msgs = lines_as_messages(&lines);
    let tmp = tempfile::tempdir().unwrap();

    // The uninterrupted reference: the same sequence through the JSON-lines transport.
    let want = reference_checkpoint(&lines, tmp.path());

    let dir = tmp.path().join("killed");
    let group = unique("g");
    // Small poll batches so the kills land mid-stream.
    let flags = ["--checkpoint-every-updates", "60", "-X", "max.poll.interval.ms=10000"];
    let mut produced = 0;
    let mut mid_stream = 0;
    for kill_after in [150usize, 480, 800] {
        // The stream grows past the kill point, so the process usually
        // holds messages its last checkpoint does not cover when it dies
        // (unless a checkpoint, once a second, caught it up first).
        produce(&topics.input, Some(0), &msgs[produced..kill_after + 45]);
        produced = kill_after + 45;
        let mut child = spawn_daemon(&topics, &group, &dir, &flags);
        wait_for("progress", Duration::from_secs(120), || {
            newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.input) >= kill_after as u64)
        });
        child.kill().unwrap(); // SIGKILL: no shutdown, no final checkpoint
        child.wait().unwrap();
        let at = consumed(&newest_checkpoint(&dir).unwrap(), &topics.input);
        mid_stream += usize::from(at < produced as u64);
    }
    assert!(mid_stream > 0, "no kill landed with uncheckpointed messages in hand");
    produce(&topics.input, Some(0), &msgs[produced..]);
    let daemon = spawn_daemon(&topics, &group, &dir, &flags);
    wait_for("the rest", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.input) == lines.len() as u64)
    });
    terminate(daemon);
    let got = newest_checkpoint(&dir).unwrap();
    assert_eq!(
        got.model, want.model,
        "weights, labels and version equal the uninterrupted run's"
    );
    let counters = got.pipeline.unwrap().counters.unwrap();
    assert_eq!(
        counters.learned,
        lines.len() as u64,
        "every labeled message learned exactly once"
    );
}

#[test]
fn poison_goes_to_the_dead_letter_topic_and_late_labels_join_and_expire() {
    let topics = Topics::create(1);
    let t0 = 1_700_000_000_000i64;
    let msg = |k: &str, v: &[u8], ts: i64| (k.to_string(), v.to_vec(), Some(ts));
    let mut input = Vec::new();
    for (i, l) in sms_lines().iter().take(200).enumerate() {
        input.push(msg(&format!("k{i}"), l.as_bytes(), t0 + i as i64));
    }
    input.push(msg("bad-1", b"{not json", t0 + 300));
    input.push(msg("bad-2", b"{\"text\": 5}", t0 + 301));
    input.push(msg("bad-3", b"{\"text\": \"\xff\xfe\"}", t0 + 302));
    input.push(msg(
        "q-1",
        br#"{"id": "q-1", "text": "WINNER! claim your free prize now, call 09061701461"}"#,
        t0 + 400,
    ));
    input.push(msg(
        "q-2",
        br#"{"id": "q-2", "text": "are we still on for lunch?"}"#,
        t0 + 401,
    ));
    input.push(msg(
        "q-3",
        br#"{"id": "q-3", "text": "call me when you get home"}"#,
        t0 + 402,
    ));
    produce(&topics.input, Some(0), &input);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let daemon = spawn_daemon(&topics, &unique("g"), &dir, &["--feedback-ttl-secs", "60"]);
    wait_for("input consumed", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.input) == input.len() as u64)
    });
    // Feedback: q-1 within the TTL, q-2 a correction of nothing (matched then
    // corrected), q-3 after the TTL (event time), and an unknown id.
    let feedback = vec![
        msg("q-1", br#"{"id": "q-1", "label": "spam"}"#, t0 + 1_000),
        msg("q-2", br#"{"id": "q-2", "label": "ham"}"#, t0 + 1_001),
        msg("q-2", br#"{"id": "q-2", "label": "spam"}"#, t0 + 1_002),
        msg("q-3", br#"{"id": "q-3", "label": "ham"}"#, t0 + 3_600_000),
        msg("zz", br#"{"id": "never-seen", "label": "ham"}"#, t0 + 3_600_001),
    ];
    produce(&topics.feedback, Some(0), &feedback);
    wait_for("feedback consumed", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.feedback) == feedback.len() as u64)
    });
    terminate(daemon);

    let dead = consume_all(&topics.dead, 3, Duration::from_secs(60));
    let reasons: Vec<(String, String)> = dead
        .iter()
        .map(|(k, _, h)| {
            let reason = h
                .iter()
                .find(|(n, _)| n == "classifyd-reason")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            (String::from_utf8_lossy(k).into_owned(), reason)
        })
        .collect();
    assert_eq!(
        reasons,
        [
            ("bad-1".to_string(), "bad_json".to_string()),
            ("bad-2".to_string(), "wrong_type".to_string()),
            ("bad-3".to_string(), "invalid_utf8".to_string())
        ]
    );
    assert_eq!(dead[2].1, b"{\"text\": \"\xff\xfe\"}", "the original bytes");

    let preds = consume_all(&topics.output, 3, Duration::from_secs(60));
    assert_eq!(preds.len(), 3, "the daemon went on after the poison");
    let c = newest_checkpoint(&dir).unwrap().pipeline.unwrap().counters.unwrap();
    let bad: BTreeMap<&str, u64> = c.bad.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!((bad["bad_json"], bad["wrong_type"], bad["invalid_utf8"]), (1, 1, 1));
    assert_eq!(c.feedback_matched, 3, "q-1, q-2 and its correction");
    assert_eq!(c.feedback_corrections, 1);
    assert_eq!(c.feedback_unmatched, 2, "q-3 expired, never-seen unknown");
    assert!(c.cache_expired >= 1);
}

#[test]
fn two_instances_in_one_group_split_the_partitions_and_lose_nothing() {
    let topics = Topics::create(4);
    let lines = sms_lines();
    let msgs = lines_as_messages(&lines);
    let (first, second) = msgs.split_at(400);
    // Spread over the partitions by key hash (the producer's default).
    produce(&topics.input, None, first);
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let group = unique("g");
    let flags = ["--checkpoint-every-updates", "50"];
    let a = spawn_daemon(&topics, &group, &dir_a, &flags);
    wait_for("a through the first part", Duration::from_secs(120), || {
        newest_checkpoint(&dir_a).is_some_and(|c| consumed(&c, &topics.input) == first.len() as u64)
    });
    // B joins: A checkpoints and commits before giving partitions up.
    let b = spawn_daemon(&topics, &group, &dir_b, &flags);
    wait_for("b assigned", Duration::from_secs(120), || {
        newest_checkpoint(&dir_b).is_some()
    });
    produce(&topics.input, None, second);
    let total = lines.len() as u64;
    // Done when every partition's committed progress covers its messages:
    // the union of both checkpoints' positions (the later per partition).
    let done = || {
        let mut best: BTreeMap<String, u64> = BTreeMap::new();
        for d in [&dir_a, &dir_b] {
            if let Some(c) = newest_checkpoint(d) {
                for (k, v) in c.positions {
                    let e = best.entry(k).or_default();
                    *e = (*e).max(v);
                }
            }
        }
        best.iter()
            .filter(|(k, _)| k.starts_with(&topics.input))
            .map(|(_, v)| v)
            .sum::<u64>()
            == total
    };
    wait_for("both done", Duration::from_secs(180), done);
    terminate(a);
    terminate(b);
    let ca = newest_checkpoint(&dir_a).unwrap();
    let cb = newest_checkpoint(&dir_b).unwrap();
    let learned =
        |c: &classifyd::checkpoint::pb::Checkpoint| c.pipeline.as_ref().unwrap().counters.as_ref().unwrap().learned;
    assert!(learned(&cb) > 0, "the second instance took partitions");
    assert_eq!(
        learned(&ca) + learned(&cb),
        total,
        "each message learned by exactly one instance, once"
    );
    let parts: HashSet<&String> = ca.positions.keys().chain(cb.positions.keys()).collect();
    assert_eq!(parts.iter().filter(|k| k.starts_with(&topics.input)).count(), 4);
}

/// `classifyd tail TOPIC --no-follow` prints every record of every
/// partition, one line each, and stops at the end; `--max` stops sooner.
#[test]
fn tail_prints_a_topics_records() {
    let topics = Topics::create(2);
    let msgs: Vec<(String, Vec<u8>, Option<i64>)> = (0..6)
        .map(|i| (format!("k{i}"), format!(r#"{{"id":"p{i}"}}"#).into_bytes(), None))
        .collect();
    produce(&topics.output, None, &msgs);
    let tail = |extra: &[&str]| {
        let out = Command::new(BIN)
            .args(["tail", &topics.output, "--brokers", &bootstrap()])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut lines: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        lines.sort();
        lines
    };
    let want: Vec<String> = (0..6).map(|i| format!(r#"{{"id":"p{i}"}}"#)).collect();
    assert_eq!(tail(&["--no-follow"]), want);
    assert_eq!(tail(&["--max", "2"]).len(), 2);
    // A topic that does not exist is said to be missing.
    let out = Command::new(BIN)
        .args(["tail", &unique("nope"), "--brokers", &bootstrap(), "--no-follow"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}
