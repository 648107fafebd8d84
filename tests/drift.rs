//! Drift detection on the progressive errors (`eval --json`'s
//! `drift_detections`, the Page-Hinkley test of src/eval/drift.rs): an
//! abrupt change is found within 500 labeled examples, an unchanged stream
//! raises at most one alarm. On the SMS slice in the repo always; on the
//! whole shared streams (SMS with its labels swapped half-way, SpamAssassin
//! followed by SMS, both unchanged), which ../shared/data must hold.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::{BIN, sms_lines};

/// The progressive drift detections of `eval` over `lines`.
fn detections(lines: &[String], dir: &Path) -> Vec<u64> {
    let input = dir.join("stream.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let out = Command::new(BIN)
        .args(["eval", "--json", "--passes", "1", "--input"])
        .arg(&input)
        .env("CLASSIFYD_LOG", "error")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["drift_detections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

/// `lines` with spam and ham swapped from line `from` on.
fn swapped(lines: &[String], from: usize) -> Vec<String> {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if i >= from
                && let Some(label) = v.get("label").and_then(|l| l.as_str())
            {
                v["label"] = if label == "spam" { "ham" } else { "spam" }.into();
            }
            v.to_string()
        })
        .collect()
}

/// Labeled examples among the first `n` lines.
fn labeled(lines: &[String], n: usize) -> u64 {
    lines[..n].iter().filter(|l| l.contains("\"label\"")).count() as u64
}

/// Asserts a detection within 500 labeled examples after `change` of them.
fn found_soon(found: &[u64], change: u64, what: &str) {
    let after: Vec<u64> = found.iter().filter(|&&d| d > change).map(|d| d - change).collect();
    assert!(
        after.first().is_some_and(|&d| d <= 500),
        "{what}: detections {found:?}, change after {change} labeled examples"
    );
    assert!(
        found.iter().all(|&d| d > change),
        "{what}: a detection before the change, {found:?}"
    );
}

#[test]
fn the_sms_slice_swapped_half_way_is_found_and_unchanged_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let lines = sms_lines();
    assert!(detections(&lines, tmp.path()).len() <= 1);
    let found = detections(&swapped(&lines, 500), tmp.path());
    found_soon(&found, labeled(&lines, 500), "SMS slice, labels swapped at line 500");
}

fn shared(name: &str) -> Option<Vec<String>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(name)
        .join("stream.jsonl");
    let text = std::fs::read_to_string(&path).ok()?;
    Some(
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(String::from)
            .collect(),
    )
}

#[test]
fn the_shared_streams_changed_are_found_and_unchanged_are_not() {
    // Without the shared streams this test fails: it checks nothing else.
    let (sms, sa) = (shared("sms_spam_collection"), shared("spamassassin"));
    let (Some(sms), Some(sa)) = (sms, sa) else {
        panic!("../shared/data (SMS and SpamAssassin streams) is needed beside the repository");
    };
    let tmp = tempfile::tempdir().unwrap();
    for (name, lines) in [("SMS", &sms), ("SpamAssassin", &sa)] {
        let found = detections(lines, tmp.path());
        assert!(found.len() <= 1, "{name} unchanged: {found:?}");
    }
    let half = sms.len() / 2;
    found_soon(
        &detections(&swapped(&sms, half), tmp.path()),
        labeled(&sms, half),
        "SMS swapped half-way",
    );
    let both: Vec<String> = sa.iter().chain(&sms).cloned().collect();
    found_soon(
        &detections(&both, tmp.path()),
        labeled(&sa, sa.len()),
        "SpamAssassin then SMS",
    );
}
