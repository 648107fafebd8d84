//! The JSON-lines transport: a line source (a file or stdin, read on its own
//! thread so the daemon's loop never blocks on input and can always react to
//! a shutdown), a prediction sink and a dead-letter sink. Positions are line
//! numbers: the checkpoint holds the next line to read.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use base64::Engine as _;

use crate::message::Bad;
use crate::pipeline::Prediction;

/// What the reader thread sends.
#[derive(Debug)]
pub enum LineEvent {
    /// Line `number` (0-based) of the input, without its newline.
    Line { number: u64, bytes: Vec<u8> },
    /// The input ended.
    End,
    /// Reading failed.
    Error(io::Error),
}

/// Lines of a JSON-lines input, read ahead on a thread.
///
/// The thread hands lines over in chunks: up to [`CHUNK_LINES`], or fewer
/// when it has read all the input it has been given so far, so a line that
/// arrives alone (stdin from a slow producer) is passed on at once, never
/// held back to fill a chunk. One line per hand-over cost a thread wake-up
/// per line: a quarter of the CPU of `classifyd run` over SMS went to the
/// scheduler.
#[derive(Debug)]
pub struct LineSource {
    rx: Receiver<Vec<LineEvent>>,
    /// Events received and not yet taken, in order.
    pending: std::vec::IntoIter<LineEvent>,
    /// A short label for positions and default ids ("stdin" or the file name).
    pub name: String,
}

/// Most lines handed over at once.
pub const CHUNK_LINES: usize = 64;

impl LineSource {
    /// Opens `input` (a path, or "-" for stdin) and skips its first `skip`
    /// lines (those a checkpoint already covers).
    pub fn open(input: &str, skip: u64) -> io::Result<Self> {
        let (reader, name): (Box<dyn Read + Send>, String) = if input == "-" {
            (Box::new(io::stdin()), "stdin".to_string())
        } else {
            let f =
                File::open(input).map_err(|e| io::Error::new(e.kind(), format!("cannot open input {input}: {e}")))?;
            let name = Path::new(input)
                .file_name()
                .map_or(input.to_string(), |n| n.to_string_lossy().into_owned());
            (Box::new(f), name)
        };
        Ok(Self::from_reader(reader, skip, name))
    }

    /// Reads lines from any reader (tests use in-memory ones).
    pub fn from_reader(reader: Box<dyn Read + Send>, skip: u64, name: String) -> Self {
        // Up to 64 chunks read ahead.
        let (tx, rx) = mpsc::sync_channel(64);
        std::thread::Builder::new()
            .name("jsonl-reader".into())
            .spawn(move || read_lines(BufReader::with_capacity(1 << 16, reader), skip, &tx))
            // Spawning fails only when the OS is out of threads: nothing sensible to do.
            .expect("cannot spawn the input reader thread");
        LineSource {
            rx,
            pending: Vec::new().into_iter(),
            name,
        }
    }

    /// The next event, or `None` if nothing came within `timeout`.
    pub fn next(&mut self, timeout: Duration) -> Option<LineEvent> {
        if let Some(ev) = self.pending.next() {
            return Some(ev);
        }
        match self.rx.recv_timeout(timeout) {
            Ok(chunk) => {
                self.pending = chunk.into_iter();
                // The reader never sends an empty chunk; were one to come, it is a quiet spell.
                self.pending.next()
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(LineEvent::End),
        }
    }
}

/// The reader thread: sends `r`'s lines from line `skip` on, in chunks,
/// then `End` or the error that stopped it; returns early when the
/// receiver has gone.
fn read_lines(mut r: BufReader<Box<dyn Read + Send>>, skip: u64, tx: &mpsc::SyncSender<Vec<LineEvent>>) {
    let mut number = 0u64;
    let mut chunk = Vec::with_capacity(CHUNK_LINES);
    loop {
        let mut buf = Vec::new();
        let last = match r.read_until(b'\n', &mut buf) {
            Ok(0) => Some(LineEvent::End),
            Ok(_) => {
                if buf.last() == Some(&b'\n') {
                    buf.pop();
                    if buf.last() == Some(&b'\r') {
                        buf.pop();
                    }
                }
                if number >= skip {
                    chunk.push(LineEvent::Line { number, bytes: buf });
                }
                number += 1;
                None
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Some(LineEvent::Error(e)),
        };
        let done = last.is_some();
        chunk.extend(last);
        // Send when full, at the end, or before a read that may block: the
        // buffer holds nothing more of what the input has given so far.
        if !chunk.is_empty() && (done || chunk.len() >= CHUNK_LINES || r.buffer().is_empty()) {
            let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK_LINES));
            if tx.send(full).is_err() {
                return; // the daemon has gone
            }
        }
        if done {
            return;
        }
    }
}

/// Opens an output: "-" is stdout, anything else a file opened for appending.
pub fn open_output(output: &str) -> io::Result<Box<dyn Write + Send>> {
    if output == "-" {
        Ok(Box::new(io::stdout()))
    } else {
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(output)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot open output {output}: {e}")))?;
        Ok(Box::new(f))
    }
}

/// Writes predictions as JSON lines.
pub struct PredictionSink {
    out: BufWriter<Box<dyn Write + Send>>,
    buf: Vec<u8>,
}

impl PredictionSink {
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        PredictionSink {
            out: BufWriter::with_capacity(1 << 16, out),
            buf: Vec::with_capacity(256),
        }
    }

    pub fn write(&mut self, p: &Prediction) -> io::Result<()> {
        self.buf.clear();
        p.write_json(&mut self.buf);
        self.buf.push(b'\n');
        self.out.write_all(&self.buf)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Writes refused lines, one JSON record each:
/// `{"position": ..., "reason": ..., "error": ..., "raw": ...}` (or
/// `"raw_base64"` when the bytes are not UTF-8).
pub struct DeadLetterSink {
    out: Option<BufWriter<File>>,
    /// Refusals logged when there is no file.
    logged: u64,
}

impl DeadLetterSink {
    /// With no path, refusals are only logged (the first ten, then one in a thousand).
    pub fn open(path: Option<&Path>) -> io::Result<Self> {
        let out = match path {
            None => None,
            Some(p) => Some(BufWriter::new(
                OpenOptions::new().create(true).append(true).open(p).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot open dead-letter file {}: {e}", p.display()))
                })?,
            )),
        };
        Ok(DeadLetterSink { out, logged: 0 })
    }

    pub fn write(&mut self, position: &str, bad: &Bad, raw: &[u8]) -> io::Result<()> {
        let Some(out) = &mut self.out else {
            self.logged += 1;
            if self.logged <= 10 || self.logged.is_multiple_of(1000) {
                tracing::warn!(position, reason = %bad.reason, error = %bad.detail, "bad input (pass --dead-letter FILE to keep it)");
            }
            return Ok(());
        };
        let record = dead_letter_record(position, bad, raw);
        serde_json::to_writer(&mut *out, &record)?;
        out.write_all(b"\n")
    }

    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.out {
            Some(o) => o.flush(),
            None => Ok(()),
        }
    }
}

/// The JSON record of a refused message.
pub fn dead_letter_record(position: &str, bad: &Bad, raw: &[u8]) -> serde_json::Value {
    let mut v = serde_json::json!({
        "position": position,
        "reason": bad.reason.as_str(),
        "error": bad.detail,
    });
    match std::str::from_utf8(raw) {
        Ok(s) => v["raw"] = s.into(),
        Err(_) => v["raw_base64"] = base64::engine::general_purpose::STANDARD.encode(raw).into(),
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(source: &mut LineSource) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        loop {
            match source.next(Duration::from_secs(10)) {
                Some(LineEvent::Line { number, bytes }) => out.push((number, bytes)),
                Some(LineEvent::End) => return out,
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn lines_in_order_across_chunks_after_skipping() {
        let text: String = (0..1000).map(|i| format!("line {i}\r\n")).collect();
        let mut source = LineSource::from_reader(Box::new(io::Cursor::new(text)), 10, "t".into());
        let got = lines_of(&mut source);
        assert_eq!(got.len(), 990);
        for (k, (number, bytes)) in got.iter().enumerate() {
            assert_eq!(*number, k as u64 + 10);
            assert_eq!(bytes, format!("line {}", k + 10).as_bytes());
        }
        // Past the end, the source stays ended.
        assert!(matches!(source.next(Duration::from_millis(10)), Some(LineEvent::End)));
    }

    #[test]
    fn a_lone_line_is_passed_on_without_waiting_for_more() {
        let (reader, mut writer) = io::pipe().unwrap();
        let mut source = LineSource::from_reader(Box::new(reader), 0, "pipe".into());
        writer.write_all(b"{\"text\": \"first\"}\n").unwrap();
        // The writer stays open: a reader holding lines back to fill a chunk
        // would time out here.
        match source.next(Duration::from_secs(10)) {
            Some(LineEvent::Line { number: 0, bytes }) => assert_eq!(bytes, b"{\"text\": \"first\"}"),
            other => panic!("expected the first line, got {other:?}"),
        }
        assert!(source.next(Duration::from_millis(50)).is_none());
        writer.write_all(b"second\n").unwrap();
        drop(writer);
        assert_eq!(lines_of(&mut source), vec![(1, b"second".to_vec())]);
    }
}
