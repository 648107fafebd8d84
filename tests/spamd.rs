//! The spamd protocol (`--spamd-addr`) with SpamAssassin's own client,
//! spamc (Debian's `spamc`, which `.ci/run` installs): verdicts and points
//! as the HTTP endpoint's predictions say for the same message, symbols,
//! reports, the message processed, learning and forgetting with
//! `spamc -L`, TELL refused from an address not allowed, and bad requests
//! answered without harm.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::mail::*;

/// spamc with `args` against `addr`, the message on its stdin: (stdout, exit code).
fn spamc(addr: &str, args: &[&str], message: &[u8]) -> (String, i32) {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let args = [&["-d", host, "-p", port, "-t", "30"], args].concat();
    let (out, _, code) = client("spamc", "spamc", &args, message);
    (out, code)
}

/// `score/threshold` as spamc -c prints it.
fn points(out: &str) -> (f32, f32) {
    let (p, t) = out
        .trim()
        .split_once('/')
        .unwrap_or_else(|| panic!("spamc said {out:?}"));
    (p.parse().unwrap(), t.parse().unwrap())
}

/// The margin a REPORT states, unrounded.
fn margin(report: &str) -> f32 {
    let at = report
        .find("(margin ")
        .unwrap_or_else(|| panic!("no margin in {report}"))
        + 8;
    report[at..].split([',', ')']).next().unwrap().parse().unwrap()
}

/// Learned from two thirds of the raw messages, the daemon answers spamc
/// for the rest as a spam filter (the verdict in the exit code, points
/// over the required score exactly for spam), the same margins as the HTTP
/// endpoint's predictions, symbols, and the message processed.
#[test]
fn spamc_checks_a_message_as_the_model_predicts_it() {
    let (addr, http) = (local_addr(), local_addr());
    let Learned {
        daemon,
        held,
        tmp: _tmp,
    } = learned(None, &["--spamd-addr", &addr, "--http-addr", &http]);
    let agent = common::http::client();
    let mut right = 0;
    for (label, raw) in held.iter().take(120) {
        // spamc names a user (its own unix user unless -u): the HTTP
        // request names the same one.
        let (out, code) = spamc(&addr, &["-c", "-u", "tester"], raw);
        let (p, required) = points(&out);
        assert_eq!(required, 5.0);
        let spam = code == 1;
        // spamc prints one decimal: 4.96 reads 5.0.
        assert!(
            spam == (p >= 5.0) || (p - 5.0).abs() < 0.051,
            "exit code {code} with {out}"
        );
        right += usize::from(spam == (label == "spam"));
        let (report, _) = spamc(&addr, &["-R", "-u", "tester"], raw);
        let asked = serde_json::json!({"email_base64": b64(raw), "user": "tester"}).to_string();
        let (code, answer) = common::http::classify(&agent, &http, "", &asked);
        assert_eq!(code, 200, "{answer}");
        let want = answer["margins"]["spam"].as_f64().unwrap() as f32;
        assert!((margin(&report) - want).abs() < 1e-4, "{report} against {answer}");
        assert_eq!(answer["label"] == "spam", spam, "{answer}");
    }
    assert!(right >= 110, "{right} of 120 held-out messages right through spamc");
    let (spam_raw, ham_raw) = (
        &held.iter().find(|(l, _)| l == "spam").unwrap().1,
        &held.iter().find(|(l, _)| l == "ham").unwrap().1,
    );
    let (symbols, _) = spamc(&addr, &["-y"], ham_raw);
    assert!(
        symbols.trim() == "CLASSIFYD_HAM" || symbols.trim() == "CLASSIFYD_SPAM",
        "{symbols}"
    );
    let (processed, _) = spamc(&addr, &[], spam_raw);
    assert!(processed.contains("X-Spam-Status: "), "{processed}");
    assert!(
        processed.ends_with(&*String::from_utf8_lossy(spam_raw)),
        "the message follows whole"
    );
    // HEADERS sends the new head only; spamc puts the body back after it.
    let (headers, _) = spamc(&addr, &["--headers"], spam_raw);
    assert_eq!(headers, processed);
    daemon.stop();
}

/// `spamc -L spam` teaches the model (points rise), the same again is no
/// update ("already learned"), `-L forget` takes it back, and a TELL from
/// an address `--learn-from` leaves out is refused.
#[test]
fn spamc_learns_and_forgets_and_only_from_allowed_addresses() {
    let addr = local_addr();
    let Learned {
        daemon,
        held,
        tmp: _tmp,
    } = learned(Some(400), &["--spamd-addr", &addr]);
    let ham = &held.iter().find(|(l, _)| l == "ham").unwrap().1;
    let before = points(&spamc(&addr, &["-c"], ham).0).0;
    assert_eq!(
        spamc(&addr, &["-L", "spam"], ham).0.trim(),
        "Message successfully un/learned"
    );
    let taught = once_changed(before, || points(&spamc(&addr, &["-c"], ham).0).0);
    assert!(taught > before, "learned as spam: {before} -> {taught}");
    assert_eq!(
        spamc(&addr, &["-L", "spam"], ham).0.trim(),
        "Message was already un/learned"
    );
    assert_eq!(
        spamc(&addr, &["-L", "forget"], ham).0.trim(),
        "Message successfully un/learned"
    );
    let again = spamc(&addr, &["-L", "forget"], ham).0;
    assert_eq!(
        again.trim(),
        "Message was already un/learned",
        "a second forget finds nothing"
    );
    let after = once_changed(taught, || points(&spamc(&addr, &["-c"], ham).0).0);
    assert!(after < taught, "forgotten: {taught} -> {after}");
    // A relabel: spamc -C report (spam, local and remote), then revoke (ham).
    assert!(spamc(&addr, &["-C", "report"], ham).0.contains("successfully reported"));
    assert!(
        spamc(&addr, &["-C", "revoke"], ham)
            .0
            .contains("successfully reported/revoked")
    );
    daemon.stop();

    let addr = local_addr();
    let Learned { daemon, tmp: _tmp2, .. } = learned(Some(400), &["--spamd-addr", &addr, "--learn-from", "10.0.0.0/8"]);
    let before = points(&spamc(&addr, &["-c"], ham).0).0;
    // A refused lesson is a failure to spamc: no status line (spamc
    // would call any status "already learned" and exit 0), so it exits 74.
    let (said, code) = spamc(&addr, &["-L", "spam"], ham);
    assert!(!said.contains("successfully") && !said.contains("already"), "{said}");
    assert_eq!(code, 74, "{said}");
    assert_eq!(spamc(&addr, &["-x", "-C", "report"], ham).1, 74);
    let request = [
        format!(
            "TELL SPAMC/1.5\r\nMessage-class: spam\r\nSet: local\r\nContent-length: {}\r\n\r\n",
            ham.len()
        )
        .into_bytes(),
        ham.clone(),
    ]
    .concat();
    let answer = ask(&addr, &request);
    assert_eq!(answer, "", "closed without a status line");
    assert_eq!(points(&spamc(&addr, &["-c"], ham).0).0, before, "nothing learned");
    daemon.stop();
}

/// A lesson answered "learned" survives a crash before the next
/// checkpoint: it was in the checkpoint directory's lessons log, synced,
/// before the answer, and the restarted daemon learns it again (once: the
/// same lesson again is "already learned"), scoring as the crashed one did.
#[test]
fn a_lesson_answered_survives_a_kill_9() {
    let addr = local_addr();
    let learned = learned(Some(400), &["--spamd-addr", &addr]);
    let ham = &learned.held.iter().find(|(l, _)| l == "ham").unwrap().1;
    let before = points(&spamc(&addr, &["-c"], ham).0).0;
    assert_eq!(
        spamc(&addr, &["-L", "spam"], ham).0.trim(),
        "Message successfully un/learned"
    );
    let before_margin = margin(&spamc(&addr, &["-R"], ham).0);
    let taught = once_changed(before_margin, || margin(&spamc(&addr, &["-R"], ham).0));
    assert!(taught > before - 5.0, "learned as spam: {taught}");
    learned.daemon.crash();
    let (input, dir) = (learned.tmp.path().join("in.jsonl"), learned.tmp.path().join("ckpt"));
    let daemon = spawn_mail(&input, &dir, &["--spamd-addr", &addr]);
    wait_listening(&addr);
    let after = margin(&spamc(&addr, &["-R"], ham).0);
    assert!(
        (after - taught).abs() < 1e-4,
        "the lesson is in the restarted model: {taught} against {after}"
    );
    assert_eq!(
        spamc(&addr, &["-L", "spam"], ham).0.trim(),
        "Message was already un/learned",
        "learned once, and known"
    );
    // Stopped, the restarted daemon (which read no new line) checkpoints
    // what it learned again: the 400 lines and the lesson.
    daemon.stop();
    let last = common::newest_checkpoint(&dir).expect("a checkpoint");
    assert_eq!(last.model.map(|m| m.version), Some(401));
}

/// Bad requests get a spamd error status (or a close), and the endpoint
/// goes on: garbage, an unknown command, a Content-length over the
/// largest message, one that lies short, a compressed body, a client too
/// slow to finish, a TELL without a class, a flood of connections.
#[test]
fn bad_requests_are_answered_and_harm_nothing() {
    let (addr, metrics) = (local_addr(), local_addr());
    let flags = [
        "--spamd-addr",
        &addr,
        "--mail-timeout-ms",
        "1500",
        "--max-message-bytes",
        "200000",
        "--mail-max-connections",
        "4",
        "--metrics-addr",
        &metrics,
    ];
    let Learned {
        daemon,
        held,
        tmp: _tmp,
    } = learned(Some(200), &flags);
    let status = |request: &[u8]| ask(&addr, request).lines().next().unwrap_or("").to_string();
    assert!(status(b"\x00\x01garbage\r\n\r\n").starts_with("SPAMD/1.1 76 EX_PROTOCOL"));
    assert!(status(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").starts_with("SPAMD/1.1 76 EX_PROTOCOL unknown command"));
    assert!(status(b"CHECK SPAMC/1.5\r\n\r\n").contains("needs its Content-length"));
    assert!(status(b"CHECK SPAMC/1.5\r\nContent-length: 999999999\r\n\r\n").starts_with("SPAMD/1.1 65 EX_DATAERR"));
    assert!(
        status(b"CHECK SPAMC/1.5\r\nContent-length: 500\r\n\r\nSubject: short\r\n\r\nx").starts_with("SPAMD/1.1 76")
    );
    assert!(status(b"CHECK SPAMC/1.5\r\nCompress: zlib\r\nContent-length: 3\r\n\r\nabc").contains("without -z"));
    // A refused TELL: closed without a status line (spamc exits 74).
    assert_eq!(
        status(b"TELL SPAMC/1.5\r\nSet: local\r\nContent-length: 3\r\n\r\nabc"),
        ""
    );
    assert!(
        status(b"CHECK SPAMC/1.5\r\nContent-length: 9\r\n\r\nno header")
            .starts_with("SPAMD/1.1 65 EX_DATAERR bad_email")
    );
    let huge = vec![b'A'; 20_000];
    assert!(status(&huge).starts_with("SPAMD/1.1 76 EX_PROTOCOL a request head over"));
    // A slow client: half a head, then silence past the timeout.
    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.write_all(b"CHECK SPAMC/1.5\r\nContent-le").unwrap();
    let mut answer = String::new();
    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = slow.read_to_string(&mut answer);
    assert!(answer.starts_with("SPAMD/1.1 79 EX_TIMEOUT"), "{answer}");
    // A flood: connections past --mail-max-connections are closed at once
    // and counted; once the silent ones time out, the endpoint serves again.
    let idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut extra = TcpStream::connect(&addr).unwrap();
    extra.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let _ = extra.read_to_end(&mut got);
    assert!(got.is_empty(), "closed unserved: {got:?}");
    let refused = "classifyd_mail_refused_total{protocol=\"spamd\",reason=\"too_many_connections\"} 1";
    assert!(common::http_get(&metrics, "/metrics").is_some_and(|(_, body)| body.contains(refused)));
    drop(idle);
    // And a good request after all of them.
    std::thread::sleep(Duration::from_millis(1600));
    let (out, _) = spamc(&addr, &["-c"], &held[0].1);
    assert!(points(&out).1 == 5.0, "{out}");
    daemon.stop();
}
