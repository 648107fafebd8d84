//! The replica's side of the model topic: records read in topic order
//! become [`Update`]s of the model it serves. A full version counts once
//! all its chunks are in and their checksum holds, and is restored once; a
//! delta only on the exact version it was taken against, and is handed on
//! as it came, to be put in place ([`super::apply_delta`]), so a
//! predictor's cost per version follows the delta's rows, not the model's.
//! Nothing older than what it holds is ever taken. Pure logic: no Kafka.

use prost::Message as _;

use super::records::TopicIndex;
use super::spool::Spool;
use super::{ReplicaError, apply_delta};
use crate::checkpoint::{self, pb};
use crate::model::{Limits, Model};

/// What a replica serves: (epoch, version, when the learner published it).
pub type Served = (u64, u64, u64);

/// A change of the model a replica serves, in the order they came.
#[derive(Debug)]
pub enum Update {
    /// A full version, its checksum checked: restored, it replaces the model.
    Full(FullVersion),
    /// The rows and scalars that changed since the version before.
    Delta(Box<pb::ModelState>),
}

/// A full version's chunks, in order, as they came (in a temporary file
/// when large: [`Spool`]): restored only when put in service, so that the
/// model it replaces can go first.
#[derive(Debug)]
pub struct FullVersion {
    name: String,
    chunks: Spool,
}

impl FullVersion {
    /// The model, restored as its chunks are read (never a second image
    /// of it) and laid out for the memory budget `limits`.
    pub fn restore(self, limits: Limits) -> Result<Model, ReplicaError> {
        let len = self.chunks.len();
        let reader = std::io::BufReader::with_capacity(1 << 16, self.chunks.reader());
        checkpoint::read_model(reader, len, limits.memory).map_err(|e| format!("snapshot {}: {e}", self.name).into())
    }
}

impl Update {
    /// Puts this update into `served` (none yet: only a full version
    /// makes one, held to `limits` as a served model is, before deltas
    /// add entries to it). A delta's `Err` leaves `served` as it was; a
    /// full version's leaves none.
    pub fn apply(self, served: &mut Option<Model>, limits: Limits) -> Result<(), ReplicaError> {
        match (self, served.as_mut()) {
            (Update::Full(v), _) => {
                *served = None;
                crate::allocator::return_freed();
                let mut m = v.restore(limits)?;
                m.set_limits(limits);
                *served = Some(m);
                Ok(())
            }
            (Update::Delta(mut d), Some(m)) => apply_delta(m, &mut d),
            (Update::Delta(_), None) => Err("a delta before any full version".into()),
        }
    }
}

/// A version a replica holds.
#[derive(Clone, Debug)]
struct Held {
    epoch: u64,
    version: u64,
    published_ms: u64,
    /// When the learner learned the oldest update this version brought.
    oldest_update_ms: u64,
}

/// A full version being received, chunk by chunk.
#[derive(Debug)]
struct Staging {
    epoch: u64,
    version: u64,
    crc: u32,
    chunks: Spool,
}

/// Reads records in topic order; holds the updates that lead from the
/// version last taken to the newest complete one.
#[derive(Debug, Default)]
pub struct Assembler {
    held: Option<Held>,
    staging: Option<Staging>,
    index: TopicIndex,
    updates: Vec<Update>,
    /// A delta in pieces being received.
    delta_staging: Option<Staging>,
}

/// Where one piece of a record in pieces goes.
#[derive(Clone, Copy)]
struct Piece {
    epoch: u64,
    version: u64,
    index: u32,
    count: u32,
    crc: u32,
}

/// Keeps `data`, piece `p` of a whole in pieces, in `slot` (a newer
/// whole replaces one under way); the whole's pieces, once every one is
/// in and their checksum holds.
fn stage(slot: &mut Option<Staging>, p: Piece, data: &[u8]) -> Result<Option<Spool>, ReplicaError> {
    let (index, count) = (p.index as usize, p.count as usize);
    if count == 0 || index >= count || count > 1 << 20 {
        return Err(format!("piece {index} of {count}").into());
    }
    if slot
        .as_ref()
        .is_none_or(|s| (p.epoch, p.version) > (s.epoch, s.version))
    {
        *slot = Some(Staging {
            epoch: p.epoch,
            version: p.version,
            crc: p.crc,
            chunks: Spool::new(count),
        });
    }
    let Some(s) = slot.as_mut() else { return Ok(None) };
    if (s.epoch, s.version) != (p.epoch, p.version) || s.crc != p.crc || s.chunks.pieces() != count {
        return Ok(None);
    }
    if let Err(e) = s.chunks.put(index, data) {
        *slot = None;
        return Err(format!("{}/{}: keeping piece {index}: {e}", p.epoch, p.version).into());
    }
    if !s.chunks.complete() {
        return Ok(None);
    }
    let Some(s) = slot.take() else { return Ok(None) };
    let crc = s.chunks.crc().map_err(|e| format!("{}/{}: {e}", p.epoch, p.version))?;
    if crc != s.crc {
        return Err(format!("{}/{} fails its checksum", p.epoch, p.version).into());
    }
    Ok(Some(s.chunks))
}

impl Assembler {
    /// Takes one record; `Ok(true)` when a newer complete version is now
    /// held (its updates wait in [`Assembler::take_updates`]). An `Err`
    /// names a record that cannot be used (it is skipped).
    pub fn offer(&mut self, key: &str, value: Option<&[u8]>) -> Result<bool, ReplicaError> {
        let Some(mut r) = self.index.note(key, value)? else {
            return Ok(false);
        };
        let held = self.held.as_ref().map(|h| (h.epoch, h.version));
        if held.is_some_and(|h| (r.epoch, r.version) <= h) {
            return Ok(false);
        }
        match r.body.take() {
            Some(pb::model_record::Body::Chunk(c)) => {
                let times = (r.published_unix_ms, r.oldest_update_unix_ms);
                self.chunk(r.epoch, r.version, times, c)
            }
            Some(pb::model_record::Body::Delta(d)) => self.delta(key, &r, d),
            Some(pb::model_record::Body::DeltaChunk(c)) => {
                let piece = Piece {
                    epoch: r.epoch,
                    version: r.version,
                    index: c.index,
                    count: c.count,
                    crc: c.crc32,
                };
                let Some(chunks) = stage(&mut self.delta_staging, piece, &c.data)? else {
                    return Ok(false);
                };
                let mut buf = chunks.buf().map_err(|e| format!("model record {key}: {e}"))?;
                let d = pb::ModelDelta::decode(&mut buf);
                if let Some(e) = buf.error() {
                    return Err(format!("model record {key}: {e}").into());
                }
                let d = d.map_err(|e| format!("model record {key}: {e}"))?;
                self.delta(key, &r, d)
            }
            None => Err(format!("model record {key} is empty").into()),
        }
    }

    /// A delta, taken only on exactly the version it was taken against.
    fn delta(&mut self, key: &str, r: &pb::ModelRecord, d: pb::ModelDelta) -> Result<bool, ReplicaError> {
        let Some(h) = self.held.as_mut() else { return Ok(false) };
        if h.epoch != r.epoch || h.version != d.base_version {
            return Ok(false);
        }
        let d = d
            .model
            .ok_or_else(|| format!("model record {key}: a delta without a model"))?;
        self.updates.push(Update::Delta(Box::new(d)));
        (h.version, h.published_ms) = (r.version, r.published_unix_ms);
        h.oldest_update_ms = r.oldest_update_unix_ms;
        Ok(true)
    }

    /// A snapshot chunk; `times`: when it was published and when its
    /// oldest update was learned.
    fn chunk(
        &mut self,
        epoch: u64,
        version: u64,
        times: (u64, u64),
        c: pb::SnapshotChunk,
    ) -> Result<bool, ReplicaError> {
        let piece = Piece {
            epoch,
            version,
            index: c.index,
            count: c.count,
            crc: c.crc32,
        };
        let Some(chunks) = stage(&mut self.staging, piece, &c.data)? else {
            return Ok(false);
        };
        // A full version makes every update before it moot.
        self.updates.clear();
        self.updates.push(Update::Full(FullVersion {
            name: format!("{epoch}/{version}"),
            chunks,
        }));
        self.held = Some(Held {
            epoch,
            version,
            published_ms: times.0,
            oldest_update_ms: times.1,
        });
        Ok(true)
    }

    /// The updates from the version last taken to the newest complete
    /// one, oldest first (a full version first, if one came).
    pub fn take_updates(&mut self) -> Vec<Update> {
        std::mem::take(&mut self.updates)
    }

    /// An update could not be put into the model served: what it holds
    /// is no longer the version named, so only a full version will do.
    pub fn lost(&mut self) {
        self.held = None;
        self.updates.clear();
    }

    /// The version held, if any.
    pub fn served(&self) -> Option<Served> {
        self.held.as_ref().map(|h| (h.epoch, h.version, h.published_ms))
    }

    /// When the learner learned the oldest update of the version held
    /// that the version before it lacked (0: unknown).
    pub fn oldest_update_ms(&self) -> u64 {
        self.held.as_ref().map_or(0, |h| h.oldest_update_ms)
    }

    /// What the records read so far hold.
    pub fn index(&self) -> &TopicIndex {
        &self.index
    }
}
