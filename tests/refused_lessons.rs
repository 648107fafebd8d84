//! A lesson is learned exactly once, or its sender is told it was not
//! (issue 70, docs/reliability.md's fault table): each reason a lesson is
//! refused, as Debian's spamc and rspamc report it (a non-zero exit);
//! an append to the lessons log that fails part-way (a file size limit put
//! on the running daemon: the write stops mid-line), then more lessons,
//! then `kill -9` and a restart that keeps every acknowledged lesson and
//! none of the refused ones.

mod common;

use std::path::Path;

use common::mail::*;
use common::*;

/// spamc with `args` against `addr`: (stdout, exit code).
fn spamc(addr: &str, args: &[&str], message: &[u8]) -> (String, i32) {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let args = [&["-d", host, "-p", port, "-t", "30"], args].concat();
    let (out, _, code) = client("spamc", "spamc", &args, message);
    (out, code)
}

/// rspamc with `args` against `addr`: (stdout and stderr, exit code).
fn rspamc(addr: &str, args: &[&str], message: &[u8]) -> (String, i32) {
    let args = [&["-h", addr, "-t", "30"], args].concat();
    let (out, err, code) = client("rspamc", "rspamd", &args, message);
    (out + &err, code)
}

/// The lessons log's files in `dir` and their total size.
fn lessons_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("lessons-"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// A message of its own (its Message-ID names it).
fn message(n: usize, body: &str) -> Vec<u8> {
    format!("Message-ID: <refused-{n}@test>\nSubject: lesson {n}\n\n{body} {n}\n").into_bytes()
}

const SUCCESS: &str = "Message successfully un/learned";
const ALREADY: &str = "Message was already un/learned";

/// Every refusal is a non-zero exit of the real clients; a lesson refused
/// because the log's append failed part-way leaves the log whole, and
/// after kill -9 the restarted daemon holds exactly the acknowledged
/// lessons.
#[test]
fn refused_lessons_fail_in_the_clients_and_a_failed_append_loses_nothing() {
    let (spamd, controller) = (local_addr(), local_addr());
    let flags = [
        "--spamd-addr",
        &spamd,
        "--rspamd-controller-addr",
        &controller,
        "--learn-password",
        "s3cret",
        "--max-message-bytes",
        "100000",
        "--checkpoint-interval-secs",
        "3600",
    ];
    let learned = learned(Some(200), &flags);
    let (input, dir) = (learned.tmp.path().join("in.jsonl"), learned.tmp.path().join("ckpt"));
    let first = message(1, "cheap pills");
    assert_eq!(spamc(&spamd, &["-L", "spam"], &first), (SUCCESS.to_string() + "\n", 0));

    // Empty, and over --max-message-bytes: bad input, a failure to both.
    assert_ne!(spamc(&spamd, &["-L", "spam"], b"").1, 0);
    assert_ne!(rspamc(&controller, &["-P", "s3cret", "learn_spam"], b"").1, 0);
    let huge = [message(9, "big"), vec![b'x'; 150_000]].concat();
    assert_ne!(spamc(&spamd, &["-L", "spam"], &huge).1, 0);
    let (said, code) = rspamc(&controller, &["-P", "s3cret", "learn_spam"], &huge);
    assert!(code != 0 && said.contains("413"), "{code}: {said}");

    // The disk fills: the next append stops 10 bytes in. Refused, to
    // spamc (-L, and -C with -x: without it spamc falls back to exit 0
    // for any failure, a daemon down included) and to rspamc.
    let logged = lessons_bytes(&dir);
    assert!(logged > 0, "the first lesson is in the log");
    limit_file_size(learned.daemon.pid(), Some(logged + 10));
    let refused = message(2, "a lesson the disk could not take");
    let (said, code) = spamc(&spamd, &["-L", "spam"], &refused);
    assert_eq!(code, 74, "{said}");
    assert_eq!(spamc(&spamd, &["-x", "-C", "report"], &refused).1, 74);
    let (said, code) = rspamc(&controller, &["-P", "s3cret", "learn_ham"], &refused);
    assert!(code != 0 && said.contains("503"), "{code}: {said}");
    assert_eq!(lessons_bytes(&dir), logged, "each failed append was cut back");

    // Room again: the next lessons are learned, whole.
    limit_file_size(learned.daemon.pid(), None);
    let third = message(3, "lunch at noon");
    assert_eq!(spamc(&spamd, &["-L", "ham"], &third).0.trim(), SUCCESS);
    let (said, code) = rspamc(&controller, &["-P", "s3cret", "learn_spam"], &message(4, "win a prize"));
    assert!(code == 0 && said.contains("success = true"), "{said}");

    // kill -9, restart: it starts, and holds exactly what was acknowledged.
    learned.daemon.crash();
    let daemon = spawn_mail(&input, &dir, &flags);
    wait_listening(&spamd);
    assert_eq!(spamc(&spamd, &["-L", "spam"], &first).0.trim(), ALREADY);
    assert_eq!(spamc(&spamd, &["-L", "ham"], &third).0.trim(), ALREADY);
    assert_eq!(
        spamc(&spamd, &["-L", "spam"], &message(4, "win a prize")).0.trim(),
        ALREADY
    );
    assert_eq!(
        spamc(&spamd, &["-L", "spam"], &refused).0.trim(),
        SUCCESS,
        "the refused lesson was never learned"
    );
    daemon.stop();
    let last = newest_checkpoint(&dir).expect("a checkpoint");
    assert_eq!(
        last.model.map(|m| m.version),
        Some(200 + 4),
        "200 lines and 4 lessons, each once"
    );
}

/// The classes a checkpoint's model knows.
fn classes(dir: &Path) -> Vec<String> {
    let out = std::process::Command::new(BIN)
        .args(["inspect", "--json", "--checkpoint-dir"])
        .arg(dir)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names = v["labels"].as_array().or_else(|| v["classes"].as_array()).cloned();
    let names = names.unwrap_or_else(|| panic!("no classes in {v}"));
    names
        .iter()
        .map(|n| n.as_str().or_else(|| n["label"].as_str()).unwrap().to_string())
        .collect()
}

/// A console lesson whose label is none of a ham/spam model's classes (a
/// typo: "Spam") is refused with the classes named and changes nothing;
/// with `--lessons-add-classes` the operator lets it add one.
#[test]
fn a_lesson_with_an_unknown_label_is_refused() {
    let agent = common::http::client();
    for adds in [false, true] {
        let console = local_addr();
        let mut flags = vec!["--console-addr", console.as_str()];
        if adds {
            flags.push("--lessons-add-classes");
        }
        let learned = learned(Some(200), &flags);
        let dir = learned.tmp.path().join("ckpt");
        let teach = |label: &str| {
            let body = serde_json::json!({"id": "typo-1", "label": label, "text": "see you at lunch"});
            let mut r = agent
                .post(format!("http://{console}/api/teach"))
                .header("content-type", "application/json")
                .send(body.to_string())
                .expect("an answer");
            (r.status().as_u16(), r.body_mut().read_to_string().unwrap())
        };
        let (code, said) = teach("Spam");
        learned.daemon.stop();
        let after = classes(&dir);
        if adds {
            assert_eq!(code, 200, "{said}");
            assert!(after.len() == 3 && after.contains(&"Spam".to_string()), "{after:?}");
        } else {
            assert_eq!(code, 400, "{said}");
            assert!(said.contains("unknown label \\\"Spam\\\""), "{said}");
            assert!(said.contains("spam, ham") || said.contains("ham, spam"), "{said}");
            assert_eq!(after.len(), 2, "the classes unchanged: {after:?}");
        }
    }
}
