//! rspamd's protocol (`--rspamd-addr`, `--rspamd-controller-addr`) with
//! rspamd's own client, rspamc (Debian's `rspamd` package, which
//! `scripts/test.sh` installs): scores, actions and symbols as the HTTP
//! endpoint's predictions say for the same message; learning with
//! `rspamc learn_spam` and the password, the same lesson again, a forget;
//! learning refused without the password, or from an address not allowed;
//! `POST /v1/classify` refused without the bearer token.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::mail::*;
use common::*;

/// rspamc with `args` against `addr`, the message on its stdin: its output.
fn rspamc(addr: &str, args: &[&str], message: &[u8]) -> String {
    let args = [&["-h", addr, "-t", "30"], args].concat();
    let (out, err, _) = client("rspamc", "rspamd", &args, message);
    out + &err
}

/// The value after `field: ` in rspamc's output.
fn field<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
        .unwrap_or_else(|| panic!("no {name} in {out}"))
}

/// `Score: x / y`.
fn score(out: &str) -> (f32, f32) {
    let (s, r) = field(out, "Score").split_once(" / ").unwrap();
    (s.parse().unwrap(), r.parse().unwrap())
}

/// A raw POST: the answer's status line and body.
fn post(addr: &str, path: &str, headers: &str, body: &[u8]) -> (String, String) {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let answer = ask(addr, &[head.as_bytes(), body].concat());
    let status = answer.lines().next().unwrap_or("").to_string();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Learned from two thirds of the raw messages, the normal worker answers
/// rspamc for the rest: the score is the add-header score plus the
/// prediction's spam margin (as POST /v1/classify gives it, which asks for
/// the bearer token), the model's spam gets "add header", the symbol
/// names the verdict and its strongest features; learning needs the
/// password, moves the model, is "already learned" the second time, and
/// a forget takes it back.
#[test]
fn rspamc_checks_learns_and_forgets() {
    let (normal, controller, http) = (local_addr(), local_addr(), local_addr());
    let flags = [
        "--rspamd-addr",
        &normal,
        "--rspamd-controller-addr",
        &controller,
        "--http-addr",
        &http,
        "--learn-password",
        "s3cret",
    ];
    let Learned {
        daemon,
        held,
        tmp: _tmp,
    } = learned(None, &flags);
    assert!(ask(&normal, b"GET /ping HTTP/1.0\r\n\r\n").ends_with("pong\r\n"));
    let agent = common::http::client();
    let mut right = 0;
    for (label, raw) in held.iter().take(60) {
        let out = rspamc(&normal, &["symbols"], raw);
        let (s, required) = score(&out);
        assert_eq!(required, 15.0);
        let asked = serde_json::json!({"email_base64": b64(raw)}).to_string();
        let mut r = agent
            .post(format!("http://{http}/v1/classify"))
            .header("authorization", "Bearer s3cret")
            .send(asked.as_str())
            .unwrap();
        let answer: serde_json::Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
        let margin = answer["margins"]["spam"].as_f64().unwrap() as f32;
        assert!((s - (6.0 + margin)).abs() < 0.006, "{out} against {answer}");
        let spam = answer["label"] == "spam";
        let action = field(&out, "Action");
        assert_eq!(spam, action == "add header" || action == "reject", "{out}");
        let symbol = if spam { "CLASSIFYD_SPAM" } else { "CLASSIFYD_HAM" };
        assert!(field(&out, "Symbol").starts_with(symbol), "{out}");
        right += usize::from(spam == (label == "spam"));
    }
    assert!(right >= 54, "{right} of 60 held-out messages right through rspamc");
    // Without the token, POST /v1/classify is refused.
    let (code, _) = common::http::classify(&agent, &http, "", r#"{"text": "hello"}"#);
    assert_eq!(code, 401);

    let ham = &held.iter().find(|(l, _)| l == "ham").unwrap().1;
    let before = score(&rspamc(&normal, &["symbols"], ham)).0;
    let refused = rspamc(&controller, &["-P", "wrong", "learn_spam"], ham);
    assert!(refused.contains("HTTP error: 403"), "a wrong password: {refused}");
    let refused = rspamc(&controller, &["learn_spam"], ham);
    assert!(refused.contains("HTTP error: 403"), "no password given: {refused}");
    assert_eq!(score(&rspamc(&normal, &["symbols"], ham)).0, before, "nothing learned");
    assert!(rspamc(&controller, &["-P", "s3cret", "learn_spam"], ham).contains("success = true"));
    let learned = once_changed(before, || score(&rspamc(&normal, &["symbols"], ham)).0);
    assert!(learned > before, "learned as spam: {before} -> {learned}");
    let again = rspamc(&controller, &["-P", "s3cret", "learn_spam"], ham);
    assert!(again.contains("already learned"), "{again}");
    let (status, body) = post(&controller, "/forget", "Password: s3cret\r\n", ham);
    assert!(status.contains(" 200 "), "{status} {body}");
    let (status, _) = post(&controller, "/forget", "Password: s3cret\r\n", ham);
    assert!(status.contains(" 208 "), "nothing left to forget: {status}");
    assert!(once_changed(learned, || score(&rspamc(&normal, &["symbols"], ham)).0) < learned);
    // The controller does not check, and the worker does not learn.
    assert!(post(&controller, "/checkv2", "", ham).0.contains(" 404 "));
    assert!(
        post(&normal, "/learnspam", "Password: s3cret\r\n", ham)
            .0
            .contains(" 404 ")
    );
    daemon.stop();
}

/// Without a password, the controller takes lessons only from the
/// addresses `--learn-from` allows; the envelope's user is the message's
/// (a bad one refused).
#[test]
fn without_a_password_only_allowed_addresses_teach() {
    let (normal, controller) = (local_addr(), local_addr());
    let flags = [
        "--rspamd-addr",
        &normal,
        "--rspamd-controller-addr",
        &controller,
        "--learn-from",
        "10.0.0.0/8",
    ];
    let Learned {
        daemon,
        held,
        tmp: _tmp,
    } = learned(Some(300), &flags);
    let raw = &held[0].1;
    let (status, body) = post(&controller, "/learnham", "", raw);
    assert!(status.contains(" 403 "), "{status}");
    assert!(body.contains("not allowed from 127.0.0.1"), "{body}");
    let (status, body) = post(&normal, "/checkv2", "Rcpt: <bob@example.org>\r\n", raw);
    assert!(status.contains(" 200 "), "{status} {body}");
    let (status, body) = post(&normal, "/checkv2", "Deliver-To: <>\r\n", raw);
    assert!(status.contains(" 400 "), "{status} {body}");
    // Over the largest message: refused from its Content-Length.
    let head = format!(
        "POST /checkv2 HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        2 << 20
    );
    let answer = ask(&normal, head.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    daemon.stop();
}

/// rspamd itself, its proxy worker alone (no filters), killed when dropped.
struct Proxy(std::process::Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid; the master stops its workers.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn id(flag: &str) -> String {
    let out = Command::new("id").arg(flag).output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Starts rspamd's proxy on `listen` with `upstream` and a `mirror`, as
/// docs/mail.md configures it.
fn proxy(dir: &std::path::Path, listen: &str, upstream: &str, mirror: &str) -> Proxy {
    let d = dir.display();
    let conf = format!(
        "options {{ pidfile = \"{d}/rspamd.pid\"; dbdir = \"{d}\"; filters = \"\"; }}\n\
         logging {{ type = \"console\"; level = \"error\"; }}\n\
         worker \"rspamd_proxy\" {{\n  bind_socket = \"{listen}\";\n  milter = no;\n  timeout = 30s;\n  count = 1;\n\
         upstream \"classifyd\" {{ default = yes; self_scan = no; hosts = \"{upstream}\"; }}\n\
         mirror \"shadow\" {{ hosts = \"{mirror}\"; probability = 1.0; }}\n}}\n"
    );
    let path = dir.join("rspamd.conf");
    std::fs::write(&path, conf).unwrap();
    let child = Command::new("rspamd")
        .args(["-f", "-i", "-c"])
        .arg(&path)
        .args(["-u", &id("-un"), "-g", &id("-gn")])
        .env("TMPDIR", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("rspamd is not installed: install Debian's rspamd package (scripts/test.sh does)");
    Proxy(child)
}

/// rspamd's proxy (no filters of its own) with classifyd as its upstream
/// answers rspamc as classifyd does directly (the proxy hands a local
/// upstream the message in shared memory), and mirrors each message to a
/// second classifyd, a silent shadow.
#[test]
fn rspamds_proxy_uses_classifyd_as_upstream_and_mirror() {
    let tmp = tempfile::tempdir().unwrap();
    let (input, held) = corpus();
    let path = tmp.path().join("in.jsonl");
    let input = &input[..300];
    write_lines(&path, input);
    let (upstream, mirror, metrics, listen) = (local_addr(), local_addr(), local_addr(), local_addr());
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let first = spawn_mail(&path, &a, &["--rspamd-addr", &upstream]);
    let shadow = spawn_mail(&path, &b, &["--rspamd-addr", &mirror, "--metrics-addr", &metrics]);
    wait_learned(&a, input.len());
    wait_learned(&b, input.len());
    let rsp = tmp.path().join("rspamd");
    std::fs::create_dir(&rsp).unwrap();
    let _proxy = proxy(&rsp, &listen, &upstream, &mirror);
    wait_for("rspamd's proxy", Duration::from_secs(120), || {
        rspamc(&listen, &["symbols"], &held[0].1).contains("Score: ")
    });
    for (_, raw) in held.iter().skip(1).take(10) {
        let through = rspamc(&listen, &["symbols"], raw);
        let direct = rspamc(&upstream, &["symbols"], raw);
        assert_eq!(score(&through), score(&direct), "{through}");
        assert_eq!(field(&through, "Action"), field(&direct, "Action"));
    }
    // The shadow saw every message the proxy did (11 at least).
    wait_for("the mirror's checks", Duration::from_secs(30), || {
        http_get(&metrics, "/metrics").is_some_and(|(_, body)| {
            body.lines()
                .find(|l| l.starts_with("classifyd_mail_requests_total{protocol=\"rspamd\",command=\"checkv2\"}"))
                .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
                .is_some_and(|n| n >= 11)
        })
    });
    first.stop();
    shadow.stop();
}
