//! The operator's mistakes, refused loudly: two processes on one checkpoint
//! directory. Driven as real processes on the JSON-lines transport (the
//! lock is taken by the checkpoint directory, the same for Kafka).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{BIN, data, newest_checkpoint, sms_lines, wait_for};

fn classifyd() -> Command {
    let mut c = Command::new(BIN);
    c.env("CLASSIFYD_LOG", "warn");
    c
}

/// A daemon reading stdin, checkpointing into `dir` every 50 updates.
fn spawn_stdin(dir: &Path) -> Child {
    classifyd()
        .args(["run", "--input", "-", "--output", "/dev/null", "--bits", "16"])
        .args(["--checkpoint-every-updates", "50", "--checkpoint-dir"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn classifyd")
}

/// The names of the files in `dir` that end with `suffix`, sorted.
fn names_ending(dir: &Path, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(suffix))
        .collect();
    v.sort();
    v
}

fn learned(dir: &Path) -> u64 {
    newest_checkpoint(dir).map_or(0, |c| c.pipeline.unwrap().counters.unwrap().learned)
}

/// A `run` over the SMS head on `dir`, to its end.
fn second_writer(dir: &Path) -> std::process::Output {
    classifyd()
        .args(["run", "--output", "/dev/null", "--bits", "16", "--input"])
        .arg(data("sms_head1000.jsonl"))
        .arg("--checkpoint-dir")
        .arg(dir)
        .output()
        .unwrap()
}

/// A second `run` on a directory that a running daemon writes exits
/// non-zero at once, naming the directory and the holder's pid, and
/// writes nothing; the first goes on and loses nothing. After a kill -9 of
/// the holder, a new process takes the directory at once.
#[test]
fn a_second_writer_is_refused_and_a_killed_ones_lock_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let lines = sms_lines();
    let mut first = spawn_stdin(&dir);
    let mut stdin = first.stdin.take().unwrap();
    for l in &lines[..400] {
        writeln!(stdin, "{l}").unwrap();
    }
    stdin.flush().unwrap();
    // Every line fed is learned and checkpointed (every 50), the older
    // checkpoints beyond the three kept are gone: the directory is still
    // until more lines come.
    wait_for("the first daemon's checkpoints", Duration::from_secs(30), || {
        learned(&dir) >= 400 && names_ending(&dir, ".tmp").is_empty() && names_ending(&dir, ".ckpt").len() <= 3
    });
    let before: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();

    let started = Instant::now();
    let second = second_writer(&dir);
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "the second writer ran: {stderr}");
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
    assert!(stderr.contains(&dir.display().to_string()), "{stderr}");
    assert!(stderr.contains(&format!("process {}", first.id())), "{stderr}");
    let after: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after, "the refused process wrote nothing");
    // An operator who deletes LOCK (the pid file) releases nothing: the
    // kernel holds the lock on the directory while the first one lives.
    std::fs::remove_file(dir.join("LOCK")).unwrap();
    let again = second_writer(&dir);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        !again.status.success(),
        "a second writer ran once LOCK was deleted: {stderr}"
    );
    assert!(stderr.contains("is in use by process unknown"), "{stderr}");

    for l in &lines[400..] {
        writeln!(stdin, "{l}").unwrap();
    }
    drop(stdin);
    assert!(first.wait().unwrap().success());
    assert_eq!(learned(&dir), lines.len() as u64, "the first daemon lost nothing");

    // kill -9 of the holder leaves no stale lock.
    let mut holder = spawn_stdin(&dir);
    wait_for("the holder's lock", Duration::from_secs(10), || {
        std::fs::read_to_string(dir.join("LOCK")).is_ok_and(|s| s.trim() == holder.id().to_string())
    });
    holder.kill().unwrap();
    holder.wait().unwrap();
    let third = classifyd()
        .args(["run", "--output", "/dev/null", "--bits", "16", "--input"])
        .arg(data("sms_head1000.jsonl"))
        .arg("--checkpoint-dir")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(third.status.success(), "{}", String::from_utf8_lossy(&third.stderr));

    // Readers take no lock: inspect works while a writer holds the directory.
    let mut writer = spawn_stdin(&dir);
    wait_for("the writer's lock", Duration::from_secs(10), || {
        std::fs::read_to_string(dir.join("LOCK")).is_ok_and(|s| s.trim() == writer.id().to_string())
    });
    let inspect = classifyd()
        .arg("inspect")
        .arg("--checkpoint-dir")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(inspect.status.success(), "{}", String::from_utf8_lossy(&inspect.stderr));
    drop(writer.stdin.take());
    assert!(writer.wait().unwrap().success());
}

/// `classifyd run` over `input` with a file size limit of `limit` bytes
/// (none: no limit) on every file it writes.
fn run_limited(input: &Path, out: &Path, dir: &Path, limit: Option<u64>) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut c = classifyd();
    c.args(["run", "--bits", "16", "--input"])
        .arg(input)
        .arg("--output")
        .arg(out)
        .arg("--checkpoint-dir")
        .arg(dir);
    if let Some(limit) = limit {
        // SAFETY: setrlimit is async-signal-safe, and this runs in the child before exec.
        unsafe {
            c.pre_exec(move || {
                let l = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &l) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    c.output().unwrap()
}

/// A full disk, as /dev/full and as a file size limit (ulimit -f): the
/// error names the file and what was being written; no temporary file is
/// left; a run without the limit then cuts the output's torn last line, so
/// every line parses, and learns every example once.
#[test]
fn a_full_disk_is_named_and_the_next_run_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let input = data("sms_demo.jsonl");
    let full = run_limited(&input, Path::new("/dev/full"), &tmp.path().join("ck-full"), None);
    let stderr = String::from_utf8_lossy(&full.stderr);
    assert!(!full.status.success());
    assert!(stderr.contains("cannot write predictions to /dev/full"), "{stderr}");

    let out = tmp.path().join("predictions.jsonl");
    let dir = tmp.path().join("ck");
    // Room for some predictions, not all: the output is torn mid-line.
    let small = run_limited(&input, &out, &dir, Some(3000));
    let stderr = String::from_utf8_lossy(&small.stderr);
    assert!(!small.status.success());
    assert!(
        stderr.contains(&format!("cannot write predictions to {}", out.display())),
        "{stderr}"
    );
    let torn = std::fs::read(&out).unwrap();
    assert_eq!(torn.len(), 3000);
    assert_ne!(torn.last(), Some(&b'\n'), "the limit tore a line");
    // Room for the predictions, not for a checkpoint.
    std::fs::remove_file(&out).unwrap();
    let ckpt = run_limited(&input, &out, &dir, Some(40_000));
    let stderr = String::from_utf8_lossy(&ckpt.stderr);
    assert!(!ckpt.status.success());
    assert!(stderr.contains(".checkpoint-") && stderr.contains(".tmp"), "{stderr}");
    let leftovers = names_ending(&dir, ".tmp");
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // Tear the output, then run without a limit.
    let mut f = std::fs::OpenOptions::new().append(true).open(&out).unwrap();
    f.write_all(br#"{"id":"torn","lab"#).unwrap();
    drop(f);
    let ok = run_limited(&input, &out, &dir, None);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    for line in std::fs::read_to_string(&out).unwrap().lines() {
        assert!(serde_json::from_str::<serde_json::Value>(line).is_ok(), "{line}");
    }
    let labeled = std::fs::read_to_string(&input)
        .unwrap()
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .is_ok_and(|v| v.get("text").is_some() && v.get("label").is_some())
        })
        .count() as u64;
    assert_eq!(learned(&dir), labeled, "every example learned once");
}

/// A run over the demo file into a fresh checkpoint directory, which must
/// succeed: (its temporary directory, the input, the output, the
/// checkpoint directory).
fn demo_run() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (input, out, dir) = (
        data("sms_demo.jsonl"),
        tmp.path().join("out.jsonl"),
        tmp.path().join("ck"),
    );
    assert!(run_limited(&input, &out, &dir, None).status.success());
    (tmp, input, out, dir)
}

/// A rerun with nothing new to read writes no checkpoint: the one it
/// resumed from still says it all.
#[test]
fn a_rerun_with_nothing_new_writes_no_checkpoint() {
    let (_tmp, input, out, dir) = demo_run();
    let before = names_ending(&dir, ".ckpt");
    assert!(run_limited(&input, &out, &dir, None).status.success());
    assert_eq!(names_ending(&dir, ".ckpt"), before);
}

/// The only checkpoint damaged: refused, and the log says there is no
/// previous one to try (not "trying the previous one").
#[test]
fn a_lone_damaged_checkpoint_says_there_is_no_previous_one() {
    let (_tmp, _, _, dir) = demo_run();
    let ckpts = names_ending(&dir, ".ckpt");
    assert_eq!(ckpts.len(), 1);
    let path = dir.join(&ckpts[0]);
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let run = classifyd()
        .env("CLASSIFYD_LOG", "info")
        .args(["inspect", "--checkpoint-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(stderr.contains("there is no previous one"), "{stderr}");
    assert!(!stderr.contains("trying the previous one"), "{stderr}");
}

/// The value of metric line `name` (with its labels) in `addr`'s scrape.
fn metric(addr: &str, name: &str) -> Option<f64> {
    let (_, body) = common::http_get(addr, "/metrics")?;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// A checkpoint directory nothing can be written to for 30 s (a file size
/// limit of 0 on the running daemon: a full disk): the daemon goes on
/// reading and learning, counts each failed try and retries with
/// back-off; a lesson it cannot log is refused (spamc exits 74); once
/// writes work again the next try saves everything; after a kill -9 the
/// restart has every line and every acknowledged lesson once.
#[test]
fn an_unwritable_checkpoint_directory_stops_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let (metrics, spamd) = (
        format!("127.0.0.1:{}", common::free_port()),
        format!("127.0.0.1:{}", common::free_port()),
    );
    let lines = sms_lines();
    let mut daemon = classifyd()
        .args(["run", "--input", "-", "--output", "/dev/null", "--bits", "16"])
        .args(["--checkpoint-every-updates", "50", "--metrics-addr", &metrics])
        .args(["--spamd-addr", &spamd, "--checkpoint-dir"])
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = daemon.stdin.take().unwrap();
    let feed = |stdin: &mut std::process::ChildStdin, range: std::ops::Range<usize>| {
        for l in &lines[range] {
            writeln!(stdin, "{l}").unwrap();
        }
        stdin.flush().unwrap();
    };
    feed(&mut stdin, 0..200);
    wait_for("the first checkpoints", Duration::from_secs(30), || {
        learned(&dir) >= 200
    });
    let spamc = |label: &str, n: usize| {
        let (host, port) = spamd.rsplit_once(':').unwrap();
        let mail = format!("Message-ID: <full-{n}@test>\nSubject: {n}\n\nlesson {n}\n");
        let mut c = Command::new("spamc")
            .args(["-d", host, "-p", port, "-L", label])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("spamc (Debian's spamc package)");
        c.stdin.take().unwrap().write_all(mail.as_bytes()).unwrap();
        c.wait().unwrap().code()
    };
    assert_eq!(spamc("spam", 1), Some(0));

    common::limit_file_size(daemon.id(), Some(0));
    let started = Instant::now();
    feed(&mut stdin, 200..400);
    assert_eq!(spamc("ham", 2), Some(74), "a lesson the log cannot take is refused");
    wait_for("failed checkpoints counted", Duration::from_secs(20), || {
        metric(&metrics, "classifyd_checkpoint_failures_total").is_some_and(|n| n >= 2.0)
    });
    std::thread::sleep(Duration::from_secs(30).saturating_sub(started.elapsed()));
    assert!(daemon.try_wait().unwrap().is_none(), "the daemon is still running");
    assert!(learned(&dir) < 400, "nothing could be saved meanwhile");
    common::limit_file_size(daemon.id(), None);

    wait_for("a checkpoint once writes work", Duration::from_secs(40), || {
        learned(&dir) >= 400
    });
    assert_eq!(spamc("ham", 3), Some(0));
    feed(&mut stdin, 400..450);
    wait_for("the last lines", Duration::from_secs(30), || learned(&dir) >= 450);
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    drop(stdin);
    // Restarted over the same lines: every one, and both acknowledged
    // lessons, once (the refused one never).
    let input = tmp.path().join("in.jsonl");
    common::write_lines(&input, &lines[..450]);
    let rerun = classifyd()
        .args(["run", "--output", "/dev/null", "--bits", "16", "--input"])
        .arg(&input)
        .arg("--checkpoint-dir")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(rerun.status.success(), "{}", String::from_utf8_lossy(&rerun.stderr));
    let last = newest_checkpoint(&dir).unwrap();
    assert_eq!(last.model.map(|m| m.version), Some(450 + 2));
}
