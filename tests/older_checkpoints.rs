//! Checkpoints written by older builds restore and predict exactly as
//! those builds did: `tests/data/checkpoints/1fb279c-jsonl.ckpt`, written
//! by 1fb279c with the version 1 feature hash (xxh3; new models take
//! version 2), and the predictions 1fb279c made from it; 3e4dd5d's (the
//! last build before the stack), b3d66f3's (the last before the byte
//! context models) and 1515879's (the last before the stack's added
//! members were carried by name) likewise.

mod common;

use std::process::Command;

use common::*;

/// 1fb279c's checkpoint, its model resumed by this build, predicts the
/// same 18 messages byte for byte as 1fb279c did, and keeps hashing with
/// version 1 (the checkpoint's features win over the flags' default).
#[test]
fn a_checkpoint_of_1fb279c_predicts_as_1fb279c_did() {
    let (now, then, report) = resume("1fb279c-jsonl.ckpt", "1fb279c");
    assert_eq!(now.lines().count(), 18);
    assert_eq!(now, then);
    assert_eq!(report["features"]["hash"], "v1", "{report}");
}

/// 3e4dd5d's checkpoint (the last build before the stack: the fused naive
/// Bayes inside the linear model, a personal switch; 1,500 SMS messages,
/// a third of them for four users, `--bits 14`), resumed by this build,
/// predicts as 3e4dd5d did: its members restore into a stack set to their
/// old combination. A message without a user gets the same margins byte
/// for byte; a user's message, whose copies the switch mixed in where the
/// stack weighs them, the same label, its margin within 1e-5 (relative)
/// and its rounded score within 2e-6.
#[test]
fn a_checkpoint_of_3e4dd5d_predicts_as_3e4dd5d_did() {
    let (now, then, report) = resume("3e4dd5d-users.ckpt", "3e4dd5d");
    assert_eq!(now.lines().count(), 18);
    let mut users = 0;
    for (a, b) in now.lines().zip(then.lines()) {
        let (a, b): (serde_json::Value, serde_json::Value) =
            (serde_json::from_str(a).unwrap(), serde_json::from_str(b).unwrap());
        if a.get("user").is_none() {
            assert_eq!(a, b);
            continue;
        }
        users += 1;
        assert_eq!(a["label"], b["label"], "{a} {b}");
        let near = |k: &str, v: &str, tol: f64| {
            let (m, n) = (a[k][v].as_f64().unwrap(), b[k][v].as_f64().unwrap());
            assert!((m - n).abs() <= tol * n.abs().max(1.0), "{a} {b}");
        };
        near("margins", "spam", 1e-5);
        near("scores", "spam", 2e-6);
    }
    assert_eq!(users, 6);
    assert_eq!(report["stack"]["weights"]["linear"], 1.0, "{report}");
}

/// b3d66f3's checkpoint (the stack of four members, format 5; the same
/// 1,500 SMS messages and users as 3e4dd5d's), resumed by this build,
/// predicts byte for byte as b3d66f3 did: the 18 texts, and three raw
/// e-mails at which the byte LR (both builds) and the compression member
/// (this build) join with nothing learned, so they add nothing yet.
#[test]
fn a_checkpoint_of_b3d66f3_predicts_as_b3d66f3_did() {
    let (now, then, report) = resume("b3d66f3-users.ckpt", "b3d66f3");
    assert_eq!(now.lines().count(), 21);
    assert_eq!(now, then);
    assert!(
        report["stack"]["weights"]["linear"].as_f64().is_some_and(|w| w > 0.0),
        "{report}"
    );
}

/// 1515879's checkpoint (format 6: the byte context models learned in
/// their own field, 200 SMS messages at `--bits 12 --compression always
/// --byte-lr off`), resumed by this build, which carries the stack's
/// added members by name: the member restores from the old field and
/// predicts byte for byte as 1515879 did (the same 21 messages as
/// b3d66f3's, whose e-mails add the byte LR in both builds), and its
/// weight in the stack is the one it learned.
#[test]
fn a_checkpoint_of_1515879_predicts_as_1515879_did() {
    let (now, then, report) = resume("1515879-compression.ckpt", "1515879");
    assert_eq!(now.lines().count(), 21);
    assert_eq!(now, then);
    let weight = report["stack"]["weights"]["compression"].as_f64();
    assert!(weight.is_some_and(|w| w > 0.5), "{report}");
}

/// Resumes the fixture checkpoint `ckpt` in a fresh directory, predicts
/// `{rev}-ask.jsonl` with it: this build's predictions, those `rev` made
/// (`{rev}-predictions.jsonl`), and `inspect --json` of the directory.
fn resume(ckpt: &str, rev: &str) -> (String, String, serde_json::Value) {
    let fixtures = data("checkpoints");
    let tmp = tempfile::tempdir().unwrap();
    let ck = tmp.path().join("ck");
    std::fs::create_dir(&ck).unwrap();
    std::fs::copy(fixtures.join(ckpt), ck.join("checkpoint-000000000001.ckpt")).unwrap();
    let out = tmp.path().join("predictions.jsonl");
    let status = Command::new(BIN)
        .args(["run", "--input"])
        .arg(fixtures.join(format!("{rev}-ask.jsonl")))
        .arg("--output")
        .arg(&out)
        .arg("--checkpoint-dir")
        .arg(&ck)
        .env("CLASSIFYD_LOG", "error")
        .status()
        .unwrap();
    assert!(status.success());
    let now = std::fs::read_to_string(&out).unwrap();
    let then = std::fs::read_to_string(fixtures.join(format!("{rev}-predictions.jsonl"))).unwrap();
    let inspect = Command::new(BIN)
        .args(["inspect", "--json", "--checkpoint-dir"])
        .arg(&ck)
        .output()
        .unwrap();
    (now, then, serde_json::from_slice(&inspect.stdout).unwrap())
}
