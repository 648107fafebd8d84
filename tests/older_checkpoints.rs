//! Checkpoints written by older builds restore and predict exactly as
//! those builds did: `tests/data/checkpoints/1fb279c-jsonl.ckpt`, written
//! by 1fb279c with the version 1 feature hash (xxh3; new models take
//! version 2), and the predictions 1fb279c made from it.

mod common;

use std::process::Command;

use common::*;

/// 1fb279c's checkpoint, its model resumed by this build, predicts the
/// same 18 messages byte for byte as 1fb279c did, and keeps hashing with
/// version 1 (the checkpoint's features win over the flags' default).
#[test]
fn a_checkpoint_of_1fb279c_predicts_as_1fb279c_did() {
    let fixtures = data("checkpoints");
    let tmp = tempfile::tempdir().unwrap();
    let ck = tmp.path().join("ck");
    std::fs::create_dir(&ck).unwrap();
    std::fs::copy(
        fixtures.join("1fb279c-jsonl.ckpt"),
        ck.join("checkpoint-000000000001.ckpt"),
    )
    .unwrap();
    let out = tmp.path().join("predictions.jsonl");
    let status = Command::new(BIN)
        .args(["run", "--input"])
        .arg(fixtures.join("1fb279c-ask.jsonl"))
        .arg("--output")
        .arg(&out)
        .arg("--checkpoint-dir")
        .arg(&ck)
        .env("CLASSIFYD_LOG", "error")
        .status()
        .unwrap();
    assert!(status.success());
    let now = std::fs::read_to_string(&out).unwrap();
    let then = std::fs::read_to_string(fixtures.join("1fb279c-predictions.jsonl")).unwrap();
    assert_eq!(now.lines().count(), 18);
    assert_eq!(now, then);
    let inspect = Command::new(BIN)
        .args(["inspect", "--json", "--checkpoint-dir"])
        .arg(&ck)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&inspect.stdout).unwrap();
    assert_eq!(report["features"]["hash"], "v1", "{report}");
}
