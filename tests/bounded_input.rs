//! Bounded reading: a 1 GB line on the JSON-lines input is read past in
//! chunks, never held, and dead-lettered as a small record; the lines after
//! it are learned. Its own test binary, so that the peak RSS of the
//! children it waits for (getrusage) is the daemon's alone.

use std::io::{BufWriter, Write};

mod common;

use common::{newest_checkpoint, run_jsonl_peak_rss, sms_lines};

#[test]
fn a_1_gb_line_is_read_past_in_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.jsonl");
    let lines = sms_lines();
    let giant: u64 = 1 << 30;
    let head: &[u8] = br#"{"id": "giant", "text": ""#;
    {
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&input).unwrap());
        w.write_all(head).unwrap();
        let block = vec![b'a'; 1 << 20];
        for _ in 0..(giant >> 20) {
            w.write_all(&block).unwrap();
        }
        w.write_all(b"\"}\n").unwrap();
        for l in &lines[..300] {
            writeln!(w, "{l}").unwrap();
        }
    }
    let dead = tmp.path().join("dead.jsonl");
    let dir = tmp.path().join("ck");
    let rss = run_jsonl_peak_rss(&["--bits", "16"], &input, &dead, &dir);
    eprintln!("peak RSS of classifyd run over a 1 GiB line: {rss:.1} MiB");
    assert!(rss < 200.0, "peak RSS {rss:.1} MiB");
    let records = std::fs::read_to_string(&dead).unwrap();
    let record_lines: Vec<&str> = records.lines().collect();
    assert_eq!(record_lines.len(), 1, "one dead letter");
    assert!(
        record_lines[0].len() < 64 << 10,
        "a small record: {} bytes",
        record_lines[0].len()
    );
    let v: serde_json::Value = serde_json::from_str(record_lines[0]).unwrap();
    assert_eq!(v["reason"], "too_large");
    assert_eq!(
        v["length"].as_u64(),
        Some(head.len() as u64 + giant + 2), // the head, the text, the closing quote and brace
    );
    assert_eq!(v["truncated"], true);
    assert!(v["raw"].as_str().unwrap().starts_with(r#"{"id": "giant""#));
    let ck = newest_checkpoint(&dir).unwrap();
    let counters = ck.pipeline.unwrap().counters.unwrap();
    let labeled = lines[..300].iter().filter(|l| l.contains("\"label\"")).count() as u64;
    assert_eq!(counters.learned, labeled, "every line after it learned");
    assert_eq!(counters.bad.get("too_large"), Some(&1));
}
