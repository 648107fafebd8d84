//! The model topic's records (proto/model_topic.proto): what a learner
//! sends ([`Publisher`]: a full version in chunks now and then, deltas
//! between, deletions of what a newer full version makes useless) and how
//! a replica rebuilds versions from them ([`Assembler`]: only complete
//! versions, never backwards). Pure logic: no Kafka here.

use super::ReplicaError;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use prost::Message as _;

use super::changes::{Shape, delta_of_changes, weights_held};
use super::image::scoring_pieces;
use super::spool::{SPILL_AT, Tape};
use crate::checkpoint::pb;
use crate::features::{FeatureHash, LEGACY_PERSONAL_SCALE};
use crate::model::Model;

/// The newest format of model-topic records this build reads and writes;
/// it reads every older one. 2 may carry the sparse weight layout, which
/// a version-1 reader would take for an empty model; 3 may carry a delta
/// in pieces (`DeltaChunk`), which a version-2 reader would not know; 4 a
/// delta that replays the budget's pruning (`Entries.prune_at_or_below`),
/// which a version-3 reader would apply wrongly; 5 a delta whose sparse
/// keys come as gaps (`Entries.key_gaps`: 5-6 bytes an entry against 12),
/// which a version-4 reader would take for no keys; 6 a model with a byte
/// LR (`ModelState.byte_lr`), which a version-5 reader would score
/// without; 7 a model that hashes its features with version 2
/// (`FeatureConfig.hash_version`), which a version-6 reader would hash
/// with version 1; 8 a model whose personal copies are not scaled by 2
/// (`FeatureConfig.personal_scale`) or that has a personal switch
/// (`ModelState.personal_switch`), which a version-7 reader would score
/// users' messages without, at 2; 9 a model with a stack
/// (`ModelState.stack`), which a version-8 reader would combine its old
/// way; 10 a model with the byte context models
/// (`ModelState` field 13), which a version-9 reader would score
/// without; 11 a model with added members carried by name
/// (`ModelState.members`), which a version-10 reader would score without.
/// A record is stamped
/// with the oldest format that reads it right: [`PLAIN_FORMAT`] for full
/// versions and dense deltas, which replicas of the builds before read.
pub const MODEL_FORMAT_VERSION: u32 = 11;
/// The format of a delta with sparse entries' key gaps (5).
pub(super) const SPARSE_FORMAT: u32 = 5;
/// The format of every record of a model hashed with version 2 (7): a
/// reader of an older format would hash with version 1, so it skips them.
pub(super) const HASH_V2_FORMAT: u32 = 7;

/// The format of every record of a model whose personal scale is not the
/// one every build before the setting used, or that has a personal switch
/// (8): a reader of an older format would score users' messages at that
/// scale without the switch, so it skips them.
pub(super) const PERSONAL_SCALE_FORMAT: u32 = 8;

/// The format of every record of a model with a stack (9): a reader of
/// an older format would combine the members its old way, so it skips
/// them.
pub(super) const STACK_FORMAT: u32 = 9;

/// The format of every record of a model with added members of its stack
/// (11, `ModelState.members`): a reader of an older format would score
/// without them, so it skips them.
pub(super) const MEMBERS_FORMAT: u32 = 11;

/// The format of every record but a delta of sparse entries.
const PLAIN_FORMAT: u32 = 3;

/// The oldest format that reads a record of `m` right, from `format`,
/// what its content needs.
fn stamp(m: &Model, format: u32) -> u32 {
    if m.added().any() {
        MEMBERS_FORMAT
    } else if m.stack().is_some() {
        STACK_FORMAT
    } else if m.features().personal_scale != LEGACY_PERSONAL_SCALE {
        PERSONAL_SCALE_FORMAT
    } else if m.features().hash == FeatureHash::V2 {
        HASH_V2_FORMAT
    } else {
        format
    }
}

/// The most a delta record may take, whatever the chunk size: under
/// Kafka's default limit of 1 MiB a record, with room for the key and headers.
pub const MAX_DELTA_BYTES: usize = 900 << 10;

/// A record to send: a key and a value, or a deletion (a tombstone, which
/// compaction uses to drop the key).
#[derive(Clone, Debug, PartialEq)]
pub struct Outgoing {
    pub key: String,
    pub value: Option<Vec<u8>>,
}

fn snapshot_key(epoch: u64, version: u64, index: usize) -> String {
    format!("snapshot/{epoch:020}/{version:020}/{index:06}")
}

fn delta_key(epoch: u64, version: u64) -> String {
    format!("delta/{epoch:020}/{version:020}")
}

/// How a learner publishes.
#[derive(Clone, Debug)]
pub struct PublishSettings {
    /// Publish a new version at most this often (when the model changed).
    pub interval: Duration,
    /// A full version at least this often (deltas between).
    pub snapshot_interval: Duration,
    /// Bytes of snapshot per record, and the most a delta may take (under
    /// Kafka's default limit of 1 MiB a record).
    pub chunk_bytes: usize,
    /// The largest delta sent as one record; a larger one goes in
    /// `chunk_bytes` pieces.
    pub delta_bytes: usize,
}

impl Default for PublishSettings {
    fn default() -> Self {
        PublishSettings {
            interval: Duration::from_millis(250),
            snapshot_interval: Duration::from_secs(600),
            chunk_bytes: 512 << 10,
            delta_bytes: MAX_DELTA_BYTES,
        }
    }
}

/// Whether a delta carries sparse entries (their keys as gaps).
fn sparse_entries(d: &pb::ModelDelta) -> bool {
    matches!(
        d.model.as_ref().and_then(|m| m.state.as_ref()),
        Some(pb::model_state::State::Linear(pb::LinearState { entries: Some(_), .. }))
    )
}

/// What one publication was: a full version, or a delta (the same names a
/// predictor's `classifyd_model_update_duration_seconds{kind}` uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Full,
    Delta,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Full => "full",
            Kind::Delta => "delta",
        }
    }
}

/// The learner's side: turns model versions into records.
#[derive(Debug)]
pub struct Publisher {
    epoch: u64,
    settings: PublishSettings,
    /// The version last published, what a delta after it assumes, and
    /// the size of the last full version, in bytes and weights held.
    last: Option<(u64, Shape)>,
    snapshot_size: (usize, usize),
    last_snapshot: Option<Instant>,
    last_publish: Option<Instant>,
    /// When the learner learned the oldest update not yet published (ms).
    unpublished_since: Option<u64>,
    /// Keys in the topic that the next full version makes useless.
    live: BTreeSet<String>,
}

impl Publisher {
    /// A publisher for a learner run of `epoch`, over a topic that holds
    /// `live` keys (deleted after its first full version).
    pub fn new(epoch: u64, settings: PublishSettings, live: BTreeSet<String>) -> Self {
        Publisher {
            epoch,
            settings,
            last: None,
            snapshot_size: (0, 1),
            last_snapshot: None,
            last_publish: None,
            unpublished_since: None,
            live,
        }
    }

    /// The model is at `version` now (after a message): remembers when it
    /// first moved past the version last published, which the next
    /// publication carries (a replica's staleness counts from there).
    /// Reads the clock only then.
    pub fn observe(&mut self, version: u64, now_ms: impl FnOnce() -> u64) {
        // Version 0 has learned nothing: nothing to publish yet.
        if self.unpublished_since.is_none() && version > 0 && self.published_version() != Some(version) {
            self.unpublished_since = Some(now_ms());
        }
    }

    /// The version last published, if any.
    pub fn published_version(&self) -> Option<u64> {
        self.last.as_ref().map(|(v, _)| *v)
    }

    /// Whether a model at `version` should be published now: it is not the
    /// one last published and the interval has passed.
    pub fn due(&self, version: u64) -> bool {
        self.published_version() != Some(version)
            && self.last_publish.is_none_or(|t| t.elapsed() >= self.settings.interval)
    }

    /// Sends the records that publish `m` to `send`, in order (a delta
    /// of the rows learning changed since the last publication, when one
    /// will do), and says what kind of publication they are. A full
    /// version waits on a tape (a temporary file when large) and is sent a
    /// chunk at a time: the learner holds no image of the model, nor its
    /// encoding whole. The first call starts `m`'s change tracking.
    pub fn publish(&mut self, m: &mut Model, now_ms: u64, send: &mut dyn FnMut(Outgoing)) -> Kind {
        // 0: not known (no update was observed since the last publication).
        let mut header = Header {
            format: PLAIN_FORMAT,
            epoch: self.epoch,
            version: m.version(),
            now_ms,
            oldest_update_ms: self.unpublished_since.take().unwrap_or(0),
        };
        m.track_changes();
        let changed = m.take_changes();
        let members = super::changes::Members::take(m);
        let pruned_at = m.take_pruned_at();
        let shape = Shape::of(m);
        let snapshot_due = self
            .last_snapshot
            .is_none_or(|t| t.elapsed() >= self.settings.snapshot_interval);
        self.last_publish = Some(Instant::now());
        let mut why = match (&self.last, snapshot_due, &changed) {
            (None, ..) => "first",
            (_, true, _) => "interval",
            (_, _, None) => "changes not tracked",
            (Some((_, before)), ..) => before.departure(&shape),
        };
        if let (Some((base, _)), "", Some(buckets)) = (&self.last, why, changed) {
            let delta = pb::ModelDelta {
                base_version: *base,
                model: Some(delta_of_changes(m, &buckets, &members, pruned_at)),
            };
            if sparse_entries(&delta) {
                header.format = SPARSE_FORMAT;
            }
            header.format = stamp(m, header.format);
            // A delta over half a full version gives way to one (cheaper
            // to read whole); a full version's size now, from the last
            // one's and the weights held since (a growing model's delta
            // may outgrow the last full version, not this one).
            let len = delta.encoded_len();
            let (bytes, held) = self.snapshot_size;
            let grown = (weights_held(m) as f64 / held.max(1) as f64).max(1.0);
            if len as f64 * 2.0 <= bytes as f64 * grown {
                self.send_delta(&header, delta, len, send);
                self.last = Some((header.version, shape));
                return Kind::Delta;
            }
            why = "delta over half a full version";
        }
        header.format = stamp(m, header.format);
        tracing::info!(version = header.version, why, "publishing a full version");
        if let Err(error) = self.send_snapshot(&header, m, send) {
            // What was sent of it is incomplete, which replicas never
            // serve; the next publication is a full version again.
            tracing::error!(%error, version = header.version, "cannot publish a full version; trying again at the next");
            self.last = None;
            return Kind::Full;
        }
        self.snapshot_size.1 = weights_held(m);
        self.last = Some((header.version, shape));
        self.last_snapshot = Some(Instant::now());
        Kind::Full
    }

    /// A delta (of `len` bytes encoded) as one record, or in pieces when
    /// it is over a record's room.
    fn send_delta(&mut self, h: &Header, delta: pb::ModelDelta, len: usize, send: &mut dyn FnMut(Outgoing)) {
        let whole = delta_key(h.epoch, h.version);
        if len <= self.settings.delta_bytes {
            self.live.insert(whole.clone());
            send(Outgoing {
                key: whole,
                value: Some(h.record(pb::model_record::Body::Delta(delta))),
            });
            return;
        }
        let mut bytes = Vec::with_capacity(len);
        // Room for all of it: no error.
        let _ = delta.encode(&mut bytes);
        drop(delta);
        let crc = crc32fast::hash(&bytes);
        let tape = Tape::from_bytes(bytes);
        let cut = Cut {
            header: h,
            tape: &tape,
            crc,
            room: self.settings.chunk_bytes,
            key: &|i| format!("{whole}/{i:06}"),
            body: &|index, count, crc32, data| {
                pb::model_record::Body::DeltaChunk(pb::DeltaChunk {
                    index,
                    count,
                    crc32,
                    data,
                })
            },
        };
        // A tape in memory: no error.
        let _ = cut.send(send, &mut self.live);
    }

    /// A full version of `m` in chunks, then the deletions of what it
    /// supersedes. The image is encoded once, a piece at a time, onto a
    /// tape (a temporary file past a few MB) while its CRC-32 is summed;
    /// then the chunks, which each name the whole's length and CRC-32, are
    /// read back from the tape and sent one at a time. The learner holds
    /// neither the image nor its encoding whole.
    fn send_snapshot(&mut self, h: &Header, m: &Model, send: &mut dyn FnMut(Outgoing)) -> std::io::Result<()> {
        let mut tape = Tape::new(SPILL_AT);
        let mut crc = crc32fast::Hasher::new();
        let mut buf = Vec::new();
        let mut written = Ok(());
        scoring_pieces(m, h.now_ms, &mut |piece| {
            buf.clear();
            // Into a Vec, which grows: never short of room.
            let _ = piece.encode(&mut buf);
            crc.update(&buf);
            if written.is_ok() {
                written = tape.append(&buf);
            }
        });
        written?;
        self.snapshot_size.0 = tape.len() as usize;
        let cut = Cut {
            header: h,
            tape: &tape,
            crc: crc.finalize(),
            room: self.settings.chunk_bytes,
            key: &|i| snapshot_key(h.epoch, h.version, i as usize),
            body: &|index, count, crc32, data| {
                pb::model_record::Body::Chunk(pb::SnapshotChunk {
                    index,
                    count,
                    crc32,
                    data,
                })
            },
        };
        let mut sent = BTreeSet::new();
        if let Err(e) = cut.send(send, &mut sent) {
            // Deleted by the next full version, like any key superseded.
            self.live.extend(sent);
            return Err(e);
        }
        // Then delete what this full version supersedes.
        for key in std::mem::replace(&mut self.live, sent) {
            send(Outgoing { key, value: None });
        }
        Ok(())
    }
}

/// The body of chunk (index, count, the whole's CRC-32, data).
type Body<'a> = &'a dyn Fn(u32, u32, u32, Vec<u8>) -> pb::model_record::Body;

/// A whole on `tape`, of CRC-32 `crc`, cut into records of `room` bytes
/// (at least one record): chunk `i` named by `key(i)`, its bytes wrapped
/// by `body`.
struct Cut<'a> {
    header: &'a Header,
    tape: &'a Tape,
    crc: u32,
    room: usize,
    key: &'a dyn Fn(u32) -> String,
    body: Body<'a>,
}

impl Cut<'_> {
    /// Sends the records in order, each chunk read from the tape just
    /// before it is sent; notes each key sent in `sent`.
    fn send(&self, send: &mut dyn FnMut(Outgoing), sent: &mut BTreeSet<String>) -> std::io::Result<()> {
        let (len, room) = (self.tape.len(), self.room.max(1) as u64);
        let count = u32::try_from(len.div_ceil(room).max(1)).map_err(std::io::Error::other)?;
        for index in 0..count {
            let at = u64::from(index) * room;
            let mut data = vec![0u8; room.min(len - at) as usize];
            self.tape.read_at(&mut data, at)?;
            let key = (self.key)(index);
            sent.insert(key.clone());
            send(Outgoing {
                key,
                value: Some(self.header.record((self.body)(index, count, self.crc, data))),
            });
        }
        Ok(())
    }
}

/// What every record of one publication says of it.
struct Header {
    format: u32,
    epoch: u64,
    version: u64,
    now_ms: u64,
    oldest_update_ms: u64,
}

impl Header {
    fn record(&self, body: pb::model_record::Body) -> Vec<u8> {
        pb::ModelRecord {
            format_version: self.format,
            epoch: self.epoch,
            version: self.version,
            published_unix_ms: self.now_ms,
            oldest_update_unix_ms: self.oldest_update_ms,
            body: Some(body),
        }
        .encode_to_vec()
    }
}

/// What a model topic holds, as its records pass in topic order: the keys
/// not deleted and the newest (epoch, version) any record names. All a
/// learner needs of the topic before it publishes; a replica's
/// [`Assembler`] keeps one too.
#[derive(Debug, Default)]
pub struct TopicIndex {
    newest_seen: (u64, u64),
    live: BTreeSet<String>,
}

impl TopicIndex {
    /// Notes one record, and returns it decoded (`None`: a deletion).
    pub fn note(&mut self, key: &str, value: Option<&[u8]>) -> Result<Option<pb::ModelRecord>, ReplicaError> {
        let Some(value) = value else {
            self.live.remove(key);
            return Ok(None);
        };
        self.live.insert(key.to_string());
        let r = pb::ModelRecord::decode(value).map_err(|e| format!("model record {key}: {e}"))?;
        if !(1..=MODEL_FORMAT_VERSION).contains(&r.format_version) {
            return Err(format!(
                "model record {key} has format version {}, this build reads 1 to {MODEL_FORMAT_VERSION}",
                r.format_version
            )
            .into());
        }
        self.newest_seen = self.newest_seen.max((r.epoch, r.version));
        Ok(Some(r))
    }

    /// The newest (epoch, version) any record has named.
    pub fn newest_seen(&self) -> (u64, u64) {
        self.newest_seen
    }

    /// Keys whose latest record is not a deletion (a learner deletes them
    /// after its first full version).
    pub fn live_keys(&self) -> &BTreeSet<String> {
        &self.live
    }
}
