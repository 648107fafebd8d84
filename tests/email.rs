//! Raw e-mail through the JSON-lines daemon (issue 29): the first 400
//! SpamAssassin messages, in the stream's order, as `"email_base64"` lines
//! (labeled), then the next 100 without their labels: each is predicted
//! under its id, most correctly; a message that is no e-mail is
//! dead-lettered as `bad_email` and the daemon goes on.

mod common;

use std::process::Command;

use base64::Engine as _;
use common::*;

#[test]
fn raw_emails_are_learned_predicted_and_junk_dead_lettered() {
    let msgs = raw_emails(500);
    let b64 = |raw: &[u8]| base64::engine::general_purpose::STANDARD.encode(raw);
    let mut lines: Vec<String> = Vec::new();
    for (id, label, raw) in &msgs[..400] {
        lines.push(serde_json::json!({"id": id, "email_base64": b64(raw), "label": label}).to_string());
    }
    lines.push(r#"{"id": "junk", "email": "just words, no header"}"#.to_string());
    for (id, _, raw) in &msgs[400..] {
        lines.push(serde_json::json!({"id": id, "email_base64": b64(raw)}).to_string());
    }
    let tmp = tempfile::tempdir().unwrap();
    let (input, dead) = (tmp.path().join("in.jsonl"), tmp.path().join("dead.jsonl"));
    write_lines(&input, &lines);
    let out = Command::new(BIN)
        .args(["run", "--input"])
        .arg(&input)
        .args(["--output", "-", "--dead-letter"])
        .arg(&dead)
        .env("CLASSIFYD_LOG", "error")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let preds: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(preds.len(), 100, "every unlabeled e-mail predicted");
    let correct = preds
        .iter()
        .zip(&msgs[400..])
        .filter(|(p, (id, label, _))| p["id"] == id.as_str() && p["label"] == label.as_str())
        .count();
    assert!(correct >= 90, "{correct} of 100 correct");
    let dead: Vec<serde_json::Value> = std::fs::read_to_string(&dead)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["reason"], "bad_email");
}
