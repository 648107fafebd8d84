//! The JSON-lines outputs: predictions (a file or stdout) and dead letters
//! (a file, or the log). Owns the on-disk form of a dead-letter record; it
//! knows nothing of where the lines came from or of checkpoints.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::Path;

use base64::Engine as _;

use crate::message::Bad;
use crate::pipeline::Prediction;

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
        self.write_prefix(position, bad, raw, raw.len() as u64)
    }

    /// Writes a refusal of which only `prefix` is at hand, of a message
    /// `length` bytes long (a line over the size cap).
    pub fn write_prefix(&mut self, position: &str, bad: &Bad, prefix: &[u8], length: u64) -> io::Result<()> {
        let raw = prefix;
        let Some(out) = &mut self.out else {
            self.logged += 1;
            if self.logged <= 10 || self.logged.is_multiple_of(1000) {
                tracing::warn!(position, reason = %bad.reason, error = %bad.detail, "bad input (pass --dead-letter FILE to keep it)");
            }
            return Ok(());
        };
        let record = dead_letter_record(position, bad, raw, length);
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

/// The most of a refused message's bytes a dead-letter record copies: a
/// record stays small whatever the message (its `length` says how long the
/// message was when the copy is cut).
pub const DEAD_LETTER_PREFIX: usize = 16 << 10;

/// The JSON record of a refused message `length` bytes long, of which
/// `raw` is at hand (all of it, or a prefix); at most
/// [`DEAD_LETTER_PREFIX`] bytes of it are copied.
pub fn dead_letter_record(position: &str, bad: &Bad, raw: &[u8], length: u64) -> serde_json::Value {
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
