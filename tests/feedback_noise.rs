//! Feedback you cannot trust, on the shared SMS stream (`eval
//! --feedback-noise`: 10 % of the labels the learner sees flipped, the
//! metrics on the stream's own labels): the default weighing of labels
//! keeps the clean run within 5 % of the errors of learning every label in
//! full (`--contradiction-margin 0`), and cuts the errors the noise adds
//! by more than half (docs/feedback.md has the figures).

use std::process::Command;

mod common;

use common::BIN;

/// Progressive errors of `eval` on the shared SMS stream with `flags`.
fn errors(flags: &[&str]) -> u64 {
    let input =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/sms_spam_collection/stream.jsonl");
    assert!(input.exists(), "{} is needed beside the repository", input.display());
    let out = Command::new(BIN)
        .args(["eval", "--json", "--input"])
        .arg(&input)
        .args(flags)
        .env("CLASSIFYD_LOG", "error")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = v["examples"].as_f64().unwrap();
    ((1.0 - v["progressive"]["accuracy"].as_f64().unwrap()) * n).round() as u64
}

#[test]
fn contradiction_weighting_halves_the_damage_of_flipped_labels() {
    let noisy = ["--feedback-noise", "0.1", "--seed", "1"];
    let in_full = ["--contradiction-margin", "0"];
    let (clean, clean_weighed) = (errors(&in_full), errors(&[]));
    let (flipped, flipped_weighed) = (errors(&[&noisy[..], &in_full[..]].concat()), errors(&noisy));
    eprintln!("clean {clean} -> {clean_weighed}; 10 % flipped {flipped} -> {flipped_weighed}");
    assert!(
        clean_weighed as f64 <= clean as f64 * 1.05,
        "clean {clean} -> {clean_weighed}"
    );
    // The damage is the errors noise adds to the clean run's. The stack
    // (issue 61) alone halved it (SMS: 245 -> 111 errors more); the
    // weighing must still halve what is left.
    let (damage, damage_weighed) = (
        flipped.saturating_sub(clean),
        flipped_weighed.saturating_sub(clean_weighed),
    );
    assert!(damage > clean, "the noise did nothing: {flipped} against {clean}");
    assert!(2 * damage_weighed < damage, "flipped {flipped} -> {flipped_weighed}");
}
