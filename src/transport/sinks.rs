//! The JSON-lines outputs: predictions (a file or stdout) and dead letters
//! (a file, or the log), and the two as the transport's [`Sink`]
//! ([`LinesSink`]). Owns the on-disk form of a dead-letter record; it
//! knows nothing of checkpoints.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use base64::Engine as _;

use crate::daemon::DaemonError;
use crate::daemon::core::{Payload, Position, Record, Sink};
use crate::message::Bad;
use crate::pipeline::{Outcome, Prediction};

/// An I/O error that names the file and what was being done to it.
fn named(what: &str, file: &str) -> impl Fn(io::Error) -> io::Error {
    let what = format!("{what} {file}");
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Opens a JSON-lines file for appending. A last line without its newline
/// (torn by a crash or a full disk) is cut off first, so that every line
/// of the file parses; what it held comes after the last checkpoint, and
/// the resumed run writes it again.
pub(crate) fn open_append(path: &Path) -> io::Result<File> {
    let name = path.display().to_string();
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .map_err(named("cannot open", &name))?;
    let meta = f.metadata().map_err(named("cannot stat", &name))?;
    let len = meta.len();
    // Not a regular file (/dev/full, a pipe): nothing to cut.
    if len == 0 || !meta.is_file() {
        return Ok(f);
    }
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1))
        .and_then(|_| f.read_exact(&mut last))
        .map_err(named("cannot read", &name))?;
    if last[0] == b'\n' {
        return Ok(f);
    }
    // Back to the last newline, 64 KiB at a time.
    let mut end = len;
    let mut block = vec![0u8; 64 << 10];
    let keep = loop {
        let start = end.saturating_sub(block.len() as u64);
        let part = &mut block[..(end - start) as usize];
        f.seek(SeekFrom::Start(start))
            .and_then(|_| f.read_exact(part))
            .map_err(named("cannot read", &name))?;
        if let Some(i) = memchr::memrchr(b'\n', part) {
            break start + i as u64 + 1;
        }
        if start == 0 {
            break 0;
        }
        end = start;
    };
    f.set_len(keep).map_err(named("cannot truncate", &name))?;
    tracing::warn!(file = %name, cut = len - keep, "the last line was torn (a crash or a full disk): cut back to the last whole line");
    Ok(f)
}

/// Opens an output: "-" is stdout, anything else a file opened for
/// appending (its torn last line cut: [`open_append`]).
pub(crate) fn open_output(output: &str) -> io::Result<Box<dyn Write + Send>> {
    if output == "-" {
        Ok(Box::new(io::stdout()))
    } else {
        Ok(Box::new(open_append(Path::new(output))?))
    }
}

/// Writes predictions as JSON lines, and the messages to review (see
/// [`Prediction::write_review_json`]) to their own file when there is one.
pub(crate) struct PredictionSink {
    out: BufWriter<Box<dyn Write + Send>>,
    buf: Vec<u8>,
    /// The output's name, for errors.
    name: String,
    /// The review file and its name.
    review: Option<(BufWriter<File>, String)>,
}

impl PredictionSink {
    /// Predictions to `out`, which errors call `name`.
    pub(crate) fn new(out: Box<dyn Write + Send>, name: &str) -> Self {
        PredictionSink {
            out: BufWriter::with_capacity(1 << 16, out),
            buf: Vec::with_capacity(256),
            name: if name == "-" { "stdout".into() } else { name.into() },
            review: None,
        }
    }

    /// Also writes the messages to review to `path` (appended).
    pub(crate) fn with_review(mut self, path: Option<&Path>) -> io::Result<Self> {
        if let Some(p) = path {
            self.review = Some((BufWriter::new(open_append(p)?), p.display().to_string()));
        }
        Ok(self)
    }

    pub(crate) fn write(&mut self, p: &Prediction) -> io::Result<()> {
        self.buf.clear();
        p.write_json(&mut self.buf);
        self.buf.push(b'\n');
        self.out
            .write_all(&self.buf)
            .map_err(named("cannot write predictions to", &self.name))?;
        if let (Some((review, name)), Some(_)) = (&mut self.review, &p.review) {
            self.buf.clear();
            p.write_review_json(&mut self.buf);
            self.buf.push(b'\n');
            review
                .write_all(&self.buf)
                .map_err(named("cannot write messages to review to", name))?;
        }
        Ok(())
    }

    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.out
            .flush()
            .map_err(named("cannot write predictions to", &self.name))?;
        match &mut self.review {
            Some((review, name)) => review
                .flush()
                .map_err(named("cannot write messages to review to", name)),
            None => Ok(()),
        }
    }
}

/// Writes refused lines, one JSON record each:
/// `{"position": ..., "reason": ..., "error": ..., "raw": ...}` (or
/// `"raw_base64"` when the bytes are not UTF-8).
pub(crate) struct DeadLetterSink {
    out: Option<BufWriter<File>>,
    /// The file's name, for errors.
    name: String,
    /// Refusals logged when there is no file.
    logged: u64,
}

impl DeadLetterSink {
    /// With no path, refusals are only logged (the first ten, then one in a thousand).
    pub(crate) fn open(path: Option<&Path>) -> io::Result<Self> {
        let out = match path {
            None => None,
            Some(p) => Some(BufWriter::new(open_append(p)?)),
        };
        let name = path.map_or_else(String::new, |p| p.display().to_string());
        Ok(DeadLetterSink { out, name, logged: 0 })
    }

    pub(crate) fn write(&mut self, position: &str, bad: &Bad, raw: &[u8]) -> io::Result<()> {
        self.write_prefix(position, bad, raw, raw.len() as u64)
    }

    /// Writes a refusal of which only `prefix` is at hand, of a message
    /// `length` bytes long (a line over the size cap).
    pub(crate) fn write_prefix(&mut self, position: &str, bad: &Bad, prefix: &[u8], length: u64) -> io::Result<()> {
        let raw = prefix;
        let Some(out) = &mut self.out else {
            self.logged += 1;
            if self.logged <= 10 || self.logged.is_multiple_of(1000) {
                tracing::warn!(position, reason = %bad.reason, error = %bad.detail, "bad input (pass --dead-letter FILE to keep it)");
            }
            return Ok(());
        };
        let record = dead_letter_record(position, bad, raw, length);
        serde_json::to_writer(&mut *out, &record)
            .map_err(io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .map_err(named("cannot write dead letters to", &self.name))
    }

    pub(crate) fn flush(&mut self) -> io::Result<()> {
        match &mut self.out {
            Some(o) => o.flush().map_err(named("cannot write dead letters to", &self.name)),
            None => Ok(()),
        }
    }
}

/// Where a JSON-lines daemon's outputs go: predictions (and messages to
/// review) and dead letters, each a file or stdout, written through buffers
/// that a flush empties.
pub(crate) struct LinesSink {
    predictions: PredictionSink,
    dead: DeadLetterSink,
    /// The input's name, which a dead letter's position starts with.
    input: String,
}

impl LinesSink {
    pub(crate) fn new(predictions: PredictionSink, dead: DeadLetterSink, input: &str) -> Self {
        LinesSink {
            predictions,
            dead,
            input: input.to_string(),
        }
    }

    /// A dead letter's position: the input's name and the line's number
    /// from 1.
    fn position(&self, position: &Position<'_>) -> String {
        format!("{}:{}", self.input, position.default_id())
    }
}

impl Sink for LinesSink {
    fn deliver(&mut self, record: &Record<'_>, outcome: Outcome) -> Result<(), DaemonError> {
        match outcome {
            Outcome::Predicted(p) => self.predictions.write(&p)?,
            Outcome::Bad(bad) => {
                let at = self.position(&record.position);
                match record.payload {
                    // Over the size cap: only its first bytes were read.
                    Payload::Oversized { prefix, length } => self.dead.write_prefix(&at, &bad, prefix, length)?,
                    _ => self.dead.write(&at, &bad, record.payload.bytes())?,
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn flush(&mut self, _why: &str) -> Result<bool, DaemonError> {
        self.predictions.flush()?;
        self.dead.flush()?;
        Ok(true)
    }
}

/// The most of a refused message's bytes a dead-letter record copies: a
/// record stays small whatever the message (its `length` says how long the
/// message was when the copy is cut).
pub(crate) const DEAD_LETTER_PREFIX: usize = 16 << 10;

/// The JSON record of a refused message `length` bytes long, of which
/// `raw` is at hand (all of it, or a prefix); at most
/// [`DEAD_LETTER_PREFIX`] bytes of it are copied.
pub(crate) fn dead_letter_record(position: &str, bad: &Bad, raw: &[u8], length: u64) -> serde_json::Value {
    let mut v = serde_json::json!({
        "position": position,
        "reason": bad.reason.as_str(),
        "error": bad.detail,
    });
    let mut raw = &raw[..raw.len().min(DEAD_LETTER_PREFIX)];
    if (raw.len() as u64) < length {
        v["length"] = length.into();
        v["truncated"] = true.into();
        // Cut at a char boundary, so a UTF-8 text stays one.
        if let Err(e) = std::str::from_utf8(raw)
            && e.error_len().is_none()
        {
            raw = &raw[..e.valid_up_to()];
        }
    }
    match std::str::from_utf8(raw) {
        Ok(s) => v["raw"] = s.into(),
        Err(_) => v["raw_base64"] = base64::engine::general_purpose::STANDARD.encode(raw).into(),
    }
    v
}
