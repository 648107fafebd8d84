//! Checkpoints: the whole pipeline state (features, hyperparameters, labels,
//! weights, averaging and optimizer state, metric counters, the join cache)
//! and the input position of every source, in one protobuf message
//! (proto/checkpoint.proto) behind a header with a CRC-32.
//!
//! Saving writes a temporary file, fsyncs it, renames it into place and
//! fsyncs the directory, then prunes all but the newest few. Loading takes
//! the newest checkpoint that is intact and compatible; a damaged or
//! incompatible one is reported (naming the file and the cause) and skipped.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prost::Message as _;

use crate::eval::{ClassCounts, Outcome, Progressive, Tally};
use crate::features::{DocFreq, FeatureConfig, ValueMode};
use crate::message::BadReason;
use crate::model::weights::WeightsParts;
use crate::model::{Hyper, HyperChoice, Labels, Model, NaiveBayes, NameSketch, State, Task, Weights};
use crate::pipeline::{CacheEntry, Counters, FeedbackCache, Pipeline, PipelineConfig};
use crate::transport::{MARK_PREFIX, mark_key};

/// The generated protobuf types.
pub mod pb {
    #![allow(clippy::all, missing_docs)]
    include!(concat!(env!("OUT_DIR"), "/classifyd.checkpoint.v1.rs"));
}

/// Version of the on-disk format and of the feature hashing; a checkpoint
/// with another version is refused.
pub const FORMAT_VERSION: u32 = 1;
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
    #[error("checkpoint {path} has format version {found}, this build reads version {expected}")]
    Incompatible { path: PathBuf, found: u32, expected: u32 },
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

/// A directory of numbered checkpoints.
#[derive(Debug)]
pub struct CheckpointDir {
    dir: PathBuf,
    keep: usize,
    next_sequence: u64,
}

impl CheckpointDir {
    /// Opens (creating) `dir`.
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
        let next_sequence = list(&dir)?.first().map_or(1, |(s, _)| s + 1);
        Ok(CheckpointDir {
            dir,
            keep: keep.max(1),
            next_sequence,
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes `ckpt` atomically as the newest checkpoint and prunes old ones.
    pub fn save(&mut self, ckpt: &mut pb::Checkpoint) -> Result<Saved, CheckpointError> {
        let start = Instant::now();
        let sequence = self.next_sequence;
        ckpt.sequence = sequence;
        let payload = ckpt.encode_to_vec();
        let mut bytes = Vec::with_capacity(HEADER + payload.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        bytes.extend_from_slice(&payload);
        let path = self.dir.join(format!("checkpoint-{sequence:012}.ckpt"));
        let tmp = self.dir.join(format!(".checkpoint-{sequence:012}.tmp"));
        {
            let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
            f.write_all(&bytes).map_err(io_err(&tmp))?;
            f.sync_all().map_err(io_err(&tmp))?;
        }
        fs::rename(&tmp, &path).map_err(io_err(&path))?;
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
            bytes: bytes.len() as u64,
            duration: start.elapsed(),
            sequence,
        })
    }

    /// The newest intact, compatible checkpoint, or `None` if there is none
    /// at all. Damaged ones are logged and skipped; if every one is damaged
    /// that is an error (starting from scratch would silently lose state).
    pub fn load_latest(&self) -> Result<Option<(pb::Checkpoint, PathBuf)>, CheckpointError> {
        let files = list(&self.dir)?;
        if files.is_empty() {
            return Ok(None);
        }
        let mut tried = Vec::new();
        for (_, path) in files {
            match read_file(&path) {
                Ok(c) => return Ok(Some((c, path))),
                Err(e) => {
                    tracing::error!(error = %e, "refusing checkpoint; trying the previous one");
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
    let corrupt = |detail: String| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        detail,
    };
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err(corrupt("not a classifyd checkpoint (bad magic or too short)".into()));
    }
    // The slices below have the exact lengths of the arrays (HEADER checked above).
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or_default());
    if version != FORMAT_VERSION {
        return Err(CheckpointError::Incompatible {
            path: path.to_path_buf(),
            found: version,
            expected: FORMAT_VERSION,
        });
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().unwrap_or_default());
    let crc = u32::from_le_bytes(bytes[20..24].try_into().unwrap_or_default());
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len {
        return Err(corrupt(format!(
            "payload is {} bytes, header says {len}",
            payload.len()
        )));
    }
    if crc32fast::hash(payload) != crc {
        return Err(corrupt("checksum mismatch".into()));
    }
    let ckpt = pb::Checkpoint::decode(payload).map_err(|e| corrupt(format!("cannot decode: {e}")))?;
    if ckpt.format_version != FORMAT_VERSION {
        return Err(CheckpointError::Incompatible {
            path: path.to_path_buf(),
            found: ckpt.format_version,
            expected: FORMAT_VERSION,
        });
    }
    // Check it rebuilds, so a bad one is refused here rather than later.
    restore(ckpt.clone(), PipelineConfig::default()).map_err(corrupt)?;
    Ok(ckpt)
}

// ---- capture: pipeline -> protobuf ----

/// The protobuf form of the pipeline's state and the sources' positions.
pub fn capture(p: &Pipeline, positions: &BTreeMap<String, u64>) -> pb::Checkpoint {
    let m = &p.model;
    pb::Checkpoint {
        format_version: FORMAT_VERSION,
        created_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        features: Some(features_to_pb(&m.features)),
        hyper: Some(hyper_to_pb(&m.choice.single)),
        multilabel_hyper: Some(hyper_to_pb(&m.choice.multi)),
        model: Some(model_to_pb(m)),
        pipeline: Some(pb::PipelineState {
            progressive: Some(progressive_to_pb(&p.progressive)),
            test: Some(progressive_to_pb(&p.test)),
            published: Some(progressive_to_pb(&p.published)),
            cache: p
                .cache
                .entries()
                .into_iter()
                .map(|(id, e)| pb::CacheEntry {
                    id: id.to_string(),
                    text: e.text.clone(),
                    predicted: e.predicted.clone(),
                    score: e.score,
                    has_gold: e.gold.is_some(),
                    gold: e.gold.clone().unwrap_or_default(),
                    at_ms: e.at_ms,
                })
                .collect(),
            counters: Some(counters_to_pb(&p.counters, &p.cache)),
        }),
        // Marks ride in the positions map under `mark:KEY` (see
        // `transport::MARK_PREFIX`) and in a field of their own on disk.
        positions: positions
            .iter()
            .filter(|(k, _)| !k.starts_with(MARK_PREFIX))
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        position_marks: positions
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(MARK_PREFIX)?.to_string(), *v)))
            .collect(),
        sequence: 0,
    }
}

fn features_to_pb(f: &FeatureConfig) -> pb::FeatureConfig {
    let (lo, hi) = f.char_ngrams.unwrap_or((0, 0));
    pb::FeatureConfig {
        bits: f.bits as u32,
        seed: f.seed,
        word_ngrams: f.word_ngrams as u32,
        char_ngram_min: lo as u32,
        char_ngram_max: hi as u32,
        char_prefix_bytes: f.char_prefix_bytes as u64,
        char_lowercase: f.char_lowercase,
        value: f.value.as_str().to_string(),
        normalize: f.normalize,
        idf: f.idf,
    }
}

fn hyper_to_pb(h: &Hyper) -> pb::Hyper {
    pb::Hyper {
        learner: h.learner.as_str().to_string(),
        learning_rate: h.learning_rate,
        l2: h.l2,
        schedule: h.schedule.as_str().to_string(),
        power: h.power,
        adagrad_beta: h.adagrad_beta,
        arow_r: h.arow_r,
        average: h.average,
        nb_alpha: h.nb_alpha,
        at_least_one_label: h.at_least_one_label,
        threshold: h.threshold,
    }
}

fn rows_to_pb(buf: &[f32], stride: usize) -> pb::Rows {
    let mut rows = Vec::new();
    let mut values = Vec::new();
    if stride > 0 {
        for (r, row) in buf.chunks_exact(stride).enumerate() {
            if row.iter().any(|&v| v != 0.0) {
                rows.push(r as u32);
                values.extend_from_slice(row);
            }
        }
    }
    pb::Rows {
        stride: stride as u32,
        rows,
        values,
    }
}

fn model_to_pb(m: &Model) -> pb::ModelState {
    let state = match &m.state {
        State::Linear(w) => {
            let parts = w.to_parts();
            pb::model_state::State::Linear(pb::LinearState {
                rows: Some(rows_to_pb(&parts.buf, w.compact_stride())),
                scale: parts.scale,
                bsum: parts.bsum,
                steps: parts.steps,
                averaged: parts.averaged,
                adagrad: parts.adagrad,
                mirrored: parts.mirrored,
            })
        }
        State::NaiveBayes(nb) => pb::model_state::State::NaiveBayes(pb::NaiveBayesState {
            counts: Some(rows_to_pb(&nb.counts, nb.classes)),
            totals: (!nb.totals.is_empty()).then(|| rows_to_pb(&nb.totals, 1)),
            class_mass: nb.class_mass.clone(),
            class_docs: nb.class_docs.clone(),
            docs: nb.docs,
            mass: nb.mass,
            vocabulary: nb.vocabulary,
            multilabel: !nb.totals.is_empty(),
        }),
    };
    pb::ModelState {
        task: match m.task {
            None => String::new(),
            Some(Task::SingleLabel) => "single-label".into(),
            Some(Task::MultiLabel) => "multi-label".into(),
        },
        labels: m.labels.names().to_vec(),
        version: m.version,
        state: Some(state),
        sketch: m
            .sketch
            .entries()
            .into_iter()
            .map(|(bucket, name, count)| pb::SketchEntry {
                bucket,
                name: name.to_string(),
                count,
            })
            .collect(),
        sketch_offered: m.sketch.offered(),
        doc_freq: m.doc_freq.as_ref().map(|d| {
            let (buckets, counts) =
                d.df.iter()
                    .enumerate()
                    .filter(|e| *e.1 > 0)
                    .map(|(b, &c)| (b as u32, c))
                    .unzip();
            pb::DocFreq {
                docs: d.docs,
                buckets,
                counts,
            }
        }),
    }
}

fn tally_to_pb(t: &Tally) -> pb::Tally {
    pb::Tally {
        examples: t.examples,
        exact: t.exact,
        per_class: t
            .per_class
            .iter()
            .map(|c| pb::ClassCounts {
                tp: c.tp,
                fp: c.fp,
                r#fn: c.fn_,
            })
            .collect(),
        confusion: t.confusion.iter().flatten().copied().collect(),
    }
}

fn progressive_to_pb(p: &Progressive) -> pb::Progressive {
    pb::Progressive {
        labels: p.labels.clone(),
        single: p.single,
        positive_name: p.positive_name.clone(),
        total: Some(tally_to_pb(&p.total)),
        window: Some(tally_to_pb(&p.window)),
        recent: p
            .recent
            .iter()
            .map(|o| pb::Outcome {
                gold: o.gold.clone(),
                predicted: o.predicted.clone(),
                score: o.score,
            })
            .collect(),
        window_size: p.window_size as u64,
        roc_scores: p.roc.iter().map(|r| r.0).collect(),
        roc_positive: p.roc.iter().map(|r| r.1).collect(),
        roc_seen: p.roc_seen,
    }
}

fn counters_to_pb(c: &Counters, cache: &FeedbackCache) -> pb::Counters {
    pb::Counters {
        learned: c.learned,
        predicted: c.predicted,
        test_scored: c.test_scored,
        feedback_matched: c.feedback_matched,
        feedback_corrections: c.feedback_corrections,
        feedback_unmatched: c.feedback_unmatched,
        skipped: c.skipped,
        features: c.features,
        bad: BadReason::ALL
            .iter()
            .map(|r| (r.as_str().to_string(), c.bad[r.index()]))
            .collect(),
        predicted_by_label: c.predicted_by_label.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        cache_expired: cache.expired,
        cache_evicted: cache.evicted,
    }
}

// ---- restore: protobuf -> pipeline ----

/// Rebuilds the pipeline and the positions; `Err` names what is inconsistent.
pub fn restore(c: pb::Checkpoint, cfg: PipelineConfig) -> Result<(Pipeline, BTreeMap<String, u64>), String> {
    let features = features_from_pb(c.features.as_ref().ok_or("no feature config")?)?;
    let single = hyper_from_pb(c.hyper.as_ref().ok_or("no hyperparameters")?)?;
    let multi = match &c.multilabel_hyper {
        Some(h) => hyper_from_pb(h)?,
        None => single.clone(),
    };
    let model = model_from_pb(c.model.ok_or("no model")?, HyperChoice { single, multi }, features)?;
    let ps = c.pipeline.ok_or("no pipeline state")?;
    let prog = |p: Option<pb::Progressive>| {
        p.map(progressive_from_pb)
            .unwrap_or_else(|| Ok(Progressive::new(cfg.window, None)))
    };
    let progressive = prog(ps.progressive)?;
    let test = prog(ps.test)?;
    let published = prog(ps.published)?;
    let counters_pb = ps.counters.unwrap_or_default();
    let cache = FeedbackCache::from_entries(
        ps.cache
            .into_iter()
            .map(|e| {
                let gold = e.has_gold.then_some(e.gold);
                (
                    e.id,
                    CacheEntry {
                        text: e.text,
                        predicted: e.predicted,
                        score: e.score,
                        gold,
                        at_ms: e.at_ms,
                    },
                )
            })
            .collect(),
        counters_pb.cache_expired,
        counters_pb.cache_evicted,
    );
    let mut counters = Counters {
        learned: counters_pb.learned,
        predicted: counters_pb.predicted,
        test_scored: counters_pb.test_scored,
        feedback_matched: counters_pb.feedback_matched,
        feedback_corrections: counters_pb.feedback_corrections,
        feedback_unmatched: counters_pb.feedback_unmatched,
        skipped: counters_pb.skipped,
        features: counters_pb.features,
        predicted_by_label: counters_pb.predicted_by_label.into_iter().collect(),
        ..Counters::default()
    };
    for (k, v) in counters_pb.bad {
        if let Some(r) = BadReason::from_str_opt(&k) {
            counters.bad[r.index()] = v;
        }
    }
    let pipeline = Pipeline::from_parts(model, cfg, progressive, test, published, cache, counters);
    let marks = c.position_marks.into_iter().map(|(k, v)| (mark_key(&k), v));
    Ok((pipeline, c.positions.into_iter().chain(marks).collect()))
}

fn features_from_pb(f: &pb::FeatureConfig) -> Result<FeatureConfig, String> {
    let small = |v: u32, what: &str| u8::try_from(v).map_err(|_| format!("{what} {v} out of range"));
    let char_ngrams = match (f.char_ngram_min, f.char_ngram_max) {
        (0, 0) => None,
        (lo, hi) => Some((small(lo, "char n-gram min")?, small(hi, "char n-gram max")?)),
    };
    let cfg = FeatureConfig {
        bits: small(f.bits, "bits")?,
        seed: f.seed,
        word_ngrams: small(f.word_ngrams, "word n-grams")?,
        char_ngrams,
        char_prefix_bytes: f.char_prefix_bytes as usize,
        char_lowercase: f.char_lowercase,
        value: f.value.parse::<ValueMode>()?,
        normalize: f.normalize,
        idf: f.idf,
    };
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

fn hyper_from_pb(h: &pb::Hyper) -> Result<Hyper, String> {
    let hyper = Hyper {
        learner: h.learner.parse()?,
        learning_rate: h.learning_rate,
        l2: h.l2,
        schedule: h.schedule.parse()?,
        power: h.power,
        adagrad_beta: h.adagrad_beta,
        arow_r: h.arow_r,
        average: h.average,
        nb_alpha: h.nb_alpha,
        at_least_one_label: h.at_least_one_label,
        threshold: h.threshold,
    };
    hyper.validate().map_err(|e| e.to_string())?;
    Ok(hyper)
}

fn rows_from_pb(r: Option<pb::Rows>, buckets: usize, stride: usize) -> Result<Vec<f32>, String> {
    let r = r.unwrap_or_default();
    if r.stride as usize != stride && !(r.rows.is_empty() && r.values.is_empty()) {
        return Err(format!("row stride {} where {stride} was expected", r.stride));
    }
    if r.values.len() != r.rows.len() * stride {
        return Err(format!(
            "{} rows but {} values at stride {stride}",
            r.rows.len(),
            r.values.len()
        ));
    }
    // The same huge-page-backed table a fresh model gets.
    let mut out = crate::hugepages::zeroed(buckets * stride);
    for (i, &row) in r.rows.iter().enumerate() {
        let row = row as usize;
        if row >= buckets {
            return Err(format!("row {row} beyond {buckets} buckets"));
        }
        out[row * stride..(row + 1) * stride].copy_from_slice(&r.values[i * stride..(i + 1) * stride]);
    }
    Ok(out)
}

fn model_from_pb(m: pb::ModelState, choice: HyperChoice, features: FeatureConfig) -> Result<Model, String> {
    let task = match m.task.as_str() {
        "" => None,
        "single-label" => Some(Task::SingleLabel),
        "multi-label" => Some(Task::MultiLabel),
        other => return Err(format!("unknown task {other:?}")),
    };
    let hyper = choice.for_task(task.unwrap_or(Task::SingleLabel)).clone();
    let k = m.labels.len();
    let buckets = features.buckets();
    let state = match m.state.ok_or("no model state")? {
        pb::model_state::State::Linear(l) => {
            if hyper.learner == crate::model::Learner::NaiveBayes {
                return Err("naive Bayes hyperparameters with linear weights".into());
            }
            if l.mirrored && k != 2 {
                return Err(format!("a mirrored pair of weights with {k} labels"));
            }
            let columns = if l.mirrored { 1 } else { k };
            let stride = columns * (1 + l.averaged as usize + l.adagrad as usize);
            let parts = WeightsParts {
                buckets,
                classes: k,
                buf: rows_from_pb(l.rows, buckets, stride)?,
                scale: l.scale,
                bsum: l.bsum,
                steps: l.steps,
                averaged: l.averaged,
                adagrad: l.adagrad,
                mirrored: l.mirrored,
            };
            State::Linear(Weights::from_parts(parts).ok_or("inconsistent weight sizes")?)
        }
        pb::model_state::State::NaiveBayes(n) => {
            if hyper.learner != crate::model::Learner::NaiveBayes {
                return Err("linear hyperparameters with naive Bayes counts".into());
            }
            if n.class_mass.len() != k || n.class_docs.len() != k {
                return Err("naive Bayes class counts disagree with the labels".into());
            }
            State::NaiveBayes(NaiveBayes {
                buckets,
                classes: k,
                counts: rows_from_pb(n.counts, buckets, k)?,
                totals: if n.multilabel {
                    rows_from_pb(n.totals, buckets, 1)?
                } else {
                    Vec::new()
                },
                class_mass: n.class_mass,
                class_docs: n.class_docs,
                docs: n.docs,
                mass: n.mass,
                vocabulary: n.vocabulary,
            })
        }
    };
    let sketch = NameSketch::from_entries(
        m.sketch.into_iter().map(|e| (e.bucket, e.name, e.count)),
        m.sketch_offered,
    );
    let doc_freq = match (features.idf, m.doc_freq) {
        (false, _) => None,
        (true, None) => Some(DocFreq::new(buckets)),
        (true, Some(d)) => {
            if d.buckets.len() != d.counts.len() || d.buckets.iter().any(|&b| b as usize >= buckets) {
                return Err("document frequencies out of range".into());
            }
            let mut df = crate::hugepages::zeroed(buckets);
            for (b, c) in d.buckets.into_iter().zip(d.counts) {
                df[b as usize] = c;
            }
            Some(DocFreq::with_counts(df, d.docs))
        }
    };
    Ok(Model::from_parts(
        choice,
        features,
        task,
        Labels::from_names(m.labels),
        state,
        m.version,
        sketch,
        doc_freq,
    ))
}

fn tally_from_pb(t: Option<pb::Tally>, n: usize) -> Result<Tally, String> {
    let t = t.unwrap_or_default();
    if t.per_class.len() != n {
        return Err(format!("{} per-class counts for {n} labels", t.per_class.len()));
    }
    let confusion: Vec<Vec<u64>> = if t.confusion.is_empty() {
        vec![vec![0; n + 1]; n]
    } else if t.confusion.len() == n * (n + 1) {
        t.confusion.chunks(n + 1).map(<[u64]>::to_vec).collect()
    } else {
        return Err(format!(
            "confusion matrix of {} cells for {n} labels",
            t.confusion.len()
        ));
    };
    Ok(Tally {
        examples: t.examples,
        exact: t.exact,
        per_class: t
            .per_class
            .iter()
            .map(|c| ClassCounts {
                tp: c.tp,
                fp: c.fp,
                fn_: c.r#fn,
            })
            .collect(),
        confusion,
    })
}

fn progressive_from_pb(p: pb::Progressive) -> Result<Progressive, String> {
    let n = p.labels.len();
    let mut out = Progressive::new(p.window_size.max(1) as usize, p.positive_name);
    for l in &p.labels {
        out.intern(l);
    }
    out.single = p.single;
    out.total = tally_from_pb(p.total, n)?;
    out.window = tally_from_pb(p.window, n)?;
    for o in p.recent {
        if o.gold.iter().chain(&o.predicted).any(|&c| c as usize >= n) {
            return Err("window entry names an unknown label".into());
        }
        out.recent.push_back(Outcome {
            gold: o.gold,
            predicted: o.predicted,
            score: o.score,
        });
    }
    if p.roc_scores.len() != p.roc_positive.len() {
        return Err("ROC scores and flags differ in length".into());
    }
    out.roc = p.roc_scores.into_iter().zip(p.roc_positive).collect();
    out.roc_seen = p.roc_seen;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::SparseVec;
    use crate::model::{Learner, Scored};

    fn trained(learner: Learner) -> Pipeline {
        let features = FeatureConfig {
            bits: 12,
            ..FeatureConfig::default()
        };
        let mut p = Pipeline::new(
            Model::new(Hyper::defaults(learner), features),
            PipelineConfig::default(),
        );
        let lines = [
            r#"{"text": "win a free prize now", "label": "spam"}"#,
            r#"{"text": "see you at lunch", "label": "ham"}"#,
            r#"{"text": "claim your cash", "label": "spam"}"#,
            r#"{"id": "u1", "text": "free lunch"}"#,
            r#"{"text": "dinner tonight?", "label": "ham"}"#,
        ];
        for (i, l) in lines.iter().enumerate() {
            p.handle(l.as_bytes(), &|| format!("line-{i}"), i as u64);
        }
        p
    }

    #[test]
    fn a_checkpoint_dir_that_is_a_file_is_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("model");
        fs::write(&file, b"x").unwrap();
        let Err(err) = CheckpointDir::open(&file, 3) else {
            panic!("a file was taken for a checkpoint dir")
        };
        let err = err.to_string();
        assert!(err.contains("not a directory") && err.contains("model"), "{err}");
        // A directory that does not exist yet is made.
        assert!(CheckpointDir::open(dir.path().join("new/dir"), 3).is_ok());
    }

    #[test]
    fn round_trip_predicts_identically() {
        let dir = tempfile::tempdir().unwrap();
        for learner in [
            Learner::Perceptron,
            Learner::Logistic,
            Learner::Hinge,
            Learner::NaiveBayes,
        ] {
            let p = trained(learner);
            let positions = BTreeMap::from([
                ("jsonl:00ab".to_string(), 5),
                (mark_key("jsonl:00ab"), u64::MAX - 3),
                ("topic/0".to_string(), 9),
            ]);
            let mut d = CheckpointDir::open(dir.path().join(learner.as_str()), 2).unwrap();
            d.save(&mut capture(&p, &positions)).unwrap();
            let (ckpt, _) = d.load_latest().unwrap().unwrap();
            // On disk the marks have a field of their own.
            assert_eq!(ckpt.positions.len(), 2);
            assert_eq!(ckpt.position_marks["jsonl:00ab"], u64::MAX - 3);
            let (q, pos) = restore(ckpt, PipelineConfig::default()).unwrap();
            assert_eq!(pos, positions);
            assert_eq!(q.model().state(), p.model().state(), "{learner}");
            assert_eq!(q.progressive(), p.progressive());
            assert_eq!(q.cache(), p.cache());
            assert_eq!(q.counters(), p.counters());
            let mut f = crate::features::Featurizer::new(*p.model().features());
            let mut x = SparseVec::default();
            f.featurize("free cash for lunch", &mut x);
            let (mut a, mut b) = (Scored::default(), Scored::default());
            p.model().predict(&x, &mut a);
            q.model().predict(&x, &mut b);
            assert_eq!(a, b, "{learner}");
        }
    }

    /// A binary model is saved as one column; a checkpoint whose mirrored
    /// flag disagrees with its rows or its labels is refused, not misread.
    #[test]
    fn mirrored_weights_are_checked_on_restore() {
        let p = trained(Learner::Logistic);
        let ckpt = capture(&p, &BTreeMap::new());
        let linear = |c: &pb::Checkpoint| match c.model.as_ref().and_then(|m| m.state.as_ref()) {
            Some(pb::model_state::State::Linear(l)) => l.clone(),
            other => panic!("linear weights expected, got {other:?}"),
        };
        let l = linear(&ckpt);
        // v and the AdaGrad sum of class 1 only.
        assert!(l.mirrored);
        assert_eq!(l.rows.as_ref().map(|r| r.stride), Some(2));
        assert!(restore(ckpt.clone(), PipelineConfig::default()).is_ok());

        let mut two_columns = ckpt.clone();
        if let Some(pb::model_state::State::Linear(l)) = two_columns.model.as_mut().and_then(|m| m.state.as_mut()) {
            l.mirrored = false;
        }
        let err = restore(two_columns, PipelineConfig::default()).err().unwrap();
        assert!(err.contains("stride"), "{err}");

        let mut three_labels = ckpt;
        if let Some(m) = three_labels.model.as_mut() {
            m.labels.push("eggs".into());
        }
        let err = restore(three_labels, PipelineConfig::default()).err().unwrap();
        assert!(err.contains("mirrored pair of weights with 3 labels"), "{err}");
    }

    #[test]
    fn damaged_checkpoint_is_refused_and_the_previous_one_used() {
        let dir = tempfile::tempdir().unwrap();
        let mut d = CheckpointDir::open(dir.path(), 3).unwrap();
        let p = trained(Learner::Logistic);
        let first = d
            .save(&mut capture(&p, &BTreeMap::from([("jsonl".into(), 1)])))
            .unwrap();
        let second = d
            .save(&mut capture(&p, &BTreeMap::from([("jsonl".into(), 2)])))
            .unwrap();
        // Flip one byte in the middle of the newest.
        let mut bytes = fs::read(&second.path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x40;
        fs::write(&second.path, &bytes).unwrap();
        let err = read_file(&second.path).unwrap_err();
        assert!(matches!(err, CheckpointError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains(&second.path.display().to_string()));
        let (ckpt, path) = d.load_latest().unwrap().unwrap();
        assert_eq!(path, first.path);
        assert_eq!(ckpt.positions["jsonl"], 1);
        // A truncated file and a wrong version are refused too.
        fs::write(&second.path, &bytes[..10]).unwrap();
        assert!(matches!(read_file(&second.path), Err(CheckpointError::Corrupt { .. })));
        let mut v2 = fs::read(&first.path).unwrap();
        v2[8] = 99;
        fs::write(&first.path, &v2).unwrap();
        assert!(matches!(
            read_file(&first.path),
            Err(CheckpointError::Incompatible { found: 99, .. })
        ));
        // Nothing usable left: an error, not a silent fresh start.
        assert!(matches!(d.load_latest(), Err(CheckpointError::NoneUsable { .. })));
    }

    #[test]
    fn keeps_only_the_newest_few() {
        let dir = tempfile::tempdir().unwrap();
        let mut d = CheckpointDir::open(dir.path(), 2).unwrap();
        let p = trained(Learner::NaiveBayes);
        for _ in 0..5 {
            d.save(&mut capture(&p, &BTreeMap::new())).unwrap();
        }
        let names: Vec<_> = list(dir.path()).unwrap().into_iter().map(|(s, _)| s).collect();
        assert_eq!(names, [5, 4]);
        // A reopened directory continues the sequence.
        let d2 = CheckpointDir::open(dir.path(), 2).unwrap();
        assert_eq!(d2.next_sequence, 6);
    }
}
