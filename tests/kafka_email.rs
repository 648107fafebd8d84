//! `--input-format email` against the test broker (issue 29): record values
//! are raw e-mails, keys their ids, a `label` header their label; late
//! labels come on the feedback topic as JSON; predictions go out under the
//! record's key; a value that is no e-mail is dead-lettered as `bad_email`.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn raw_email_records_with_labels_from_a_header_and_the_feedback_topic() {
    let topics = Topics::create(1);
    let msgs = raw_emails(360);
    let label = |l: &str| Some(("label".to_string(), l.as_bytes().to_vec()));
    let mut input: Vec<Headed> = msgs[..300]
        .iter()
        .map(|(id, l, raw)| (id.clone(), raw.clone(), label(l)))
        .collect();
    input.push(("junk".into(), b"just words, no header".to_vec(), None));
    input.push(("bad-label".into(), msgs[0].2.clone(), label("")));
    for (i, (_, _, raw)) in msgs[300..].iter().enumerate() {
        input.push((format!("q-{i}"), raw.clone(), None));
    }
    produce_with_headers(&topics.input, &input);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let daemon = spawn_daemon(&topics, &unique("g"), &dir, &["--input-format", "email"]);
    wait_for("input consumed", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.input) == input.len() as u64)
    });
    let feedback: Vec<(String, Vec<u8>, Option<i64>)> = msgs[300..310]
        .iter()
        .enumerate()
        .map(|(i, (_, l, _))| {
            let v = serde_json::json!({"id": format!("q-{i}"), "label": l});
            (format!("q-{i}"), v.to_string().into_bytes(), None)
        })
        .collect();
    produce(&topics.feedback, Some(0), &feedback);
    wait_for("feedback consumed", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.feedback) == feedback.len() as u64)
    });
    terminate(daemon);

    let preds = consume_all(&topics.output, 60, Duration::from_secs(60));
    assert_eq!(preds.len(), 60);
    let mut correct = 0;
    for (i, (key, value, _)) in preds.iter().enumerate() {
        let p: serde_json::Value = serde_json::from_slice(value).unwrap();
        assert_eq!(key, format!("q-{i}").as_bytes(), "under the record's key");
        assert_eq!(p["id"], format!("q-{i}"));
        correct += usize::from(p["label"] == msgs[300 + i].1.as_str());
    }
    assert!(correct >= 50, "{correct} of 60 correct");
    let dead = consume_all(&topics.dead, 2, Duration::from_secs(60));
    let reasons: Vec<(String, String)> = dead
        .iter()
        .map(|(k, _, h)| {
            let reason = h.iter().find(|(n, _)| n == "classifyd-reason").map(|(_, v)| v.clone());
            (String::from_utf8_lossy(k).into_owned(), reason.unwrap_or_default())
        })
        .collect();
    assert_eq!(
        reasons,
        [
            ("junk".into(), "bad_email".into()),
            ("bad-label".into(), "bad_label".into())
        ]
    );
    let c = newest_checkpoint(&dir).unwrap().pipeline.unwrap().counters.unwrap();
    assert_eq!(c.learned, 300, "labels from the header");
    assert_eq!(c.feedback_matched, 10, "late labels joined to e-mails by key");
}
