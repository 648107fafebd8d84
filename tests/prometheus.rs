//! A real Prometheus server (Debian's package; scripts/test.sh finds it and
//! sets PROMETHEUS_BIN) scrapes a running classifyd on loopback; a query
//! through its HTTP API returns the progressive accuracy that `classifyd
//! eval` computes for the same sequence, and the metric names it stored
//! match the documented list.

mod common;

use std::fs;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{BIN, data, free_port, http_get, spawn_metrics_daemon, wait_for};

fn prometheus_bin() -> String {
    std::env::var("PROMETHEUS_BIN").unwrap_or_else(|_| {
        panic!("PROMETHEUS_BIN is not set: run ./scripts/test.sh (it installs Debian's prometheus)")
    })
}

/// The value of an instant query's first sample.
fn query(prom: &str, q: &str) -> Option<f64> {
    let enc: String = q
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let (code, body) = http_get(prom, &format!("/api/v1/query?query={enc}"))?;
    if code != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn prometheus_scrapes_the_accuracy_that_eval_computes() {
    let tmp = tempfile::tempdir().unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let prom = format!("127.0.0.1:{}", free_port());
    let config = tmp.path().join("prometheus.yml");
    fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: classifyd\n    static_configs:\n      - targets: [\"{metrics}\"]\n"
        ),
    )
    .unwrap();
    let mut prometheus = Command::new(prometheus_bin())
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", tmp.path().join("tsdb").display()))
        .arg(format!("--web.listen-address={prom}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");

    let input = fs::read(data("sms_demo.jsonl")).unwrap();
    let mut daemon = spawn_metrics_daemon(&metrics, &tmp.path().join("ck"), &["--bits", "16"], &input);

    let out = Command::new(BIN)
        .args(["eval", "--json", "--bits", "16", "--input"])
        .arg(data("sms_demo.jsonl"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let eval: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let want = eval["progressive"]["accuracy"].as_f64().unwrap();
    let examples = eval["progressive"]["examples"].as_f64().unwrap();

    // Wait until Prometheus has scraped the daemon after the whole stream.
    let q_examples = "classifyd_progressive_examples_total{job=\"classifyd\"}";
    wait_for("prometheus to scrape the whole stream", Duration::from_secs(90), || {
        query(&prom, q_examples) == Some(examples)
    });
    let got = query(
        &prom,
        "classifyd_progressive_accuracy_ratio{job=\"classifyd\",window=\"cumulative\"}",
    )
    .unwrap();
    assert!((got - want).abs() < 1e-12, "prometheus says {got}, eval says {want}");

    // The names Prometheus stored are the documented ones (those a
    // JSON-lines run exports; the Kafka ones are checked by the Kafka test).
    let (_, body) = http_get(&prom, "/api/v1/label/__name__/values").unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let stored: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x.as_str())
        .collect();
    let documented: Vec<&str> = classifyd::metrics::METRICS.iter().map(|m| m.0).collect();
    for name in stored.iter().filter(|n| n.starts_with("classifyd_")) {
        let base = name
            .trim_end_matches("_bucket")
            .trim_end_matches("_sum")
            .trim_end_matches("_count");
        assert!(documented.contains(&base), "{name} is exported but not documented");
    }
    for name in [
        "classifyd_messages_total",
        "classifyd_progressive_accuracy_ratio",
        "classifyd_class_f1_ratio",
    ] {
        assert!(stored.contains(&name), "{name} not stored");
    }

    drop(daemon.stdin.take());
    assert!(daemon.wait().unwrap().success());
    let _ = prometheus.kill();
    let _ = prometheus.wait();
}
