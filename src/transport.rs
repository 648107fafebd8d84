//! The JSON-lines transport: a line source (a file or stdin, read on its own
//! thread so the daemon's loop never blocks on input and can always react to
//! a shutdown), a prediction sink and a dead-letter sink. Positions are line
//! numbers: the checkpoint holds the next line to read of each input it has
//! read, keyed by the input's first line (see [`position_key`]).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use base64::Engine as _;

use crate::message::Bad;
use crate::pipeline::Prediction;

/// The prefix of a JSON-lines input's position key in checkpoints.
pub const POSITION_PREFIX: &str = "jsonl:";
/// The one position key of checkpoints written before inputs were told
/// apart: it held the next line of whatever input the daemon was given.
pub const LEGACY_POSITION: &str = "jsonl";

/// The checkpoint key of the input whose first line is `first_line`
/// (without its line end): `jsonl:` and the line's xxh3-64 in hex.
///
/// An input is known by its first line, not by its name: the same stream
/// resumes where it stopped whether it comes from a file, a renamed or
/// copied file, or stdin, and a file that only grows keeps its key, while
/// the next day's file (whose first line is another message, with its own
/// id) starts at its first line instead of skipping as many lines as the
/// previous file had.
pub fn position_key(first_line: &[u8]) -> String {
    format!("{POSITION_PREFIX}{:016x}", xxhash_rust::xxh3::xxh3_64(first_line))
}

/// Where an input starts, found from its first line among a checkpoint's
/// positions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resume {
    /// The input's position key.
    pub key: String,
    /// Lines the checkpoint already holds (skipped).
    pub skip: u64,
    /// The position came from an older checkpoint's [`LEGACY_POSITION`].
    pub legacy: bool,
}

impl Resume {
    /// The input with first line `first_line`: its own position if the
    /// checkpoint has one, else the legacy key's (a checkpoint from before
    /// inputs were told apart is assumed to be of this input, as it was
    /// then), else its first line.
    pub fn find(positions: &BTreeMap<String, u64>, first_line: &[u8]) -> Self {
        let key = position_key(first_line);
        let (skip, legacy) = match (positions.get(&key), positions.get(LEGACY_POSITION)) {
            (Some(&n), _) => (n, false),
            (None, Some(&n)) => (n, true),
            (None, None) => (0, false),
        };
        Resume { key, skip, legacy }
    }
}

/// What the reader thread sends.
#[derive(Debug)]
pub enum LineEvent {
    /// Sent once, when the first line has been read, before any `Line`:
    /// the input's key and the lines it skips.
    Start(Resume),
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
    /// Opens `input` (a path, or "-" for stdin) and skips the lines that
    /// `positions` (a checkpoint's) hold of it, once its first line shows
    /// which input it is.
    pub fn open(input: &str, positions: BTreeMap<String, u64>) -> io::Result<Self> {
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
        let label = if input == "-" {
            "stdin".to_string()
        } else {
            input.to_string()
        };
        Ok(Self::spawn(reader, positions, name, label))
    }

    /// Reads lines from any reader (tests use in-memory ones).
    pub fn from_reader(reader: Box<dyn Read + Send>, positions: BTreeMap<String, u64>, name: String) -> Self {
        let label = name.clone();
        Self::spawn(reader, positions, name, label)
    }

    /// Starts the reader thread; `label` names the input in read errors.
    fn spawn(reader: Box<dyn Read + Send>, positions: BTreeMap<String, u64>, name: String, label: String) -> Self {
        // Up to 64 chunks read ahead.
        let (tx, rx) = mpsc::sync_channel(64);
        std::thread::Builder::new()
            .name("jsonl-reader".into())
            .spawn(move || read_lines(BufReader::with_capacity(1 << 16, reader), &positions, &label, &tx))
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

/// The reader thread: on the first line, sends where the input resumes
/// (found in `positions`), then `r`'s lines from there on, in chunks, then
/// `End` or the error that stopped it (naming the input by `label`);
/// returns early when the receiver has gone.
fn read_lines(
    mut r: BufReader<Box<dyn Read + Send>>,
    positions: &BTreeMap<String, u64>,
    label: &str,
    tx: &mpsc::SyncSender<Vec<LineEvent>>,
) {
    let mut number = 0u64;
    let mut skip = 0u64;
    let mut chunk = Vec::with_capacity(CHUNK_LINES);
    loop {
        let mut buf = Vec::new();
        let last = match r.read_until(b'\n', &mut buf) {
            Ok(0) => {
                if number < skip {
                    tracing::warn!(
                        lines = number,
                        checkpoint_position = skip,
                        "the input ended before the line its checkpoint had reached: nothing new was read \
                         (was it cut short, or rewritten with the same first line?)"
                    );
                }
                Some(LineEvent::End)
            }
            Ok(_) => {
                if buf.last() == Some(&b'\n') {
                    buf.pop();
                    if buf.last() == Some(&b'\r') {
                        buf.pop();
                    }
                }
                if number == 0 {
                    let resume = Resume::find(positions, &buf);
                    skip = resume.skip;
                    chunk.push(LineEvent::Start(resume));
                }
                if number >= skip {
                    chunk.push(LineEvent::Line { number, bytes: buf });
                }
                number += 1;
                None
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Some(LineEvent::Error(io::Error::new(
                e.kind(),
                format!("cannot read input {label}: {e}"),
            ))),
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

    /// The lines `source` sends until its end, after the one `Start` it
    /// must send first (returned too).
    fn lines_of(source: &mut LineSource) -> (Option<Resume>, Vec<(u64, Vec<u8>)>) {
        let (mut start, mut out) = (None, Vec::new());
        loop {
            match source.next(Duration::from_secs(10)) {
                Some(LineEvent::Start(r)) => {
                    assert!(start.is_none() && out.is_empty(), "Start comes once, before any line");
                    start = Some(r);
                }
                Some(LineEvent::Line { number, bytes }) => out.push((number, bytes)),
                Some(LineEvent::End) => return (start, out),
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    fn source_of(text: &str, positions: &[(&str, u64)]) -> LineSource {
        let positions = positions.iter().map(|&(k, v)| (k.to_string(), v)).collect();
        LineSource::from_reader(Box::new(io::Cursor::new(text.to_string())), positions, "t".into())
    }

    #[test]
    fn lines_in_order_across_chunks_after_skipping() {
        let text: String = (0..1000).map(|i| format!("line {i}\r\n")).collect();
        let key = position_key(b"line 0");
        let mut source = source_of(&text, &[(&key, 10)]);
        let (start, got) = lines_of(&mut source);
        assert_eq!(
            start,
            Some(Resume {
                key,
                skip: 10,
                legacy: false
            })
        );
        assert_eq!(got.len(), 990);
        for (k, (number, bytes)) in got.iter().enumerate() {
            assert_eq!(*number, k as u64 + 10);
            assert_eq!(bytes, format!("line {}", k + 10).as_bytes());
        }
        // Past the end, the source stays ended.
        assert!(matches!(source.next(Duration::from_millis(10)), Some(LineEvent::End)));
    }

    #[test]
    fn an_input_resumes_by_its_first_line_whatever_else_the_checkpoint_holds() {
        let a = "{\"id\": \"a1\", \"text\": \"x\"}\na2\na3\na4\n";
        let b = "{\"id\": \"b1\", \"text\": \"x\"}\nb2\nb3\n";
        let (ka, kb) = (
            position_key(b"{\"id\": \"a1\", \"text\": \"x\"}"),
            position_key(b"{\"id\": \"b1\", \"text\": \"x\"}"),
        );
        assert_ne!(ka, kb);
        assert!(ka.starts_with(POSITION_PREFIX) && ka.len() == POSITION_PREFIX.len() + 16);
        // A checkpoint that has read 3 lines of A: B is new to it and starts at its first line.
        let (start, got) = lines_of(&mut source_of(b, &[(&ka, 3)]));
        assert_eq!(
            start,
            Some(Resume {
                key: kb.clone(),
                skip: 0,
                legacy: false
            })
        );
        assert_eq!(got.len(), 3);
        // A resumes at its line 3, also with B's position beside it; the key
        // is the first line's, a CR LF line end not included.
        let crlf = a.replace('\n', "\r\n");
        let (start, got) = lines_of(&mut source_of(&crlf, &[(&ka, 3), (&kb, 2)]));
        assert_eq!(start.map(|r| (r.key, r.skip)), Some((ka.clone(), 3)));
        assert_eq!(got, vec![(3, b"a4".to_vec())]);
        // A checkpoint from before keys told inputs apart: its one position
        // is taken to be this input's, and flagged.
        let (start, got) = lines_of(&mut source_of(a, &[(LEGACY_POSITION, 2)]));
        assert_eq!(
            start,
            Some(Resume {
                key: ka.clone(),
                skip: 2,
                legacy: true
            })
        );
        assert_eq!(got.len(), 2);
        // An input's own key wins over the legacy one.
        let (start, _) = lines_of(&mut source_of(a, &[(LEGACY_POSITION, 2), (&ka, 4)]));
        assert_eq!(start.map(|r| (r.skip, r.legacy)), Some((4, false)));
        // An input shorter than its position sends nothing after Start, and ends.
        let (start, got) = lines_of(&mut source_of(a, &[(&ka, 9)]));
        assert_eq!(start.map(|r| r.skip), Some(9));
        assert!(got.is_empty());
        // An empty input sends no Start: there is no line to know it by.
        assert_eq!(lines_of(&mut source_of("", &[(&ka, 3)])), (None, vec![]));
    }

    #[test]
    fn a_lone_line_is_passed_on_without_waiting_for_more() {
        let (reader, mut writer) = io::pipe().unwrap();
        let mut source = LineSource::from_reader(Box::new(reader), BTreeMap::new(), "pipe".into());
        writer.write_all(b"{\"text\": \"first\"}\n").unwrap();
        // The writer stays open: a reader holding lines back to fill a chunk
        // would time out here.
        match source.next(Duration::from_secs(10)) {
            Some(LineEvent::Start(r)) => assert_eq!(r.skip, 0),
            other => panic!("expected the input's start, got {other:?}"),
        }
        match source.next(Duration::from_secs(10)) {
            Some(LineEvent::Line { number: 0, bytes }) => assert_eq!(bytes, b"{\"text\": \"first\"}"),
            other => panic!("expected the first line, got {other:?}"),
        }
        assert!(source.next(Duration::from_millis(50)).is_none());
        writer.write_all(b"second\n").unwrap();
        drop(writer);
        assert_eq!(lines_of(&mut source), (None, vec![(1, b"second".to_vec())]));
    }
}
