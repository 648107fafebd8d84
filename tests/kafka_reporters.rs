//! Reporters on Kafka (issue 28): a label's reporter comes from the JSON
//! field or, over it, from a record header; a bad one is dead-lettered; a
//! reporter flooding flipped labels loses its trust and its labels are
//! held; the metrics say so. Against the test broker (KAFKA_BOOTSTRAP).

mod common;

use std::time::Duration;

use common::*;

/// Every third request's label comes from "flooder" (named by the header,
/// over the JSON field's "r-1"), flipped; the rest from honest reporters
/// named in the JSON field. Then a label whose JSON reporter is not a
/// string, and one whose header is not UTF-8.
fn feedback(requests: &[(String, String)]) -> Vec<Headed> {
    let mut out: Vec<Headed> = Vec::new();
    for (i, (_, label)) in requests.iter().enumerate() {
        let id = format!("q-{i}");
        if i % 3 == 0 {
            let flipped = if label == "spam" { "ham" } else { "spam" };
            let v = serde_json::json!({"id": id, "label": flipped, "reporter": "r-1"});
            let header = Some(("reporter".to_string(), b"flooder".to_vec()));
            out.push((id, v.to_string().into_bytes(), header));
        } else {
            let v = serde_json::json!({"id": id, "label": label, "reporter": format!("r-{}", i % 4)});
            out.push((id, v.to_string().into_bytes(), None));
        }
    }
    out.push((
        "bad-r".into(),
        br#"{"id": "q-1", "label": "ham", "reporter": 5}"#.to_vec(),
        None,
    ));
    let header = Some(("reporter".to_string(), b"\xff\xfe".to_vec()));
    out.push(("bad-h".into(), br#"{"id": "q-2", "label": "ham"}"#.to_vec(), header));
    out
}

fn metric(body: &str, line_prefix: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(line_prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

#[test]
fn reporters_from_field_and_header_and_a_flooder_held() {
    let topics = Topics::create(1);
    let train = sms_examples(0, 600);
    let requests = sms_examples(600, 300);
    let mut input: Vec<(String, Vec<u8>, Option<i64>)> = Vec::new();
    for (i, (text, label)) in train.iter().enumerate() {
        let v = serde_json::json!({"id": format!("t-{i}"), "text": text, "label": label});
        input.push((format!("t-{i}"), v.to_string().into_bytes(), None));
    }
    for (i, (text, _)) in requests.iter().enumerate() {
        let v = serde_json::json!({"id": format!("q-{i}"), "text": text});
        input.push((format!("q-{i}"), v.to_string().into_bytes(), None));
    }
    produce(&topics.input, Some(0), &input);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let addr = format!("127.0.0.1:{}", free_port());
    let daemon = spawn_daemon(&topics, &unique("g"), &dir, &["--metrics-addr", &addr]);
    wait_for("input consumed", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.input) == input.len() as u64)
    });
    let labels = feedback(&requests);
    produce_with_headers(&topics.feedback, &labels);
    wait_for("feedback consumed", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.feedback) == labels.len() as u64)
    });
    let mut body = String::new();
    wait_for("metrics published", Duration::from_secs(30), || {
        body = http_get(&addr, "/metrics").map(|r| r.1).unwrap_or_default();
        metric(&body, "classifyd_labels_total{outcome=\"refused\"}") == 2.0
    });
    terminate(daemon);

    let state = newest_checkpoint(&dir).unwrap().pipeline.unwrap();
    let counters = state.counters.clone().unwrap_or_default();
    let names: Vec<&str> = state.reporters.iter().map(|r| r.name.as_str()).collect();
    let flooder = state.reporters.iter().find(|r| r.name == "flooder");
    let flooder = flooder.unwrap_or_else(|| panic!("the header names the flooder: {names:?}"));
    assert_eq!(flooder.labels, 100, "the header wins over the JSON field");
    assert!(flooder.held >= 75, "most of a flooder's labels are held: {flooder:?}");
    let r1 = state.reporters.iter().find(|r| r.name == "r-1").unwrap();
    assert_eq!(r1.labels, 50, "r-1 named only its own labels");
    assert_eq!(r1.held, 0, "honest reporters are not held");
    assert_eq!(counters.labels_held, flooder.held);
    assert_eq!(counters.bad.get("bad_reporter"), Some(&2));
    let dead = consume_all(&topics.dead, 2, Duration::from_secs(60));
    let reasons: Vec<String> = dead
        .iter()
        .filter_map(|(_, _, h)| h.iter().find(|(n, _)| n == "classifyd-reason").map(|(_, v)| v.clone()))
        .collect();
    assert_eq!(reasons, ["bad_reporter", "bad_reporter"]);

    let held = metric(&body, "classifyd_labels_total{outcome=\"held\"}");
    assert!(held >= 75.0, "held {held}\n{body}");
    assert_eq!(metric(&body, "classifyd_reporters_unreliable "), 1.0);
    assert_eq!(
        metric(&body, "classifyd_reporters "),
        6.0,
        "r-0 .. r-3, the flooder and the anonymous training labels\n{body}"
    );
    let share = metric(&body, "classifyd_label_contradiction_ratio ");
    assert!(
        (0.0..0.1).contains(&share),
        "held labels stay out of the share: {share}"
    );
}
