//! What the tests of the mail protocols share: SpamAssassin's raw messages
//! split into what a daemon learns and what it is asked, a daemon on
//! JSON lines with mail endpoints, and a raw connection's answer.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::*;

/// A daemon killed if the test fails before stopping it.
pub struct MailDaemon(Option<Child>);

impl Drop for MailDaemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl MailDaemon {
    pub fn pid(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    pub fn stop(mut self) {
        terminate(self.0.take().unwrap());
    }

    /// Kills it as a crash does (SIGKILL: nothing flushed, no last
    /// checkpoint).
    pub fn crash(mut self) {
        let mut child = self.0.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// What `check` says once it no longer says `before`: a lesson's answer
/// comes once it is durable and learned, and the copies that answer
/// checks take it at their next publication (an interval at most,
/// docs/mail.md), so a check right after the answer may not show it yet.
pub fn once_changed<T: PartialEq + std::fmt::Debug>(before: T, mut check: impl FnMut() -> T) -> T {
    let mut now = check();
    wait_for("a check to reflect the lesson", Duration::from_secs(15), || {
        now = check();
        now != before
    });
    now
}

/// Waits until `addr` takes connections (a daemon restarted on it).
pub fn wait_listening(addr: &str) {
    wait_for("the endpoint to listen", Duration::from_secs(60), || {
        TcpStream::connect(addr).is_ok()
    });
}

/// SpamAssassin's first 1,200 raw messages: two of three learned
/// (`input`), the third held out for the checks (label, message).
pub fn corpus() -> (Vec<String>, Vec<(String, Vec<u8>)>) {
    let mut input = Vec::new();
    let mut held = Vec::new();
    for (i, (id, label, raw)) in raw_emails(1200).into_iter().enumerate() {
        if i % 3 == 2 {
            held.push((label, raw));
        } else {
            input.push(serde_json::json!({"id": id, "email_base64": b64(&raw), "label": label}).to_string());
        }
    }
    (input, held)
}

pub fn b64(raw: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// An address on loopback with a free port.
pub fn local_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// A daemon that learned the corpus's first `lines` messages (all with
/// `None`), and what it was not taught.
pub struct Learned {
    pub daemon: MailDaemon,
    pub held: Vec<(String, Vec<u8>)>,
    /// Its input, checkpoints and scratch, removed when dropped: bind it
    /// to a name (not `..` or `_`) while the daemon runs.
    pub tmp: tempfile::TempDir,
}

/// Starts a daemon with `flags` (its endpoints among them) over the
/// corpus's first `lines` messages, and waits until it has learned them.
pub fn learned(lines: Option<usize>, flags: &[&str]) -> Learned {
    let tmp = tempfile::tempdir().unwrap();
    let (input, held) = corpus();
    let input = &input[..lines.unwrap_or(input.len()).min(input.len())];
    let path = tmp.path().join("in.jsonl");
    write_lines(&path, input);
    let dir = tmp.path().join("ckpt");
    let daemon = spawn_mail(&path, &dir, flags);
    wait_learned(&dir, input.len());
    Learned { daemon, held, tmp }
}

/// `classifyd run` over `input` with `flags` (the endpoints among them).
pub fn spawn_mail(input: &Path, dir: &Path, flags: &[&str]) -> MailDaemon {
    let child = Command::new(BIN)
        .args(["run", "--output", "/dev/null", "--input"])
        .arg(input)
        .arg("--checkpoint-dir")
        .arg(dir)
        .args(flags)
        .env("CLASSIFYD_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn classifyd");
    MailDaemon(Some(child))
}

/// Waits until the daemon has learned its whole input of `lines` (the
/// checkpoint it writes when the input ends says so; the copies that
/// answer requests are published before it).
pub fn wait_learned(dir: &Path, lines: usize) {
    wait_for("the input learned", Duration::from_secs(120), || {
        newest_checkpoint(dir).is_some_and(|c| c.positions.values().any(|&next| next == lines as u64))
    });
}

/// The bytes a raw connection gets back for `request`, sent whole (its
/// write side then closed).
pub fn ask(addr: &str, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = s.write_all(request);
    // Said whole: a short body is then a lie, not a slow client.
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A mail client (`program`, from Debian's `package`) run with `args`, the
/// message on its stdin: (stdout, stderr, exit code).
pub fn client(program: &str, package: &str, args: &[&str], message: &[u8]) -> (String, String, i32) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}: install Debian's {package} package (scripts/test.sh does)"));
    child.stdin.take().unwrap().write_all(message).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}
