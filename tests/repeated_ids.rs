//! The late-label cache whatever the ids: `classifyd run` over 3 million
//! unlabeled messages under one repeated id (but the first, whose entry
//! waits for its label at the head of the cache) peaks within 10 % of the
//! same messages under distinct ids (which the entry cap bounds). Before,
//! the repeated ids queued up behind the waiting head: 153 MiB against
//! 87 (`scripts/repeated_ids.py` prints both).

use std::io::{BufWriter, Write};
use std::process::{Command, Stdio};

mod common;

use common::BIN;

const MESSAGES: usize = 3_000_000;

/// Peak RSS (MiB) of `classifyd run` over the messages on stdin.
// The child is reaped by wait4 below, which also gives its own peak RSS.
#[allow(clippy::zombie_processes)]
fn peak_rss_mib(repeated: bool) -> f64 {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["run", "--input", "-", "--output", "/dev/null", "--checkpoint-dir"])
        .arg(tmp.path().join("ck"))
        .env("CLASSIFYD_LOG", "warn")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let mut w = BufWriter::with_capacity(1 << 20, stdin);
        for i in 0..MESSAGES {
            let id = if repeated && i > 0 {
                "same-id".to_string()
            } else {
                format!("m-{i}")
            };
            writeln!(w, r#"{{"id": "{id}", "text": "see you at lunch tomorrow? {i}"}}"#).unwrap();
        }
    });
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: wait4 on our own child, with valid pointers to a status and
    // a rusage (plain data, all zeroes valid).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
    writer.join().unwrap();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status}"
    );
    usage.ru_maxrss as f64 / 1024.0
}

#[test]
fn a_repeated_id_takes_no_more_memory_than_distinct_ones() {
    let distinct = peak_rss_mib(false);
    let repeated = peak_rss_mib(true);
    eprintln!("{MESSAGES} messages: distinct ids {distinct:.1} MiB, one repeated id {repeated:.1} MiB");
    assert!(
        repeated <= 1.10 * distinct,
        "one repeated id {repeated:.1} MiB against distinct ids {distinct:.1} MiB"
    );
}
