//! The console's lessons and logins as its API answers them (issue 71;
//! docs/console.md): named reviewers teach under their names and a
//! request body names nobody; a forget of a message never labeled says so
//! and counts nothing; an undone label can be given again and is learned;
//! a label for a message the record does not hold is an error; a scanned
//! e-mail is named as spamd names it; behind a trusted proxy each client
//! waits for its own failed logins, and --learn-from reads the client's
//! address; the operator forgets a reporter (durable: a kill -9 right
//! after the answer loses nothing), a reviewer may not.

mod common;

use std::time::{Duration, Instant};

use common::mail::*;
use common::*;
use serde_json::{Value, json};

/// A console client: (status, answer) of `call` with `body`, as `secret`
/// from `forwarded` (an X-Forwarded-For value) when given.
struct Console {
    addr: String,
    agent: ureq::Agent,
}

impl Console {
    fn new(addr: &str) -> Self {
        Console {
            addr: addr.to_string(),
            agent: common::http::client(),
        }
    }

    fn call(&self, call: &str, body: Option<Value>, secret: Option<&str>, forwarded: Option<&str>) -> (u16, Value) {
        let url = format!("http://{}/api/{call}", self.addr);
        let answer = match body {
            Some(b) => with(self.agent.post(&url), secret, forwarded)
                .header("content-type", "application/json")
                .send(b.to_string()),
            None => with(self.agent.get(&url), secret, forwarded).call(),
        };
        let mut r = answer.expect("an answer");
        let code = r.status().as_u16();
        (
            code,
            serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap_or(Value::Null),
        )
    }

    fn teach(&self, body: Value, secret: Option<&str>) -> (u16, Value) {
        self.call("teach", Some(body), secret, None)
    }
}

/// `r` with `secret` and `forwarded` as headers.
fn with<B>(mut r: ureq::RequestBuilder<B>, secret: Option<&str>, forwarded: Option<&str>) -> ureq::RequestBuilder<B> {
    if let Some(s) = secret {
        r = r.header("authorization", format!("Bearer {s}"));
    }
    if let Some(f) = forwarded {
        r = r.header("x-forwarded-for", f);
    }
    r
}

/// A daemon that learned 200 e-mails, its console on loopback with the
/// named reviewers of `users` (a users file's text) and the operator's
/// learning secret.
struct Reviewed {
    addr: String,
    flags: Vec<String>,
    learned: Learned,
    /// Holds the users file.
    _users: tempfile::TempDir,
}

fn with_reviewers(users: &str, learn: &str) -> Reviewed {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    std::fs::write(&path, users).unwrap();
    let addr = local_addr();
    let path = path.to_str().unwrap();
    let flags = [
        "--console-addr",
        &addr,
        "--console-users",
        path,
        "--learn-password",
        learn,
    ];
    let learned = learned(Some(200), &flags);
    Reviewed {
        flags: flags.map(str::to_string).to_vec(),
        addr,
        learned,
        _users: dir,
    }
}

fn inspect(dir: &std::path::Path) -> Value {
    let out = std::process::Command::new(BIN)
        .args(["inspect", "--json", "--checkpoint-dir"])
        .arg(dir)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Two named reviewers and the single learning secret teach; each lesson
/// carries its login's reporter (History and `inspect` say so); a read
/// reviewer is refused; a body that names a reporter is refused.
#[test]
fn named_reviewers_teach_under_their_names() {
    let users = "# reviewers\nann teach ann-secret-1\nbob teach bob-secret-2\ncat read cat-secret-3\n";
    let Reviewed { addr, learned, .. } = with_reviewers(users, "learn-0");
    let console = Console::new(&addr);
    let (_, who) = console.call("access", None, Some("ann-secret-1"), None);
    assert_eq!(
        (who["name"].as_str(), who["role"].as_str()),
        (Some("ann"), Some("teach")),
        "{who}"
    );
    for (i, secret) in ["ann-secret-1", "bob-secret-2", "learn-0"].iter().enumerate() {
        let text = format!("win a prize number {i} now");
        let scan = json!({"id": format!("n-{i}"), "text": text});
        assert_eq!(console.call("scan", Some(scan), Some(secret), None).0, 200);
        let body = json!({"id": format!("n-{i}"), "label": "spam", "text": text});
        let (code, said) = console.teach(body, Some(secret));
        assert_eq!(code, 200, "{said}");
    }
    let (code, _) = console.teach(
        json!({"id": "n-9", "label": "spam", "text": "x y"}),
        Some("cat-secret-3"),
    );
    assert_eq!(code, 403, "a read reviewer may not teach");
    let spoof = json!({"id": "n-8", "label": "spam", "text": "x y", "reporter": "ann"});
    let (code, said) = console.teach(spoof, Some("bob-secret-2"));
    assert_eq!(code, 400, "a body names no reporter: {said}");
    let (_, history) = console.call("history", Some(json!({"q": "prize"})), Some("learn-0"), None);
    let by: Vec<(String, String)> = (history["entries"].as_array().unwrap().iter())
        .map(|e| {
            (
                e["id"].as_str().unwrap().into(),
                e["taught_by"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    for (id, name) in [("n-0", "ann"), ("n-1", "bob"), ("n-2", "console")] {
        assert!(by.contains(&(id.into(), name.into())), "{id} by {name} in {by:?}");
    }
    let dir = learned.tmp.path().join("ckpt");
    learned.daemon.stop();
    let reporters: Vec<String> = (inspect(&dir)["feedback"]["least_trusted"].as_array().unwrap().iter())
        .map(|r| r["reporter"].as_str().unwrap().to_string())
        .collect();
    for name in ["ann", "bob", "console"] {
        assert!(reporters.contains(&name.to_string()), "{name} in {reporters:?}");
    }
}

/// A users file that cannot be read stops the start, naming the line.
#[test]
fn a_bad_users_file_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let users = tmp.path().join("users");
    std::fs::write(&users, "ann teach s1\nbob admin s2\n").unwrap();
    let out = std::process::Command::new(BIN)
        .args([
            "run",
            "--input",
            "/dev/null",
            "--console-addr",
            &local_addr(),
            "--console-users",
        ])
        .arg(&users)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("line 2") && said.contains("read or teach"), "{said}");
}

/// Labels are facts, one message at a time: a forget of what was never
/// labeled says so; undo then the same decision again is learned; the same
/// label once more is unchanged; a label for an id the record never held
/// is an error, not "already".
#[test]
fn an_undone_label_is_learned_when_given_again() {
    let addr = local_addr();
    let learned = learned(Some(200), &["--console-addr", &addr]);
    let console = Console::new(&addr);
    let (code, scanned) = console.call(
        "scan",
        Some(json!({"text": "are we still on for dinner at eight"})),
        None,
        None,
    );
    assert_eq!(code, 200, "{scanned}");
    let id = scanned["id"].as_str().unwrap().to_string();
    let by_id = |label: Option<&str>| match label {
        Some(l) => console.teach(json!({"id": id, "label": l}), None),
        None => console.teach(json!({"id": id, "forget": true}), None),
    };
    let (code, never) = by_id(None);
    assert_eq!(
        (code, &never["changed"], &never["labeled"]),
        (200, &json!(false), &json!(false)),
        "{never}"
    );
    for (step, label, changed) in [
        ("label", Some("spam"), true),
        ("undo", None, true),
        ("the same decision again", Some("spam"), true),
        ("once more", Some("spam"), false),
    ] {
        let (code, said) = by_id(label);
        assert_eq!(
            (code, said["changed"].as_bool()),
            (200, Some(changed)),
            "{step}: {said}"
        );
    }
    let (code, said) = console.teach(json!({"id": "never-seen-here", "label": "ham"}), None);
    assert_eq!(code, 404, "{said}");
    assert!(said["error"].as_str().unwrap().contains("does not hold"), "{said}");
    let dir = learned.tmp.path().join("ckpt");
    learned.daemon.stop();
    let feedback = &inspect(&dir)["feedback"];
    assert_eq!(
        feedback["labels_forgotten"], 1,
        "the forget of nothing counts nothing: {feedback}"
    );
}

/// A scanned e-mail is named by its Message-ID (else a digest of its
/// bytes), as spamd and rspamd name it: one message, one lesson.
#[test]
fn a_scanned_email_is_named_as_spamd_names_it() {
    let addr = local_addr();
    let _learned = learned(Some(100), &["--console-addr", &addr]);
    let console = Console::new(&addr);
    let with = "Message-ID: <k1@example.org>\r\nSubject: lunch\r\n\r\nsee you at noon";
    let without = "Subject: lunch\r\n\r\nsee you at noon";
    let id = |email: &str| console.call("scan", Some(json!({"email": email})), None, None).1["id"].clone();
    assert_eq!(id(with), json!("k1@example.org"));
    let digest = id(without);
    assert!(digest.as_str().unwrap().starts_with("mail-"), "{digest}");
    assert_eq!(digest, id(without), "the same bytes, the same name");
}

/// Behind a trusted proxy, failed logins slow down the client that made
/// them, not everyone behind the proxy; without --trusted-proxy the header
/// is not believed. --learn-from reads the client's address too.
#[test]
fn behind_a_trusted_proxy_each_client_waits_for_its_own_failures() {
    for trusted in [true, false] {
        let addr = local_addr();
        let mut flags = vec!["--console-addr", addr.as_str(), "--console-password", "read-1"];
        flags.extend(["--learn-from", "203.0.113.0/24"]);
        if trusted {
            flags.extend(["--trusted-proxy", "127.0.0.1/32"]);
        }
        let learned = learned(Some(100), &flags);
        let console = Console::new(&addr);
        for _ in 0..3 {
            let (code, _) = console.call("status", None, Some("wrong"), Some("198.51.100.7"));
            assert_eq!(code, 401);
        }
        let timed = |from: &str| {
            let at = Instant::now();
            let (code, _) = console.call("status", None, Some("read-1"), Some(from));
            (code, at.elapsed())
        };
        let (code, other) = timed("198.51.100.8");
        assert_eq!(code, 200);
        let (_, guesser) = timed("198.51.100.7");
        if trusted {
            assert!(other < Duration::from_millis(900), "another client waited {other:?}");
            assert!(guesser >= Duration::from_millis(900), "the guesser waited {guesser:?}");
        } else {
            assert!(
                other >= Duration::from_millis(900),
                "one peer, one slow-down: {other:?}"
            );
        }
        let lesson = json!({"id": "p-1", "label": "spam", "text": "win cash now"});
        let (allowed, _) = console.call("teach", Some(lesson.clone()), None, Some("203.0.113.5"));
        let (refused, _) = console.call("teach", Some(lesson), None, Some("198.51.100.9"));
        if trusted {
            assert_eq!((allowed, refused), (200, 401), "--learn-from reads the client");
        } else {
            assert_eq!((allowed, refused), (401, 401), "loopback is not in --learn-from");
        }
        learned.daemon.stop();
    }
}

/// The Reporters view lists a reviewer with its labels in the record; the
/// operator (the learning secret) forgets that reviewer, a reviewer may
/// not; the forget is durable before it is answered: killed right after,
/// the restarted daemon's model is one that never had those labels.
#[test]
fn the_operator_forgets_a_reporter_and_a_crash_keeps_it() {
    let Reviewed {
        addr,
        flags,
        learned,
        _users,
    } = with_reviewers("ann teach ann-secret-1\n", "op-0");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let dir = learned.tmp.path().join("ckpt");
    let console = Console::new(&addr);
    let texts = [
        "win a car today",
        "claim your prize by text",
        "free entry for a cash draw",
    ];
    for (i, text) in texts.iter().enumerate() {
        let lesson = json!({"id": format!("a-{i}"), "label": "spam", "text": text});
        assert_eq!(console.teach(lesson, Some("ann-secret-1")).0, 200);
    }
    // ann's (labels given, labels in the record), once the status lists ann.
    let ann = || {
        let (code, r) = console.call("reporters", None, Some("op-0"), None);
        (code == 200).then_some(())?;
        (r["reporters"].as_array()?.iter())
            .find(|r| r["name"] == "ann")
            .map(|r| (r["labels"].as_u64().unwrap(), r["in_record"].as_u64().unwrap()))
    };
    wait_for("ann's lessons in the status", Duration::from_secs(10), || {
        ann() == Some((3, 3))
    });
    let forget = json!({"reporter": "ann"});
    let (code, _) = console.call("forget_reporter", Some(forget.clone()), Some("ann-secret-1"), None);
    assert_eq!(code, 403, "a reviewer may not forget a reporter");
    let (code, said) = console.call("forget_reporter", Some(forget.clone()), Some("op-0"), None);
    assert_eq!((code, &said["changed"]), (200, &json!(true)), "{said}");
    learned.daemon.crash();
    let restarted = spawn_mail(&learned.tmp.path().join("in.jsonl"), &dir, &flags);
    wait_listening(&addr);
    wait_for("the forget replayed", Duration::from_secs(20), || {
        ann().is_some_and(|(n, held)| n >= 3 && held == 0)
    });
    let (_, again) = console.call("forget_reporter", Some(forget), Some("op-0"), None);
    assert_eq!(again["changed"], json!(false), "nothing of ann's is left: {again}");
    restarted.stop();
    let feedback = &inspect(&dir)["feedback"];
    assert_eq!(feedback["labels_forgotten"], 3, "{feedback}");
}
