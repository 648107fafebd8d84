//! A stream of 100,000 distinct labels (an attacker's, or a label field
//! that carries ids by mistake): the first `--max-classes` are learned,
//! every later one is dead-lettered as too_many_classes and counted, the
//! model stays within its memory, and the daemon finishes. Its own test
//! binary, so that the peak RSS of the children it waits for (getrusage)
//! is the daemon's alone.

use std::io::{BufWriter, Write};

mod common;

use common::{newest_checkpoint, run_jsonl_peak_rss};

#[test]
fn a_hundred_thousand_labels_stay_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("labels.jsonl");
    let n = 100_000;
    let cap = 2_000;
    {
        let mut w = BufWriter::new(std::fs::File::create(&input).unwrap());
        for i in 0..n {
            writeln!(
                w,
                r#"{{"id": "m{i}", "text": "order {} shipped to customer {i} today", "label": "id-{i}"}}"#,
                i % 97
            )
            .unwrap();
        }
    }
    let dead = tmp.path().join("dead.jsonl");
    let dir = tmp.path().join("ck");
    let flags = ["--model-memory", "64MiB", "--max-classes", &cap.to_string()];
    let rss = run_jsonl_peak_rss(&flags, &input, &dead, &dir);
    eprintln!("peak RSS of classifyd run over {n} distinct labels: {rss:.1} MiB");
    // 64 MiB of weights, their copy in the checkpoint being written, the
    // join cache's texts (measured: 246 MiB; unbounded, 2,000 classes of
    // dense rows at 2^20 buckets would take 16 GB).
    assert!(rss < 320.0, "peak RSS {rss:.1} MiB");
    let records = std::fs::read_to_string(&dead).unwrap();
    let lines: Vec<&str> = records.lines().collect();
    assert_eq!(lines.len(), n - cap, "every label past the cap is dead-lettered");
    let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(first["reason"], "too_many_classes");
    assert!(
        first["error"].as_str().unwrap().contains("--max-classes"),
        "the error names the flag: {first}"
    );
    assert!(first["raw"].as_str().unwrap().contains(&format!("id-{cap}")));
    let ck = newest_checkpoint(&dir).unwrap();
    let model = ck.model.unwrap();
    assert_eq!(model.labels.len(), cap);
    let counters = ck.pipeline.unwrap().counters.unwrap();
    assert_eq!(counters.learned, cap as u64);
    assert_eq!(counters.bad.get("too_many_classes"), Some(&((n - cap) as u64)));
}
