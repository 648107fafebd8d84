//! The broker goes away for 30 s mid-stream (SIGSTOP, then SIGCONT: the test
//! broker keeps data in memory, so it is paused rather than restarted). The
//! daemon waits and reconnects: nothing lost, nothing learned twice.
//!
//! Its own test binary, so pausing the broker cannot disturb other tests.

mod common;

use std::time::Duration;

use common::*;

fn broker_pid() -> i32 {
    std::env::var("KAFKA_BROKER_PID")
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .expect("KAFKA_BROKER_PID is not set: run ./scripts/test.sh, which starts the broker and exports it")
}

#[test]
fn broker_paused_for_30_seconds_mid_stream() {
    let pid = broker_pid();
    let topics = Topics::create(1);
    let lines = with_requests(&sms_lines());
    let msgs = lines_as_messages(&lines);
    let (first, second) = msgs.split_at(600);
    produce(&topics.input, Some(0), first);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let daemon = spawn_daemon(&topics, &unique("g"), &dir, &["--checkpoint-every-updates", "50"]);
    wait_for("progress", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.input) >= 100)
    });
    // SAFETY: kill(2) on the broker process this test's script started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_secs(30));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    produce(&topics.input, Some(0), second);
    wait_for("everything consumed after the outage", Duration::from_secs(180), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.input) == lines.len() as u64)
    });
    terminate(daemon);

    // Nothing learned twice or skipped: the model equals a straight run's.
    let want = reference_checkpoint(&lines, tmp.path());
    let got = newest_checkpoint(&dir).unwrap();
    assert_eq!(got.model, want.model);
    // Nothing lost: every request has a prediction (at least once).
    let requests: Vec<String> = msgs
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 10 == 9)
        .map(|(_, m)| m.0.clone())
        .collect();
    let preds = consume_all(&topics.output, requests.len(), Duration::from_secs(60));
    let ids: std::collections::HashSet<String> = preds
        .iter()
        .map(|(k, _, _)| String::from_utf8_lossy(k).into_owned())
        .collect();
    for r in &requests {
        assert!(ids.contains(r), "no prediction for {r}");
    }
}
