//! Where settings come from, driven through the binary (each run has an
//! environment of its own): a flag wins over its `CLASSIFYD_*` variable,
//! which wins over the config file; librdkafka properties come from `-X`,
//! `CLASSIFYD_KAFKA_*` variables and the config file's `[kafka]` table, in
//! that order, and reach librdkafka.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{BIN, data};

/// `classifyd ARGS` with only the given `CLASSIFYD_*` variables set.
fn classifyd(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    for (k, _) in std::env::vars() {
        if k.starts_with("CLASSIFYD_") {
            c.env_remove(k);
        }
    }
    c.env("CLASSIFYD_LOG", "warn").args(args).envs(env.iter().copied());
    c.output().unwrap()
}

/// The feature bits an `eval` of the SMS slice ran with.
fn bits(config: &Path, flags: &[&str], env: &[(&str, &str)]) -> u64 {
    let input = data("sms_head1000.jsonl");
    let mut args = vec!["eval", "--json", "--limit", "50", "--config", config.to_str().unwrap()];
    args.extend(["--input", input.to_str().unwrap()]);
    args.extend(flags);
    let out = classifyd(&args, env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["features"]["bits"].as_u64().unwrap()
}

#[test]
fn a_flag_wins_over_its_variable_which_wins_over_the_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("classifyd.toml");
    fs::write(&config, "bits = 17\nchar-ngrams = \"0\"\n").unwrap();
    assert_eq!(bits(&config, &[], &[]), 17);
    assert_eq!(bits(&config, &[], &[("CLASSIFYD_BITS", "18")]), 18);
    assert_eq!(bits(&config, &["--bits", "19"], &[("CLASSIFYD_BITS", "18")]), 19);

    fs::write(&config, "no-such-flag = 1\n").unwrap();
    let out = classifyd(&["eval", "--input", "x", "--config", config.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown key \"no-such-flag\""));
}

/// `classifyd run --brokers` with these settings: `Err` with what it
/// said when it stopped (librdkafka refused a property: it creates its
/// clients before it connects, so no broker is needed to see which
/// properties reached librdkafka), `Ok` once it said its clients took
/// them and it is connecting (nothing listens on port 9 of loopback); then
/// it is stopped. Neither within 30 s is a failure, never a pass.
fn run_kafka(dir: &Path, flags: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    let mut c = Command::new(BIN);
    for (k, _) in std::env::vars() {
        if k.starts_with("CLASSIFYD_") {
            c.env_remove(k);
        }
    }
    let mut child = c
        .args([
            "run",
            "--brokers",
            "127.0.0.1:9",
            "--checkpoint-dir",
            dir.to_str().unwrap(),
        ])
        .args(flags)
        .env("CLASSIFYD_LOG", "info")
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut said = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("kafka clients configured") {
                let _ = tx.send(true);
            }
            said.push_str(&line);
            said.push('\n');
        }
        said
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let outcome = loop {
        if rx.try_recv().is_ok() {
            break Some(true);
        }
        if child.try_wait().unwrap().is_some() {
            break Some(false);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    child.wait().unwrap();
    let said = reader.join().unwrap();
    match outcome {
        Some(true) => Ok(()),
        Some(false) => Err(said),
        None => panic!("neither refused nor connecting within 30 s:\n{said}"),
    }
}

#[test]
fn kafka_properties_come_from_flags_variables_and_the_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ckpt");
    let config = tmp.path().join("classifyd.toml");
    let file = ["--config", config.to_str().unwrap()];
    let refused = |r: Result<(), String>, property: &str| {
        let err = r.expect_err("librdkafka took a property it should have refused");
        assert!(err.contains(&format!("\"{property}\"")), "{err}");
    };

    // Each source reaches librdkafka.
    fs::write(&config, "[kafka]\n\"from.the.file\" = \"1\"\n").unwrap();
    refused(run_kafka(&dir, &file, &[]), "from.the.file");
    refused(
        run_kafka(&dir, &[], &[("CLASSIFYD_KAFKA_FROM_THE__ENV", "1")]),
        "from.the_env",
    );
    refused(run_kafka(&dir, &["-X", "from.a.flag=1"], &[]), "from.a.flag");

    // A variable wins over the file, and a flag over the variable: the
    // bad value is refused where nothing sets a good one over it.
    fs::write(&config, "[kafka]\n\"socket.timeout.ms\" = \"soon\"\n").unwrap();
    refused(run_kafka(&dir, &file, &[]), "socket.timeout.ms");
    run_kafka(&dir, &file, &[("CLASSIFYD_KAFKA_SOCKET_TIMEOUT_MS", "1000")]).unwrap();
    let bad_env = [("CLASSIFYD_KAFKA_SOCKET_TIMEOUT_MS", "soon")];
    refused(run_kafka(&dir, &[], &bad_env), "socket.timeout.ms");
    run_kafka(&dir, &["-X", "socket.timeout.ms=1000"], &bad_env).unwrap();

    fs::write(&config, "kafka = \"client.id=x\"\n").unwrap();
    let out = classifyd(&["eval", "--input", "x", "--config", config.to_str().unwrap()], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"kafka\" must be a table"));
}

/// A JSON-lines flag with --brokers is refused with what applies
/// instead, before anything connects; the same run without it starts.
#[test]
fn a_json_lines_flag_is_refused_on_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let base = [
        "run",
        "--brokers",
        "127.0.0.1:9",
        "--checkpoint-dir",
        ck.to_str().unwrap(),
    ];
    for (flag, value) in [
        ("--output", "out.jsonl"),
        ("--input", "in.jsonl"),
        ("--dead-letter", "dead.jsonl"),
    ] {
        let mut args = base.to_vec();
        args.extend([flag, value]);
        let out = classifyd(&args, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} was taken");
        assert!(err.contains(&format!("{flag} is for JSON lines")), "{err}");
    }
    assert_eq!(run_kafka(&ck, &[], &[]), Ok(()));
}

/// The other rules between `run`'s flags (`RunArgs::check`): each
/// refused with what to use instead, before anything starts.
#[test]
fn flags_of_the_other_transport_or_role_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck = ck.to_str().unwrap();
    for (args, says) in [
        (vec!["run", "--review-topic", "r"], "--review-topic needs --brokers"),
        (vec!["run", "--role", "learner"], "--role learner needs --brokers"),
        (
            vec!["run", "--input-format", "email"],
            "--input-format email is for Kafka records",
        ),
        (
            vec!["run", "--label-header", "l"],
            "--label-header names the record header",
        ),
        (
            vec![
                "run",
                "--brokers",
                "127.0.0.1:9",
                "--checkpoint-dir",
                ck,
                "--review",
                "r.jsonl",
            ],
            "--review FILE is for JSON lines",
        ),
        (
            vec!["run", "--brokers", "127.0.0.1:9"],
            "--checkpoint-dir is required with --brokers",
        ),
    ] {
        let out = classifyd(&args, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was taken");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// Every flag of the other transport is refused by its presence, even at
/// its default value (a value check would let `--group-id classifyd` or
/// `--input -` pass unseen), from the command line, a variable or the
/// config file, naming where it was set; the same runs without it start.
#[test]
fn every_flag_of_the_other_transport_is_refused_by_presence() {
    let dir = tempfile::tempdir().unwrap();
    let kafka_only = [
        ("-X", "a=b"),
        ("--input-topic", "messages"),
        ("--feedback-topic", "labels"),
        ("--output-topic", "predictions"),
        ("--dead-letter-topic", "classifyd-dead-letter"),
        ("--group-id", "classifyd"),
        ("--create-topics", "true"),
        ("--topic-partitions", "4"),
        ("--model-topic", "classifyd-model"),
        ("--input-format", "json"),
        ("--reporter-header", "reporter"),
        ("--user-header", "user"),
        ("--model-publish-ms", "250"),
        ("--model-snapshot-secs", "600"),
        ("--review-topic", "review"),
        ("--shutdown-timeout-secs", "30"),
    ];
    for (flag, value) in kafka_only {
        let out = classifyd(&["run", flag, value], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} was taken without --brokers");
        assert!(err.contains(flag) && err.contains("--brokers"), "{flag}: {err}");
    }
    let ck = dir.path().join("ck");
    let kafka = [
        "run",
        "--brokers",
        "127.0.0.1:9",
        "--checkpoint-dir",
        ck.to_str().unwrap(),
    ];
    let lines_only = [
        ("--input", "-"),
        ("--input-name", "day1"),
        ("--output", "-"),
        ("--dead-letter", "dead.jsonl"),
        ("--review", "review.jsonl"),
    ];
    for (flag, value) in lines_only {
        let out = classifyd(&[&kafka[..], &[flag, value]].concat(), &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} was taken with --brokers");
        assert!(err.contains(flag) && err.contains("is for JSON lines"), "{flag}: {err}");
    }
    // From a variable and from the config file, named as such.
    let out = classifyd(&["run"], &[("CLASSIFYD_GROUP_ID", "classifyd")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--group-id (set by CLASSIFYD_GROUP_ID) is for Kafka"),
        "{err}"
    );
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "output = \"-\"\n").unwrap();
    let out = classifyd(&[&kafka[..], &["--config", config.to_str().unwrap()]].concat(), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--output (set in the config file) is for JSON lines"),
        "{err}"
    );
    // Without them, both start: JSON lines on an empty input ends at once.
    let out = classifyd(&["run", "--input", "/dev/null"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(run_kafka(&ck, &[], &[]), Ok(()));
}
