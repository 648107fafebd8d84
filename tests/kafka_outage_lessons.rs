//! A predictor's lessons after a broker stall (issue 70): the broker is
//! paused 35 s (SIGSTOP, then SIGCONT), then lessons are taught to a
//! predictor over spamc. Each lesson is either learned by the learner or
//! refused to its client (spamc exits non-zero), never answered and lost;
//! the predictor's forwarding recovers by itself (its producer built anew
//! when the broker or the library gave it up), so a lesson taught after
//! the stall is learned. A lesson in flight through the stall is the one
//! a refusal cannot be sure of: its delivery timed out, yet the paused
//! broker may hold it and write it once resumed. It is refused, so its
//! client sends it again, and a label is a fact about its message: the
//! same label again changes nothing (docs/reliability.md).
//!
//! Its own test binary, so pausing the broker cannot disturb other tests.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

fn broker_pid() -> i32 {
    std::env::var("KAFKA_BROKER_PID")
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .expect("KAFKA_BROKER_PID is not set: run ./scripts/test.sh, which starts the broker and exports it")
}

/// The learner's count of labels learned, as its newest checkpoint says.
fn learned(dir: &Path) -> u64 {
    newest_checkpoint(dir).map_or(0, |c| c.pipeline.unwrap().counters.unwrap().learned)
}

/// spamc -L `label` of message `n` to `addr`: its exit code.
fn teach(addr: &str, n: usize, label: &str) -> i32 {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let raw = format!("Message-ID: <stall-{n}@test>\nSubject: lesson {n}\n\nlesson number {n} after a stall\n");
    let args = ["-d", host, "-p", port, "-t", "60", "-L", label];
    common::mail::client("spamc", "spamc", &args, raw.as_bytes()).2
}

#[test]
fn a_predictors_lessons_after_a_broker_stall_are_learned_or_refused() {
    let pid = broker_pid();
    let d = common::deployment::Deployment::new();
    let dir = d.dir.clone();
    let spamd = format!("127.0.0.1:{}", free_port());
    let learner = d.learner(&[]);
    let predictor = d.predictor(&["--spamd-addr", &spamd]);
    produce(&d.topics.input, None, &lines_as_messages(&sms_lines()[..200]));
    wait_for("the labels learned", Duration::from_secs(120), || learned(&dir) >= 200);
    common::mail::wait_listening(&spamd);
    assert_eq!(teach(&spamd, 0, "spam"), 0, "a lesson before the stall");
    wait_for("the first lesson learned", Duration::from_secs(60), || {
        learned(&dir) >= 201
    });

    // SAFETY: kill(2) on the broker process this test's script started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    // A lesson in flight through the stall: its delivery times out (30 s)
    // and it is refused, or it lands once the broker is back.
    let during = {
        let spamd = spamd.clone();
        std::thread::spawn(move || teach(&spamd, 1000, "spam"))
    };
    std::thread::sleep(Duration::from_secs(35));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let during_acknowledged = during.join().unwrap() == 0;
    let mut acknowledged = 1 + u64::from(during_acknowledged);

    // Lessons after the stall, one every few seconds for a minute: each is
    // learned or refused, and forwarding comes back.
    let started = Instant::now();
    let first_after = acknowledged;
    let mut refused_after_recovery = 0;
    for n in 1.. {
        let code = teach(&spamd, n, if n % 2 == 0 { "ham" } else { "spam" });
        match code {
            0 => acknowledged += 1,
            _ if acknowledged > first_after => refused_after_recovery += 1,
            _ => {}
        }
        if acknowledged >= first_after + 3 || started.elapsed() > Duration::from_secs(90) {
            break;
        }
        std::thread::sleep(Duration::from_secs(3));
    }
    assert!(
        acknowledged >= first_after + 3,
        "forwarding came back: {} lessons acknowledged after the stall",
        acknowledged - first_after
    );
    assert_eq!(refused_after_recovery, 0, "once it forwards again, it goes on");
    wait_for("every acknowledged lesson learned", Duration::from_secs(120), || {
        learned(&dir) >= 200 + acknowledged
    });
    terminate(predictor);
    terminate(learner);
    // Each acknowledged lesson once; no refused one, but the one in flight
    // through the stall, which may have landed all the same.
    let got = learned(&dir) - 200;
    let may_have_landed = u64::from(!during_acknowledged);
    assert!(
        (acknowledged..=acknowledged + may_have_landed).contains(&got),
        "{got} lessons learned, {acknowledged} acknowledged"
    );
}
