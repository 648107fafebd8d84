//! Where settings come from, driven through the binary (each run has an
//! environment of its own): a flag wins over its `CLASSIFYD_*` variable,
//! which wins over the config file; librdkafka properties come from `-X`,
//! `CLASSIFYD_KAFKA_*` variables and the config file's `[kafka]` table, in
//! that order, and reach librdkafka.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

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

/// What `classifyd run --brokers` says when librdkafka refuses its
/// properties: it creates its clients before it connects, so no broker is
/// needed to see which properties reached librdkafka.
fn refused_property(dir: &Path, flags: &[&str], env: &[(&str, &str)]) -> String {
    // Nothing listens on port 9 of loopback; librdkafka is not asked to connect anyway.
    let mut args = vec![
        "run",
        "--brokers",
        "127.0.0.1:9",
        "--checkpoint-dir",
        dir.to_str().unwrap(),
    ];
    args.extend(flags);
    let out = classifyd(&args, env);
    assert!(!out.status.success(), "librdkafka took a property that does not exist");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn kafka_properties_come_from_flags_variables_and_the_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ckpt");
    let config = tmp.path().join("classifyd.toml");
    fs::write(&config, "[kafka]\n\"from.the.file\" = \"1\"\n").unwrap();
    let file = ["--config", config.to_str().unwrap()];

    let err = refused_property(&dir, &file, &[]);
    assert!(err.contains("from.the.file"), "{err}");
    // The variable named after the property wins over the file.
    let err = refused_property(&dir, &file, &[("CLASSIFYD_KAFKA_FROM_THE_FILE", "2")]);
    assert!(err.contains("from.the.file"), "{err}");
    let err = refused_property(&dir, &[], &[("CLASSIFYD_KAFKA_FROM_THE__ENV", "1")]);
    assert!(err.contains("from.the_env"), "{err}");
    let err = refused_property(&dir, &["-X", "from.a.flag=1"], &[]);
    assert!(err.contains("from.a.flag"), "{err}");

    // Known properties pass: with one set each way, the daemon gets past
    // creating its clients and waits for the broker, until stopped.
    fs::write(&config, "[kafka]\n\"client.id\" = \"from-the-file\"\n").unwrap();
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--brokers",
            "127.0.0.1:9",
            "--checkpoint-dir",
            dir.to_str().unwrap(),
        ])
        .args(file)
        .args(["-X", "socket.timeout.ms=1000"])
        .env("CLASSIFYD_LOG", "warn")
        .env("CLASSIFYD_KAFKA_RECONNECT_BACKOFF_MS", "50")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the daemon refused valid properties"
    );
    child.kill().unwrap();
    child.wait().unwrap();

    fs::write(&config, "kafka = \"client.id=x\"\n").unwrap();
    let out = classifyd(&["eval", "--input", "x", "--config", config.to_str().unwrap()], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"kafka\" must be a table"));
}
