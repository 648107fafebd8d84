//! `classifyd run` on the embedded default (JSON lines), driven as a real
//! process: predictions, dead letters, checkpoints, SIGTERM, and kill -9
//! then resume ending with exactly the model of an uninterrupted run.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use classifyd::checkpoint::InputKey;
use classifyd::checkpoint::pb;
use common::{
    BIN, data, free_port, http_get, newest_checkpoint, sms_lines, spawn_metrics_daemon, wait_for, write_lines,
};

/// Small, fast model flags shared by every run of a test.
fn model_flags() -> Vec<&'static str> {
    vec!["--bits", "16"]
}

fn classifyd() -> Command {
    let mut c = Command::new(BIN);
    c.env("CLASSIFYD_LOG", "warn");
    c
}

/// The position of the one input a checkpoint has read (0 before any).
fn position(c: &pb::Checkpoint) -> u64 {
    let mut inputs = c.positions.iter().filter(|(k, _)| k.starts_with("jsonl:"));
    let first = inputs.next().map_or(0, |(_, &v)| v);
    assert!(inputs.next().is_none(), "one input read: {:?}", c.positions);
    first
}

fn learned(c: pb::Checkpoint) -> u64 {
    c.pipeline.unwrap().counters.unwrap().learned
}

fn spawn_stdin(dir: &Path, extra: &[&str]) -> Child {
    classifyd()
        .arg("run")
        .args(["--input", "-", "--output", "/dev/null", "--checkpoint-dir"])
        .arg(dir)
        .args(extra)
        .args(model_flags())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn classifyd")
}

/// `classifyd run` over the file `input`, whatever its outcome.
fn try_run_file(input: &Path, dir: &Path, extra: &[&str]) -> std::process::Output {
    classifyd()
        .arg("run")
        .arg("--input")
        .arg(input)
        .arg("--checkpoint-dir")
        .arg(dir)
        .args(extra)
        .args(model_flags())
        .output()
        .expect("run classifyd")
}

/// `classifyd run` over the file `input`, which must succeed.
fn run_file(input: &Path, dir: &Path, extra: &[&str]) -> std::process::Output {
    let out = try_run_file(input, dir, extra);
    assert!(
        out.status.success(),
        "classifyd failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn predicts_unlabeled_lines_and_dead_letters_bad_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let dead = tmp.path().join("dead.jsonl");
    let out = run_file(
        &data("sms_demo.jsonl"),
        &tmp.path().join("ck"),
        &["--dead-letter", dead.to_str().unwrap()],
    );
    let input = fs::read_to_string(data("sms_demo.jsonl")).unwrap();
    let unlabeled: Vec<String> = input
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("text").is_some_and(|t| t.is_string()) && v.get("label").is_none())
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect();
    let predictions: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&str> = predictions.iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids, unlabeled, "exactly one prediction per unlabeled line, in order");
    for p in &predictions {
        let label = p["label"].as_str().unwrap();
        assert!(label == "ham" || label == "spam");
        let sum: f64 = p["scores"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_f64().unwrap())
            .sum();
        assert!((sum - 1.0).abs() < 1e-4);
        assert!(p["model_version"].as_u64().unwrap() > 0);
    }
    let dead: Vec<serde_json::Value> = fs::read_to_string(&dead)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let reasons: Vec<&str> = dead.iter().map(|d| d["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["bad_json", "wrong_type"]);
    assert_eq!(dead[0]["raw"], r#"{"id": "broken-1", "text": "#);
    assert!(dead[1]["position"].as_str().unwrap().starts_with("sms_demo.jsonl:"));
    // The final checkpoint counts them and covers every line.
    let ck = newest_checkpoint(&tmp.path().join("ck")).unwrap();
    assert_eq!(position(&ck), input.lines().count() as u64);
    let counters = ck.pipeline.unwrap().counters.unwrap();
    assert_eq!(counters.bad["bad_json"], 1);
    assert_eq!(counters.bad["wrong_type"], 1);
    assert_eq!(counters.predicted, unlabeled.len() as u64);
    assert!(counters.feedback_matched > 0);
}

/// One checkpoint dir fed several inputs (daily files, a file that grows,
/// the same stream on stdin): each input resumes where it stopped, known by
/// its first line, and a new input is read from its first line rather than
/// skipping as many lines as the last one had.
#[test]
fn each_input_resumes_at_its_own_position() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let lines = sms_lines();
    let write = |name: &str, ls: &[String]| {
        let p = tmp.path().join(name);
        write_lines(&p, ls);
        p
    };
    let key = |l: &String| first_line_key(l.as_bytes());
    let day1 = write("day1.jsonl", &lines[..300]);
    let day2 = write("day2.jsonl", &lines[300..500]);
    run_file(&day1, &dir, &[]);
    run_file(&day2, &dir, &[]);
    let ck = newest_checkpoint(&dir).unwrap();
    assert_eq!(ck.positions.get(&key(&lines[0])), Some(&300));
    assert_eq!(
        ck.positions.get(&key(&lines[300])),
        Some(&200),
        "day 2 read from its first line"
    );
    assert_eq!(learned(ck), 500, "every line of both days learned once");

    // Day 1's file grows: its new lines are read, its old ones are not.
    let grown = [&lines[..300], &lines[500..600]].concat();
    write_lines(&day1, &grown);
    run_file(&day1, &dir, &[]);
    let ck = newest_checkpoint(&dir).unwrap();
    assert_eq!(ck.positions.get(&key(&lines[0])), Some(&400));
    assert_eq!(learned(ck), 600);

    // The same stream on stdin, with more lines: known by its first line, not its name.
    let mut child = spawn_stdin(&dir, &[]);
    {
        let mut stdin = child.stdin.take().unwrap();
        for l in grown.iter().chain(&lines[600..650]) {
            writeln!(stdin, "{l}").unwrap();
        }
    }
    assert!(child.wait().unwrap().success());
    // Day 2 again: nothing new.
    run_file(&day2, &dir, &[]);
    let ck = newest_checkpoint(&dir).unwrap();
    assert_eq!(ck.positions.get(&key(&lines[0])), Some(&450));
    assert_eq!(ck.positions.get(&key(&lines[300])), Some(&200));
    assert_eq!(ck.positions.len(), 2, "{:?}", ck.positions);
    assert_eq!(learned(ck), 650);
}

/// Another input that begins with the same line as one the checkpoint has
/// read is refused (its lines are neither skipped nor learned), and is
/// read from its first line once `--input-name` keys it apart.
#[test]
fn an_input_that_only_begins_like_another_is_refused_until_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let lines = sms_lines();
    let day1 = tmp.path().join("day1.jsonl");
    let day2 = tmp.path().join("day2.jsonl");
    write_lines(&day1, &lines[..300]);
    let day2_lines = [&lines[..1], &lines[300..700]].concat();
    write_lines(&day2, &day2_lines);
    run_file(&day1, &dir, &[]);

    let out = try_run_file(&day2, &dir, &[]);
    assert!(!out.status.success(), "day 2 was taken for day 1");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not the input the checkpoint has read 300 lines of"),
        "{err}"
    );
    assert!(err.contains("--input-name"), "{err}");
    assert_eq!(
        learned(newest_checkpoint(&dir).unwrap()),
        300,
        "nothing of day 2 learned"
    );

    run_file(&day2, &dir, &["--input-name", "day2"]);
    let ck = newest_checkpoint(&dir).unwrap();
    assert_eq!(ck.positions.get(&InputKey::named("day2").on_disk()), Some(&401));
    assert_eq!(ck.positions.get(&first_line_key(lines[0].as_bytes())), Some(&300));
    // Day 2 read whole; its first line is day 1's first message again (the
    // same id, text and label): a fact already known, not learned twice.
    assert_eq!(learned(ck), 700, "day 2 learned whole, once");
    // Day 1 again, grown by a line: it still resumes, past its own 300
    // lines, and reads only the new one (day 2 had learned it already).
    write_lines(&day1, &lines[..301]);
    run_file(&day1, &dir, &[]);
    let ck = newest_checkpoint(&dir).unwrap();
    assert_eq!(ck.positions.get(&first_line_key(lines[0].as_bytes())), Some(&301));
    let counters = ck.pipeline.clone().unwrap().counters.unwrap();
    assert_eq!((learned(ck), counters.labels_repeated), (700, 2));
}

/// A checkpoint written before positions were kept per input (one "jsonl"
/// key) resumes the input it is given at that line, as it did then, and
/// its next checkpoint keeps the position under the input's own key.
#[test]
fn a_checkpoint_with_the_old_single_position_resumes_and_is_rekeyed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let lines = sms_lines();
    let input = tmp.path().join("in.jsonl");
    write_lines(&input, &lines[..300]);
    run_file(&input, &dir, &[]);
    // Rewrite the checkpoint as the older build wrote it.
    let mut ckdir = classifyd::checkpoint::CheckpointDir::open(&dir, 3).unwrap();
    let mut old = newest_checkpoint(&dir).unwrap();
    // The one key of checkpoints from before inputs were told apart.
    old.positions = [("jsonl".to_string(), 300)].into();
    old.position_marks.clear();
    ckdir.save(&mut old).unwrap();
    drop(ckdir); // its writer's lock

    write_lines(&input, &lines[..400]);
    let out = run_file(&input, &dir, &[]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("predates per-input positions"),
        "the guess is logged"
    );
    let ck = newest_checkpoint(&dir).unwrap();
    assert_eq!(
        ck.positions,
        [(first_line_key(lines[0].as_bytes()), 400)].into(),
        "the old key is gone, the input's own holds its position"
    );
    assert_eq!(learned(ck), 400, "the first 300 lines not learned twice");
}

#[test]
fn a_missing_input_is_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    // What `run` says of `input`, which it must refuse.
    let refused = |input: &Path| {
        let out = try_run_file(input, &tmp.path().join("ck"), &[]);
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let missing = tmp.path().join("no-such.jsonl");
    let err = refused(&missing);
    let what = format!("cannot open input {}", missing.display());
    assert_eq!(err.matches(&what).count(), 1, "said once: {err}");
    assert!(err.contains("No such file or directory"), "{err}");
    // An input that opens but cannot be read (a directory) is named too.
    let err = refused(tmp.path());
    let what = format!("cannot read input {}", tmp.path().display());
    assert_eq!(err.matches(&what).count(), 1, "said once: {err}");
}

#[test]
fn sigterm_checkpoints_and_exits_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let addr = format!("127.0.0.1:{}", common::free_port());
    let mut child = spawn_stdin(&dir, &["--checkpoint-interval-secs", "3600", "--metrics-addr", &addr]);
    let lines = sms_lines();
    {
        let stdin = child.stdin.as_mut().unwrap();
        for l in &lines[..300] {
            writeln!(stdin, "{l}").unwrap();
        }
        stdin.flush().unwrap();
    }
    // Until it has handled what it was given (the input stays open: it
    // waits for more), as its metrics say.
    let handled = format!("classifyd_progressive_examples_total {}", 300);
    common::wait_for("300 lines handled", Duration::from_secs(30), || {
        common::http_get(&addr, "/metrics").is_some_and(|(_, body)| body.lines().any(|l| l == handled))
    });
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status}");
    let ck = newest_checkpoint(&dir).expect("a checkpoint at shutdown");
    assert_eq!(position(&ck), 300);
}

/// Kills the daemon with SIGKILL at several points, resumes each time, and
/// checks the end state equals an uninterrupted run's: nothing learned twice,
/// nothing skipped.
#[test]
fn kill_9_and_resume_ends_with_the_uninterrupted_model() {
    let tmp = tempfile::tempdir().unwrap();
    let input = data("sms_head1000.jsonl");
    let lines = sms_lines();
    let flags = ["--checkpoint-every-updates", "50", "--checkpoint-interval-secs", "3600"];

    let straight = tmp.path().join("straight");
    run_file(&input, &straight, &flags);
    let want = newest_checkpoint(&straight).unwrap();

    let dir = tmp.path().join("killed");
    for kill_at in [137usize, 420, 777] {
        let mut child = spawn_stdin(&dir, &flags);
        {
            let stdin = child.stdin.as_mut().unwrap();
            // A resumed run skips the lines its checkpoint covers: replay from the start.
            for l in &lines[..kill_at] {
                writeln!(stdin, "{l}").unwrap();
            }
            stdin.flush().unwrap();
        }
        // Wait until a checkpoint past the previous kill point exists, then kill -9
        // while the process holds lines the checkpoint does not cover.
        wait_for("a checkpoint", Duration::from_secs(30), || {
            newest_checkpoint(&dir).is_some_and(|c| position(&c) + 50 >= kill_at as u64)
        });
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let ck = newest_checkpoint(&dir).unwrap();
        assert!(position(&ck) <= kill_at as u64);
    }
    run_file(&input, &dir, &flags);
    let got = newest_checkpoint(&dir).unwrap();
    assert_eq!(got.positions, want.positions);
    assert_eq!(
        got.model, want.model,
        "weights, labels and version equal the uninterrupted run's"
    );
    let (g, w) = (got.pipeline.unwrap(), want.pipeline.unwrap());
    assert_eq!(g.progressive, w.progressive, "progressive metrics equal too");
    assert_eq!(g.counters.unwrap().learned, 1000);
}

#[test]
fn eval_json_reports_the_contract_keys() {
    let out = classifyd()
        .args(["eval", "--json", "--input"])
        .arg(data("sms_head1000.jsonl"))
        .args(model_flags())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in ["examples", "seconds", "examples_per_second"] {
        assert!(v[key].is_number(), "{key}");
    }
    assert_eq!(v["examples"], 1000);
    let p = &v["progressive"];
    for key in ["accuracy", "macro_f1", "micro_f1", "roc_auc", "one_minus_roca_percent"] {
        assert!(p[key].is_number(), "progressive.{key}");
    }
    assert!(p["accuracy"].as_f64().unwrap() > 0.9);
    assert!(v.get("test").is_none(), "no split, no test metrics");
}

#[test]
fn eval_with_a_split_reports_test_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("split.jsonl");
    let mut f = fs::File::create(&path).unwrap();
    let lines = sms_lines();
    for (i, l) in lines.iter().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["split"] = if i < 800 { "train" } else { "test" }.into();
        writeln!(f, "{v}").unwrap();
    }
    drop(f);
    let out = classifyd()
        .args(["eval", "--json", "--passes", "2", "--input"])
        .arg(&path)
        .args(model_flags())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["progressive"]["examples"], 800);
    assert_eq!(v["test"]["examples"], 200);
    for key in ["accuracy", "macro_f1", "micro_f1"] {
        assert!(v["test"][key].as_f64().unwrap() > 0.8, "test.{key}");
    }
}

#[test]
fn predict_and_inspect_read_the_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    run_file(&data("sms_head1000.jsonl"), &dir, &[]);
    let out = classifyd()
        .args(["predict", "--checkpoint-dir"])
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(b"{\"id\": \"a\", \"text\": \"WINNER!! Claim your free prize now, call 09061701461\"}\n{\"id\": \"b\", \"text\": \"see you at home later\"}\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success());
    let preds: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(preds[0]["label"], "spam");
    assert_eq!(preds[1]["label"], "ham");
    let out = classifyd()
        .args(["inspect", "--json", "--top", "5", "--checkpoint-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], 1000);
    // Where the checkpoint stands: the input's own position, and which file it is.
    let key = first_line_key(sms_lines()[0].as_bytes());
    assert_eq!(v["positions"], serde_json::json!({ key.as_str(): 1000 }));
    assert!(v["checkpoint"].as_str().unwrap().ends_with(".ckpt"));
    let text = classifyd()
        .args(["inspect", "--checkpoint-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(&format!("  {key}  1000\n")));
    // Said in words, not in Rust's debug notation.
    assert!(text.contains("model logistic (single-label), version 1000"), "{text}");
    assert!(text.contains("char n-grams 3-4 of the first 3000 bytes"), "{text}");
    assert!(!text.contains("Some("), "{text}");
    let top = v["top_features"].as_array().unwrap();
    assert_eq!(top.len(), 2);
    // Some of the strongest features have readable names from the sketch.
    let named = top
        .iter()
        .flat_map(|c| c[1].as_array().unwrap())
        .filter(|f| !f[0].as_str().unwrap().starts_with('#'))
        .count();
    assert!(named > 0);
}

#[test]
fn a_damaged_checkpoint_is_refused_and_the_previous_one_used() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ck");
    let input = data("sms_head1000.jsonl");
    run_file(&input, &dir, &["--checkpoint-every-updates", "100"]);
    let mut files: Vec<PathBuf> = (fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.extension().is_some_and(|e| e == "ckpt"))
        .collect();
    files.sort();
    let newest = files.last().unwrap().clone();
    let mut bytes = fs::read(&newest).unwrap();
    let n = bytes.len();
    bytes[n - 7] ^= 0xff;
    fs::write(&newest, bytes).unwrap();
    // Resuming logs the refusal (naming the file) and uses the previous checkpoint.
    let out = run_file(&input, &dir, &["--log", "info"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("refusing checkpoint") && log.contains(newest.file_name().unwrap().to_str().unwrap()),
        "{log}"
    );
    assert!(log.contains("resumed from checkpoint"), "{log}");
}

#[test]
fn metrics_endpoint_serves_every_documented_metric() {
    let tmp = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let flags = model_flags();
    let input = fs::read(data("sms_demo.jsonl")).unwrap();
    let mut child = spawn_metrics_daemon(&addr, &tmp.path().join("ck"), &flags, &input);
    wait_for("ready", Duration::from_secs(30), || {
        http_get(&addr, "/readyz").is_some_and(|r| r.0 == 200)
    });
    assert_eq!(http_get(&addr, "/healthz").unwrap().0, 200);
    assert_eq!(http_get(&addr, "/nope").unwrap().0, 404);
    let mut body = String::new();
    wait_for("all lines counted", Duration::from_secs(30), || {
        body = http_get(&addr, "/metrics").map(|r| r.1).unwrap_or_default();
        body.contains("classifyd_messages_total{kind=\"labeled\",outcome=\"learned\"} 900")
    });
    let kafka_only = [
        "classifyd_end_to_end_latency_seconds",
        "classifyd_consumer_lag_messages",
        "classifyd_rebalances_total",
        "classifyd_producer_queue_messages",
        "classifyd_delivery_failures_total",
        "classifyd_consumer_errors_total",
        // A Kafka predictor's forwarding of lessons.
        "classifyd_lessons_forwarding",
        "classifyd_lessons_producer_rebuilds_total",
        // Written at the first checkpoint (the interval is a minute here).
        "classifyd_checkpoints_total",
        "classifyd_checkpoint_duration_seconds",
        "classifyd_checkpoint_size_bytes",
        "classifyd_checkpoint_timestamp_seconds",
        "classifyd_checkpoint_failures_total",
    ];
    for (name, kind, _) in classifyd::metrics::METRICS {
        assert!(
            body.contains(&format!("# TYPE {name} {kind}")) || kafka_only.contains(name),
            "{name} missing:\n{body}"
        );
    }
    assert!(body.contains("process_resident_memory_bytes") && body.contains("process_cpu_seconds_total"));
    // Histograms have explicit buckets (they can be summed across replicas).
    assert!(body.contains("classifyd_learn_duration_seconds_bucket{le=\"0.001\"}"));
    assert!(body.contains("classifyd_bad_input_total{reason=\"bad_json\"} 1"));
    // Label values are bounded: no ids or texts.
    assert!(!body.contains("sms-0"));
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}

#[test]
fn eval_draws_the_learning_curve() {
    let tmp = tempfile::tempdir().unwrap();
    let svg = tmp.path().join("curve.svg");
    let out = classifyd()
        .args(["eval", "--input"])
        .arg(data("sms_head1000.jsonl"))
        .arg("--plot")
        .arg(&svg)
        .args(model_flags())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"));
    assert!(text.contains("progressive accuracy") && text.contains("1-ROCA %"));
    assert!(
        text.matches("<polyline").count() >= 4,
        "two accuracy and two 1-ROCA lines"
    );
}

/// Labels as facts through the daemon (issue 48): every late label
/// delivered twice ends with the model of one delivery (digest and
/// version); flipped labels corrected by a trusted reviewer, and others
/// forgotten, are counted in `inspect`, a forget of an unknown id is
/// counted, and nothing of it is dead-lettered.
#[test]
fn a_label_delivered_twice_is_learned_once_and_can_be_taken_back() {
    let tmp = tempfile::tempdir().unwrap();
    let messages: Vec<serde_json::Value> = sms_lines()
        .iter()
        .take(400)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let flipped = |label: &serde_json::Value| if label == "spam" { "ham" } else { "spam" };
    let (mut once, mut twice, mut taken_back) = (Vec::new(), Vec::new(), Vec::new());
    for (i, m) in messages.iter().enumerate() {
        let request = serde_json::json!({"id": m["id"], "text": m["text"]}).to_string();
        let label = serde_json::json!({"id": m["id"], "label": m["label"], "reporter": "r1"}).to_string();
        for s in [&mut once, &mut twice, &mut taken_back] {
            s.push(request.clone());
        }
        once.push(label.clone());
        twice.extend([label.clone(), label.clone()]);
        match i % 20 {
            3 => {
                let wrong = serde_json::json!({"id": m["id"], "label": flipped(&m["label"]), "reporter": "r1"});
                taken_back.push(wrong.to_string());
                taken_back
                    .push(serde_json::json!({"id": m["id"], "label": m["label"], "reporter": "reviewer"}).to_string());
            }
            7 => {
                taken_back.push(label);
                taken_back.push(serde_json::json!({"id": m["id"], "forget": true}).to_string());
            }
            _ => taken_back.push(label),
        }
    }
    taken_back.push(r#"{"id": "never-seen", "forget": true}"#.to_string());
    let inspect = |name: &str, lines: &[String]| {
        let input = tmp.path().join(format!("{name}.jsonl"));
        write_lines(&input, lines);
        let (dir, dead) = (tmp.path().join(name), tmp.path().join(format!("{name}.dead")));
        let mut flags = vec![
            "--trusted-reporter",
            "reviewer",
            "--output",
            "/dev/null",
            "--dead-letter",
        ];
        flags.push(dead.to_str().unwrap());
        run_file(&input, &dir, &flags);
        assert_eq!(
            fs::read_to_string(&dead).unwrap_or_default(),
            "",
            "{name}: nothing dead-lettered"
        );
        let out = classifyd()
            .args(["inspect", "--json", "--checkpoint-dir"])
            .arg(&dir)
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let (a, b) = (inspect("once", &once), inspect("twice", &twice));
    assert_eq!((&a["model_digest"], &a["version"]), (&b["model_digest"], &b["version"]));
    assert_eq!(a["version"], 400);
    assert_eq!(b["feedback"]["labels_repeated"], 400);
    // The published predictions, judged by their late labels.
    assert_eq!(a["published"]["examples"], 400);
    assert_eq!(a["progressive"]["examples"], 0);
    let c = inspect("taken_back", &taken_back);
    let f = &c["feedback"];
    assert_eq!(
        (&f["labels_replaced"], &f["labels_forgotten"]),
        (&serde_json::json!(20), &serde_json::json!(20))
    );
    assert_eq!(
        (&f["forgets_unmatched"], &f["labels_repeated"]),
        (&serde_json::json!(1), &serde_json::json!(0))
    );
    // r1's labels replaced by the reviewer and forgotten anonymously.
    assert_eq!(f["least_trusted"][0]["overridden"], 40);
}

/// The checkpoint's key of the input whose first line is `line`.
fn first_line_key(line: &[u8]) -> String {
    InputKey::first_line(line).on_disk()
}
