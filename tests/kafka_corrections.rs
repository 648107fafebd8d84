//! Labels as facts and users on Kafka (issues 48 and 49): on the feedback
//! topic a label delivered twice is learned once, a trusted reviewer's
//! relabel replaces the first label, a forget takes one back and leaves
//! the message in the record, unlabeled (an unknown id is counted, not
//! dead-lettered); a message's user comes from the JSON
//! field or, over it, from the `user` record header, and a header that is
//! no name is dead-lettered as `bad_user`. Against the test broker
//! (KAFKA_BOOTSTRAP).

mod common;

use std::time::Duration;

use common::*;

fn other(label: &str) -> &'static str {
    if label == "spam" { "ham" } else { "spam" }
}

#[test]
fn duplicates_relabels_forgets_and_users_on_kafka() {
    let topics = Topics::create(1);
    let (train, requests) = (sms_examples(0, 300), sms_examples(300, 60));
    let mut input: Vec<Headed> = Vec::new();
    for (i, (text, label)) in train.iter().enumerate() {
        let v = serde_json::json!({"id": format!("t-{i}"), "text": text, "label": label});
        input.push((format!("t-{i}"), v.to_string().into_bytes(), None));
    }
    for (i, (text, _)) in requests.iter().enumerate() {
        let id = format!("q-{i}");
        let v = serde_json::json!({"id": id, "text": text, "user": "from-json"});
        let header = (i % 2 == 0).then(|| ("user".to_string(), b"from-header".to_vec()));
        input.push((id, v.to_string().into_bytes(), header));
    }
    let bad = serde_json::json!({"id": "q-bad", "text": "hello"});
    input.push((
        "q-bad".into(),
        bad.to_string().into_bytes(),
        Some(("user".into(), b"\xff".to_vec())),
    ));
    produce_with_headers(&topics.input, &input);
    let mut labels: Vec<Headed> = Vec::new();
    for (i, (_, label)) in requests.iter().enumerate() {
        let v = serde_json::json!({"id": format!("q-{i}"), "label": label, "reporter": "r-1"});
        // Every label twice, as an at-least-once producer may send it.
        labels.push((format!("q-{i}"), v.to_string().into_bytes(), None));
        labels.push((format!("q-{i}"), v.to_string().into_bytes(), None));
    }
    for (i, (_, label)) in requests.iter().enumerate().take(6) {
        let v = serde_json::json!({"id": format!("q-{i}"), "label": other(label), "reporter": "reviewer"});
        labels.push((format!("q-{i}"), v.to_string().into_bytes(), None));
    }
    for id in ["q-10", "q-11", "q-12", "never-seen"] {
        let v = serde_json::json!({"id": id, "forget": true});
        labels.push((id.to_string(), v.to_string().into_bytes(), None));
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let daemon = spawn_daemon(&topics, &unique("g"), &dir, &["--trusted-reporter", "reviewer"]);
    wait_for("input consumed", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.input) == input.len() as u64)
    });
    produce_with_headers(&topics.feedback, &labels);
    wait_for("feedback consumed", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.feedback) == labels.len() as u64)
    });
    terminate(daemon);

    let state = newest_checkpoint(&dir).unwrap();
    let model = state.model.clone().unwrap();
    let pipeline = state.pipeline.unwrap();
    let user_of = |id: &str| pipeline.cache.iter().find(|e| e.id == id).map(|e| e.user.clone());
    assert_eq!(user_of("q-0").as_deref(), Some("from-header"), "the header wins");
    assert_eq!(user_of("q-1").as_deref(), Some("from-json"));
    // Forgotten: the record keeps the message, unlabeled (a label for it
    // later is learned anew: docs/feedback.md).
    let q10 = pipeline
        .cache
        .iter()
        .find(|e| e.id == "q-10")
        .expect("q-10 kept in the record");
    assert!(!q10.has_gold && !q10.has_held, "forgotten: unlabeled");
    let c = pipeline.counters.clone().unwrap_or_default();
    assert_eq!(c.labels_repeated, 60, "each label's second delivery");
    assert_eq!((c.labels_replaced, c.labels_forgotten, c.forgets_unmatched), (6, 3, 1));
    assert_eq!(c.bad.get("bad_user"), Some(&1));
    // 300 training labels, 60 late labels, 6 replaced (taken back, then
    // learned: two versions each), 3 forgotten.
    assert_eq!(model.version, 300 + 60 + 2 * 6 + 3);
    let dead = consume_all(&topics.dead, 1, Duration::from_secs(60));
    let reason = dead[0]
        .2
        .iter()
        .find(|(n, _)| n == "classifyd-reason")
        .map(|(_, v)| v.clone());
    assert_eq!(reason.as_deref(), Some("bad_user"));
}
