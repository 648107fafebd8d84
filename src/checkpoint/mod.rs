//! Checkpoints: the whole pipeline state (features, hyperparameters, labels,
//! weights, averaging and optimizer state, metric counters, the join cache)
//! and the input position of every source, in one protobuf message
//! (proto/checkpoint.proto) behind a header with a CRC-32.
//!
//! Saving writes a temporary file, fsyncs it, renames it into place and
//! fsyncs the directory, then prunes all but the newest few. Loading takes
//! the newest checkpoint that is intact and compatible; a damaged or
//! incompatible one is reported (naming the file and the cause) and skipped.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use prost::Message as _;

use crate::features::FeatureConfig;
use crate::model::{HyperChoice, Model};
use crate::pipeline::{Pipeline, PipelineConfig};

mod capture;
pub mod lessons;
mod positions;
mod restore;
mod stream;

pub use capture::{
    WeightsPlacement, capture, capture_model, capture_model_with, capture_with, fragments, member_to_pb, members_to_pb,
    model_digest, stack_to_pb,
};
pub use positions::{InputKey, LinePosition, Positions, UnknownPosition};
pub use restore::{RestoreError, legacy_members, restore, restore_model};
pub use stream::{load as load_file, read_model};

/// The generated protobuf types.
pub mod pb {
    #![allow(clippy::all, missing_docs)]
    include!(concat!(env!("OUT_DIR"), "/classifyd.checkpoint.v1.rs"));
}

/// Version of the on-disk format and of the feature hashing; a checkpoint
/// with a version outside `OLDEST_FORMAT_VERSION..=FORMAT_VERSION` is
/// refused. 2 added the sparse weight layout (`LinearState.entries`),
/// which a version-1 reader would take for an empty model; a version-1
/// checkpoint reads the same under 2. 3 added version 2 of the feature
/// hash (`FeatureConfig.hash_version`), which a version-2 reader would
/// ignore and hash with version 1. 4 added the personal scale
/// (`FeatureConfig.personal_scale`) and switch (`ModelState.personal_switch`),
/// which a version-3 reader would ignore and score users' messages at 2
/// with the whole model. 5 added the stack (`ModelState.stack`), which a
/// version-4 reader would ignore and combine the members its old way. 6
/// added the byte context models (`ModelState` field 13), which a
/// version-5 reader would ignore and score without. 7 carries the stack's
/// added members by name (`ModelState.members`: what fields 10 and 13
/// held), which a version-6 reader would ignore. A
/// checkpoint is stamped with the oldest format that reads it right
/// ([`format_for`]): 2 for a model that hashes with version 1, at the
/// personal scale 2 without a stack, so older builds still read it.
pub const FORMAT_VERSION: u32 = 7;

/// The format a checkpoint of `model` is stamped with.
pub(crate) fn format_for(model: &crate::model::Model) -> u32 {
    let features = model.features();
    if model.added().any() {
        return 7;
    }
    if model.stack().is_some() {
        return 5;
    }
    if features.personal_scale != crate::features::LEGACY_PERSONAL_SCALE {
        return 4;
    }
    match features.hash {
        crate::features::FeatureHash::V1 => 2,
        crate::features::FeatureHash::V2 => 3,
    }
}
/// The oldest format this build reads.
pub const OLDEST_FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"CLSFYDCK";
const HEADER: usize = 8 + 4 + 8 + 4;
/// Checkpoints kept in the directory (the newest first).
pub const DEFAULT_KEEP: usize = 3;

/// Why a checkpoint could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    // The cause is in the message itself, not the error chain, so it is
    // printed once.
    #[error("checkpoint {path}: {error}")]
    Io { path: PathBuf, error: io::Error },
    #[error("checkpoint {path} is damaged: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error("checkpoint {path} has format version {found}, this build reads versions 1 to {expected}")]
    Incompatible { path: PathBuf, found: u32, expected: u32 },
    #[error(
        "checkpoint directory {dir} is in use by process {holder} (one process writes a checkpoint \
         directory: a second would overwrite its checkpoints); stop it or give this one another --checkpoint-dir"
    )]
    Locked { dir: PathBuf, holder: String },
    #[error("no usable checkpoint in {dir}: {tried}")]
    NoneUsable { dir: PathBuf, tried: String },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> CheckpointError + '_ {
    move |error| CheckpointError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// What a save wrote.
#[derive(Clone, Debug)]
pub struct Saved {
    pub path: PathBuf,
    pub bytes: u64,
    pub duration: Duration,
    pub sequence: u64,
}

/// The pid file of a checkpoint directory: its writer writes its pid
/// there for the error a second writer gets. The lock itself is the
/// kernel's, on the directory ([`lock`]): deleting this file releases
/// nothing.
pub const LOCK_FILE: &str = "LOCK";

/// A directory of numbered checkpoints.
#[derive(Debug)]
pub struct CheckpointDir {
    dir: PathBuf,
    keep: usize,
    next_sequence: u64,
    /// The writer's lock, held as long as this value lives (`None`: read only).
    _lock: Option<File>,
}

/// Takes the writer's lock of `dir`, or says who holds it: an exclusive
/// `flock` on the directory itself, held by an open descriptor, so the
/// kernel drops it with the process (a kill -9 leaves no stale lock) and
/// no path an operator removes can release it while the writer lives.
/// The writer's pid goes to [`LOCK_FILE`] for the error a second one gets.
fn lock(dir: &Path) -> Result<File, CheckpointError> {
    let held = File::open(dir).map_err(io_err(dir))?;
    let path = dir.join(LOCK_FILE);
    match held.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let holder = fs::read_to_string(&path)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| format!("unknown (its pid file {LOCK_FILE} is gone or not written yet)"));
            return Err(CheckpointError::Locked {
                dir: dir.to_path_buf(),
                holder,
            });
        }
        Err(fs::TryLockError::Error(error)) => return Err(io_err(dir)(error)),
    }
    let mut pid = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(io_err(&path))?;
    writeln!(pid, "{}", std::process::id()).map_err(io_err(&path))?;
    Ok(held)
}

impl CheckpointDir {
    /// Opens (creating) `dir` to write checkpoints there: takes its lock
    /// first, and refuses a directory another process writes
    /// ([`CheckpointError::Locked`], naming its pid) before reading anything.
    pub fn open(dir: impl Into<PathBuf>, keep: usize) -> Result<Self, CheckpointError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|error| {
            // A file in the way: create_dir_all says only "File exists".
            let error = match error.kind() {
                io::ErrorKind::AlreadyExists => io::Error::new(
                    io::ErrorKind::NotADirectory,
                    "not a directory (--checkpoint-dir names a directory)",
                ),
                _ => error,
            };
            io_err(&dir)(error)
        })?;
        let lock = lock(&dir)?;
        Self::listed(dir, keep, Some(lock))
    }

    /// Opens `dir` to read its checkpoints only (`predict`, `inspect`),
    /// without the writer's lock: a running daemon may keep writing there.
    pub fn open_read(dir: impl Into<PathBuf>) -> Result<Self, CheckpointError> {
        Self::listed(dir.into(), DEFAULT_KEEP, None)
    }

    /// `dir` as it stands (listed after the lock is taken, for a writer).
    fn listed(dir: PathBuf, keep: usize, lock: Option<File>) -> Result<Self, CheckpointError> {
        let next_sequence = list(&dir)?.first().map_or(1, |(s, _)| s + 1);
        Ok(CheckpointDir {
            dir,
            keep: keep.max(1),
            next_sequence,
            _lock: lock,
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes `ckpt` atomically as the newest checkpoint and prunes old
    /// ones (the whole message encoded at once: a daemon saves with
    /// [`CheckpointDir::save_pipeline`]).
    pub fn save(&mut self, ckpt: &mut pb::Checkpoint) -> Result<Saved, CheckpointError> {
        ckpt.sequence = self.next_sequence;
        self.commit(|mut f| {
            let payload = ckpt.encode_to_vec();
            let header = stream::header(ckpt.format_version, payload.len() as u64, crc32fast::hash(&payload));
            f.write_all(&header)?;
            f.write_all(&payload)?;
            f.sync_all()?;
            Ok((HEADER + payload.len()) as u64)
        })
    }

    /// Writes the pipeline's checkpoint, with `positions`, as a stream:
    /// the weights go out in pieces, never copied whole.
    pub fn save_pipeline(&mut self, p: &Pipeline, positions: &Positions) -> Result<Saved, CheckpointError> {
        let sequence = self.next_sequence;
        self.commit(|f| stream::write(f, p, positions, sequence))
    }

    /// Writes the next checkpoint with `write` (given its temporary file;
    /// it returns the bytes written, synced), renames it into place,
    /// makes that durable and prunes old ones.
    fn commit(&mut self, write: impl FnOnce(File) -> io::Result<u64>) -> Result<Saved, CheckpointError> {
        let start = Instant::now();
        let sequence = self.next_sequence;
        let path = self.dir.join(format!("checkpoint-{sequence:012}.ckpt"));
        let tmp = self.dir.join(format!(".checkpoint-{sequence:012}.tmp"));
        let written = File::create(&tmp)
            .and_then(write)
            .and_then(|bytes| fs::rename(&tmp, &path).map(|()| bytes));
        let bytes = match written {
            Ok(bytes) => bytes,
            Err(error) => {
                // A full disk or a file size limit: the partial file goes,
                // the last good checkpoint stays the newest.
                let _ = fs::remove_file(&tmp);
                return Err(CheckpointError::Io { path: tmp, error });
            }
        };
        // Make the rename durable.
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(&self.dir))?;
        self.next_sequence += 1;
        for (_, old) in list(&self.dir)?.into_iter().skip(self.keep) {
            let _ = fs::remove_file(old);
        }
        Ok(Saved {
            path,
            bytes,
            duration: start.elapsed(),
            sequence,
        })
    }

    /// The newest intact, compatible checkpoint, restored with `cfg`
    /// (read as a stream: [`load_file`]), its positions and its path, or
    /// `None` if there is none at all. Damaged ones are logged and
    /// skipped; if every one is damaged that is an error (starting from
    /// scratch would silently lose state).
    pub fn load_latest(&self, cfg: &PipelineConfig) -> Result<Option<Loaded>, CheckpointError> {
        let files = list(&self.dir)?;
        if files.is_empty() {
            return Ok(None);
        }
        let mut tried = Vec::new();
        let count = files.len();
        for (i, (_, path)) in files.into_iter().enumerate() {
            match stream::load(&path, cfg.clone()) {
                Ok((pipeline, positions)) => return Ok(Some((pipeline, positions, path))),
                Err(e) if i + 1 < count => {
                    tracing::error!(error = %e, "refusing checkpoint; trying the previous one");
                    tried.push(e.to_string());
                }
                Err(e) => {
                    tracing::error!(error = %e, "refusing checkpoint; there is no previous one");
                    tried.push(e.to_string());
                }
            }
        }
        Err(CheckpointError::NoneUsable {
            dir: self.dir.clone(),
            tried: tried.join("; "),
        })
    }
}

/// A restored checkpoint: its pipeline, its positions, its file.
pub type Loaded = (Pipeline, Positions, PathBuf);

/// Checkpoint files in `dir`, newest first.
fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, CheckpointError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(seq) = name.strip_prefix("checkpoint-").and_then(|s| s.strip_suffix(".ckpt"))
            && let Ok(seq) = seq.parse::<u64>()
        {
            out.push((seq, entry.path()));
        }
    }
    out.sort_by_key(|e| std::cmp::Reverse(e.0));
    Ok(out)
}

/// Reads and verifies one checkpoint file.
pub fn read_file(path: &Path) -> Result<pb::Checkpoint, CheckpointError> {
    let bytes = fs::read(path).map_err(io_err(path))?;
    decode_file(&bytes, path)
}

/// Verifies and decodes the bytes of a checkpoint file (`path` names it in
/// errors): header, checksum, protobuf, and a trial restore.
pub fn decode_file(bytes: &[u8], path: &Path) -> Result<pb::Checkpoint, CheckpointError> {
    let corrupt = |detail: String| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        detail,
    };
    let payload = bytes.get(HEADER..).unwrap_or_default();
    let (version, _, crc) = stream::read_header(bytes, payload.len() as u64, path)?;
    if crc32fast::hash(payload) != crc {
        return Err(corrupt("checksum mismatch".into()));
    }
    let ckpt = pb::Checkpoint::decode(payload).map_err(|e| corrupt(format!("cannot decode: {e}")))?;
    if ckpt.format_version != version {
        return Err(CheckpointError::Incompatible {
            path: path.to_path_buf(),
            found: ckpt.format_version,
            expected: FORMAT_VERSION,
        });
    }
    // Check it rebuilds, so a bad one is refused here rather than later.
    let check = PipelineConfig {
        limits: crate::model::Limits::unbounded(),
        ..PipelineConfig::default()
    };
    restore(ckpt.clone(), check).map_err(|e| corrupt(e.to_string()))?;
    Ok(ckpt)
}

#[cfg(test)]
mod tests;

/// A pipeline a run starts from: the checkpoint's, with the positions it
/// recorded, or a fresh one.
#[derive(Debug)]
pub struct Resumed {
    pub pipeline: Pipeline,
    pub positions: Positions,
    /// The checkpoint it came from; none for a fresh pipeline.
    pub from: Option<PathBuf>,
}

/// Builds the pipeline: from the newest good checkpoint in `dir` if there
/// is one (its feature and model settings win over the flags, since the
/// weights only mean something under them), else fresh from the flags.
pub fn load_or_new(
    dir: Option<&CheckpointDir>,
    features: &FeatureConfig,
    hyper: &HyperChoice,
    cfg: PipelineConfig,
) -> Result<Resumed, CheckpointError> {
    if let Some(dir) = dir
        && let Some((pipeline, positions, path)) = dir.load_latest(&cfg)?
    {
        if pipeline.model().features() != features || pipeline.model().choice() != hyper {
            tracing::warn!(
                checkpoint = %path.display(),
                "the checkpoint's feature and model settings differ from the flags; using the checkpoint's"
            );
        }
        tracing::info!(checkpoint = %path.display(), version = pipeline.model().version(), "resumed from checkpoint");
        return Ok(Resumed {
            pipeline,
            positions,
            from: Some(path),
        });
    }
    Ok(Resumed {
        pipeline: Pipeline::new(Model::new(hyper.clone(), *features), cfg),
        positions: Positions::default(),
        from: None,
    })
}
