//! A 50 MB e-mail (a base64 attachment) never held whole (issue 29): as a
//! JSON line it is refused by the size cap and dead-lettered with its
//! reason, the lines after it learned; as a file given to `classifyd
//! learn` it is counted as too large without being read. Peak RSS stays
//! that of a small daemon. Its own test binary, so that the peak RSS of
//! the children it waits for (getrusage) is classifyd's alone.

use std::io::{BufWriter, Write};
use std::process::Command;

mod common;

use common::{BIN, children_peak_rss_mib, run_jsonl_peak_rss, sms_lines};

/// Writes a 50 MB message with a base64 attachment through `w`, lines
/// ended by `eol` (`\r\n`, or its JSON escape inside a string), without
/// holding it: this process's memory would count in its children's peak
/// RSS (a child's pages before exec are its parent's).
fn big_message(w: &mut impl Write, eol: &[u8]) {
    let head = [
        "From: big@example.org",
        "Subject: the report",
        "MIME-Version: 1.0",
        "Content-Type: multipart/mixed; boundary=\"b\"",
        "",
        "--b",
        "Content-Type: text/plain",
        "",
        "See attached.",
        "--b",
        "Content-Type: application/octet-stream; name=\"data.bin\"",
        "Content-Transfer-Encoding: base64",
        "",
    ];
    for line in head {
        // Inside a JSON string the quotes are escaped too.
        let line = if eol == b"\r\n" {
            line.to_string()
        } else {
            line.replace('"', "\\\"")
        };
        w.write_all(line.as_bytes()).unwrap();
        w.write_all(eol).unwrap();
    }
    let line = [b'Q'; 76];
    for _ in 0..(50 << 20) / 78 {
        w.write_all(&line).unwrap();
        w.write_all(eol).unwrap();
    }
    w.write_all(b"--b--").unwrap();
    w.write_all(eol).unwrap();
}

#[test]
fn a_50_mb_email_is_refused_by_its_size_not_held() {
    let tmp = tempfile::tempdir().unwrap();
    let eml = tmp.path().join("mail");
    std::fs::create_dir(&eml).unwrap();
    let big = eml.join("big.eml");
    big_message(&mut BufWriter::new(std::fs::File::create(&big).unwrap()), b"\r\n");
    // As a JSON line ("email"), between ordinary lines.
    let input = tmp.path().join("in.jsonl");
    {
        let mut w = BufWriter::new(std::fs::File::create(&input).unwrap());
        for l in &sms_lines()[..100] {
            writeln!(w, "{l}").unwrap();
        }
        w.write_all(br#"{"id": "big", "email": ""#).unwrap();
        big_message(&mut w, br"\r\n");
        w.write_all(b"\"}\n").unwrap();
        for l in &sms_lines()[100..200] {
            writeln!(w, "{l}").unwrap();
        }
    }
    let dead = tmp.path().join("dead.jsonl");
    let rss = run_jsonl_peak_rss(&["--bits", "16"], &input, &dead, &tmp.path().join("ck"));
    let records = std::fs::read_to_string(&dead).unwrap();
    let v: serde_json::Value = serde_json::from_str(records.lines().next().unwrap()).unwrap();
    assert_eq!(v["reason"], "too_large");
    let c = common::newest_checkpoint(&tmp.path().join("ck")).unwrap();
    assert_eq!(
        c.pipeline.unwrap().counters.unwrap().learned,
        200,
        "the lines around it learned"
    );
    // As a file given to `learn`.
    let out = Command::new(BIN)
        .args(["learn", "--label", "ham", "--bits", "16", "--checkpoint-dir"])
        .arg(tmp.path().join("ck2"))
        .arg(&eml)
        .env("CLASSIFYD_LOG", "error")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("learned 0 of 1") && said.contains("too_large"), "{said}");
    let rss = rss.max(children_peak_rss_mib());
    eprintln!("peak RSS around a 50 MB e-mail: {rss:.1} MiB");
    // A small daemon alone peaks at 10-15 MiB here: the message adds nothing.
    assert!(rss < 64.0, "peak RSS {rss:.1} MiB");
}
