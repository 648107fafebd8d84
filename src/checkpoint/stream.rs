//! Checkpoints written and read as streams, so that saving or loading a
//! model never holds a second copy of its weights (docs/checkpoints.md).
//!
//! Written: the pipeline's state without the weights and the late-label
//! cache ([`capture::WeightsPlacement::Apart`]), then the cache and the weights in
//! pieces ([`capture::cache_fragments`], [`capture::fragments`]), each encoded and written in turn while the
//! CRC and the length are summed; the header goes in last. The bytes are
//! one protobuf message (the pieces merge into the first part), so a
//! reader that decodes it whole ([`super::read_file`]) sees the same
//! checkpoint as before.
//!
//! Read: the payload's top-level fields one at a time. The first part
//! merges into a checkpoint without weights; at the first piece, the model
//! is rebuilt from it with zero weights and each piece is put into it in
//! place. The CRC is checked at the end; a checkpoint written whole (by
//! [`super::CheckpointDir::save`] or an older build) has no pieces and is
//! restored as before. A full version on the model topic is a model image
//! written the same way ([`read_model`] reads it from its chunks).

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use prost::Message as _;

use super::capture::{self, WeightsPlacement};
use super::restore::{restore, restore_model, restore_with};
use super::{CheckpointError, FORMAT_VERSION, HEADER, MAGIC, OLDEST_FORMAT_VERSION, Positions, io_err, pb};
use crate::model::{Model, State};
use crate::pipeline::{Pipeline, PipelineConfig};

/// The checkpoint's field that holds the model (and each piece of it).
const MODEL_FIELD: u64 = 5;

/// Writes `p`'s checkpoint (with `positions` and `sequence`) to `file`;
/// returns its size in bytes. The file is synced.
pub(super) fn write(file: File, p: &Pipeline, positions: &Positions, sequence: u64) -> io::Result<u64> {
    let mut out = BufWriter::with_capacity(1 << 20, file);
    out.write_all(&[0u8; HEADER])?;
    let mut crc = crc32fast::Hasher::new();
    let mut len = 0u64;
    let mut buf = Vec::with_capacity(1 << 20);
    let mut put = |msg: &pb::Checkpoint| -> io::Result<()> {
        buf.clear();
        msg.encode(&mut buf).map_err(io::Error::other)?;
        crc.update(&buf);
        len += buf.len() as u64;
        out.write_all(&buf)
    };
    let mut light = capture::capture_with(p, positions, WeightsPlacement::Apart);
    light.sequence = sequence;
    let format = light.format_version;
    put(&light)?;
    drop(light);
    capture::cache_fragments(p, &mut put)?;
    capture::fragments(p.model(), &mut put)?;
    let mut file = out.into_inner().map_err(|e| e.into_error())?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&header(format, len, crc.finalize()))?;
    file.sync_all()?;
    Ok(HEADER as u64 + len)
}

/// The file header: magic, format version, payload length, CRC-32.
pub(super) fn header(format: u32, len: u64, crc: u32) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&format.to_le_bytes());
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(&crc.to_le_bytes());
    h
}

/// Checks a file's header against the payload's length: (format
/// version, payload length, CRC-32).
pub(super) fn read_header(head: &[u8], payload: u64, path: &Path) -> Result<(u32, u64, u32), CheckpointError> {
    let corrupt = |detail: String| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        detail,
    };
    if head.len() < HEADER || &head[..8] != MAGIC {
        return Err(corrupt("not a classifyd checkpoint (bad magic or too short)".into()));
    }
    // The slices have the exact lengths of the arrays (HEADER checked above).
    let version = u32::from_le_bytes(head[8..12].try_into().unwrap_or_default());
    if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(CheckpointError::Incompatible {
            path: path.to_path_buf(),
            found: version,
            expected: FORMAT_VERSION,
        });
    }
    let len = u64::from_le_bytes(head[12..20].try_into().unwrap_or_default());
    let crc = u32::from_le_bytes(head[20..24].try_into().unwrap_or_default());
    if payload != len {
        return Err(corrupt(format!("payload is {payload} bytes, header says {len}")));
    }
    Ok((version, len, crc))
}

/// The payload as it is read: what is left of it, and its CRC so far.
struct Payload<R> {
    r: R,
    left: u64,
    crc: crc32fast::Hasher,
}

impl<R: Read> Payload<R> {
    fn byte(&mut self, raw: &mut Vec<u8>) -> io::Result<u8> {
        self.bytes(1, raw)?;
        Ok(raw.last().copied().unwrap_or(0))
    }

    /// Reads `n` bytes onto `raw`.
    fn bytes(&mut self, n: u64, raw: &mut Vec<u8>) -> io::Result<()> {
        if n > self.left {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a field runs past the payload",
            ));
        }
        let start = raw.len();
        raw.resize(start + n as usize, 0);
        self.r.read_exact(&mut raw[start..])?;
        self.crc.update(&raw[start..]);
        self.left -= n;
        Ok(())
    }

    /// Reads a varint onto `raw`, and returns it.
    fn varint(&mut self, raw: &mut Vec<u8>) -> io::Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte(raw)?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a varint of more than 10 bytes",
        ))
    }

    /// Reads one top-level field, its key and all, onto `raw` (cleared
    /// first); returns its number.
    fn field(&mut self, raw: &mut Vec<u8>) -> io::Result<u64> {
        raw.clear();
        let key = self.varint(raw)?;
        match key & 7 {
            0 => self.varint(raw).map(drop)?,
            1 => self.bytes(8, raw)?,
            2 => {
                let n = self.varint(raw)?;
                self.bytes(n, raw)?;
            }
            5 => self.bytes(4, raw)?,
            w => return Err(io::Error::new(io::ErrorKind::InvalidData, format!("wire type {w}"))),
        }
        Ok(key >> 3)
    }
}

/// Reads and verifies the checkpoint at `path` and rebuilds its pipeline
/// and positions, the weights put in place piece by piece.
pub fn load(path: &Path, cfg: PipelineConfig) -> Result<(Pipeline, Positions), CheckpointError> {
    let corrupt = |detail: String| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        detail,
    };
    let file = File::open(path).map_err(io_err(path))?;
    let size = file.metadata().map_err(io_err(path))?.len();
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut head = [0u8; HEADER];
    if size < HEADER as u64 || r.read_exact(&mut head).is_err() {
        return Err(corrupt("not a classifyd checkpoint (bad magic or too short)".into()));
    }
    let (version, len, crc) = read_header(&head, size - HEADER as u64, path)?;
    let mut payload = Payload {
        r,
        left: len,
        crc: crc32fast::Hasher::new(),
    };
    let (light, model) = read_fields(&mut payload, cfg.limits.memory).map_err(corrupt)?;
    if payload.crc.finalize() != crc {
        return Err(corrupt("checksum mismatch".into()));
    }
    if light.format_version != version {
        return Err(CheckpointError::Incompatible {
            path: path.to_path_buf(),
            found: light.format_version,
            expected: FORMAT_VERSION,
        });
    }
    let restored = match model {
        Some(model) => restore_with(light, model, cfg),
        None => restore(light, cfg),
    };
    restored.map_err(|e| corrupt(e.to_string()))
}

/// The payload's fields: the checkpoint without its weights, and the
/// model with them when they came in pieces.
fn read_fields<R: Read>(payload: &mut Payload<R>, budget: usize) -> Result<(pb::Checkpoint, Option<Model>), String> {
    let mut light = pb::Checkpoint::default();
    let mut model: Option<(Model, Option<(u32, u32)>)> = None;
    let mut raw = Vec::new();
    while payload.left > 0 {
        let field = payload.field(&mut raw).map_err(|e| e.to_string())?;
        let piece = field == MODEL_FIELD && (model.is_some() || light.model.is_some());
        if !piece {
            if model.is_some() {
                return Err(format!("field {field} after the weights"));
            }
            light.merge(&raw[..]).map_err(|e| format!("cannot decode: {e}"))?;
            continue;
        }
        if model.is_none() {
            let count = entry_count(&light);
            let mut m = restore_model(&mut light).map_err(|e| e.to_string())?;
            if let State::Linear(w) = &mut m.state {
                // Sparse: the arena takes the budget's size while empty;
                // sized for the entries alone, it would be moved (copied
                // whole, both copies resident) when the budget is set after.
                if w.is_sparse() {
                    w.set_budget(budget);
                }
                w.reserve_entries(count);
            }
            model = Some((m, None));
        }
        let piece = pb::Checkpoint::decode(&raw[..]).map_err(|e| format!("cannot decode: {e}"))?;
        if let Some((m, last)) = &mut model {
            put_piece(m, piece, last)?;
        }
    }
    Ok((
        light,
        model.map(|(mut m, _)| {
            if let State::Linear(w) = &mut m.state {
                w.entries_put();
            }
            m
        }),
    ))
}

/// Reads a model image of `len` bytes from `r` (a full version on the
/// model topic): written whole ([`super::capture_model`]) or, like a
/// checkpoint, with its weights in pieces after it
/// ([`super::capture_model_with`] then [`super::fragments`]), which are put
/// in place as they come. `r`'s bytes are read once and not kept.
/// `budget`: the `--model-memory` the model will be held to (its sparse
/// weights are laid out for it from the start).
pub fn read_model<R: Read>(r: R, len: u64, budget: usize) -> Result<Model, String> {
    let mut payload = Payload {
        r,
        left: len,
        crc: crc32fast::Hasher::new(),
    };
    let (mut light, model) = read_fields(&mut payload, budget)?;
    match model {
        Some(model) => Ok(model),
        None => restore_model(&mut light).map_err(|e| e.to_string()),
    }
}

/// The entries a checkpoint written in pieces says follow.
fn entry_count(light: &pb::Checkpoint) -> usize {
    match light.model.as_ref().and_then(|m| m.state.as_ref()) {
        Some(pb::model_state::State::Linear(l)) => l.entries.as_ref().map_or(0, |e| e.count as usize),
        _ => 0,
    }
}

/// Puts one piece of the weights into `m` (`last`: the last sparse entry put).
fn put_piece(m: &mut Model, piece: pb::Checkpoint, last: &mut Option<(u32, u32)>) -> Result<(), String> {
    let linear = match piece.model.and_then(|m| m.state) {
        Some(pb::model_state::State::Linear(l)) => l,
        _ => return Err("a piece of the weights that holds no linear weights".into()),
    };
    let State::Linear(w) = &mut m.state else {
        return Err("pieces of linear weights for naive Bayes counts".into());
    };
    let stride = w.compact_stride() as u32;
    let ok = match (linear.rows, linear.entries) {
        (Some(r), None) if r.stride == stride => w.put_compact_rows(&r.rows, &r.values),
        (None, Some(e)) if e.stride == stride => w.put_entries(&e.keys, &e.values, last),
        _ => None,
    };
    ok.ok_or_else(|| "a piece of the weights out of range, out of order or of another layout".into())
}
