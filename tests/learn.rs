//! `classifyd learn` (issue 29): a Maildir and an mbox (tests/data/mail,
//! from SpamAssassin's raw messages) learned with their labels into one
//! checkpoint, which `predict` then reads; a file that is no e-mail is
//! counted, not learned.

mod common;

use std::process::Command;

use common::*;

fn learn(dir: &std::path::Path, label: &str, paths: &[&std::path::Path]) -> String {
    let out = Command::new(BIN)
        .args(["learn", "--label", label, "--bits", "16", "--checkpoint-dir"])
        .arg(dir)
        .args(paths)
        .env("CLASSIFYD_LOG", "error")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_maildir_and_an_mbox_are_learned_into_one_checkpoint() {
    let mail = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mail");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let said = learn(&dir, "ham", &[&mail.join("maildir")]);
    assert!(said.contains("learned 8 of 8 messages as \"ham\""), "{said}");
    let said = learn(&dir, "spam", &[&mail.join("spam.mbox")]);
    assert!(
        said.contains("learned 8 of 8 messages as \"spam\" (model version 16)"),
        "{said}"
    );

    // A folder of files: one message, one that is no e-mail.
    let folder = tmp.path().join("eml");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(
        folder.join("a.eml"),
        "From: a@example.org\r\nSubject: hi\r\n\r\nlunch?\r\n",
    )
    .unwrap();
    std::fs::write(folder.join("notes.txt"), "just some words").unwrap();
    let said = learn(&dir, "ham", &[&folder]);
    assert!(said.contains("learned 1 of 2") && said.contains("bad_email"), "{said}");

    let c = newest_checkpoint(&dir).unwrap();
    let counters = c.pipeline.unwrap().counters.unwrap();
    assert_eq!(counters.learned, 17);
    assert_eq!(counters.bad.get("bad_email"), Some(&1));

    // predict reads raw e-mail lines with the learned model.
    use base64::Engine as _;
    let spam = String::from_utf8_lossy(&std::fs::read(mail.join("spam.mbox")).unwrap()).into_owned();
    let first = spam.split("\nFrom MAILER-DAEMON").next().unwrap();
    let first = first.split_once('\n').unwrap().1;
    let b64 = base64::engine::general_purpose::STANDARD.encode(first);
    let line = serde_json::json!({"id": "s-1", "email_base64": b64}).to_string();
    let input = tmp.path().join("q.jsonl");
    std::fs::write(&input, line + "\n").unwrap();
    let out = Command::new(BIN)
        .args(["predict", "--checkpoint-dir"])
        .arg(&dir)
        .arg("--input")
        .arg(&input)
        .env("CLASSIFYD_LOG", "error")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(p["id"], "s-1");
    assert_eq!(p["label"], "spam");
}
