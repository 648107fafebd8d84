//! Capture: the pipeline's state and the sources' positions into the
//! protobuf form of a checkpoint. Reads the pipeline; changes nothing.

use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Positions, format_for, pb};
use crate::eval::users::UserBands;
use crate::eval::{Progressive, Tally};
use crate::features::{FeatureConfig, FeatureHash};
use crate::message::BadReason;
use crate::model::member::Added;
use crate::model::stack::Stack;
use crate::model::{Hyper, Lesson, Model, NaiveBayes, State, Task};
use crate::pipeline::{CacheEntry, Counters, FeedbackCache, Pipeline};

// ---- capture: pipeline -> protobuf ----

/// Where a captured checkpoint's weights are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightsPlacement {
    /// In the checkpoint, whole.
    Inline,
    /// Left out (their stride and layout are in): the late-label cache
    /// follows as [`cache_fragments`], then a linear model's rows or
    /// entries as [`fragments`], written one after another.
    Apart,
}

/// The protobuf form of the pipeline's state and the sources' positions.
pub fn capture(p: &Pipeline, positions: &Positions) -> pb::Checkpoint {
    capture_with(p, positions, WeightsPlacement::Inline)
}

/// [`capture`], with the weights where `weights` says.
pub fn capture_with(p: &Pipeline, positions: &Positions, weights: WeightsPlacement) -> pb::Checkpoint {
    let (positions, position_marks) = positions.to_maps();
    pb::Checkpoint {
        pipeline: Some(pb::PipelineState {
            progressive: Some(progressive_to_pb(p.progressive())),
            test: Some(progressive_to_pb(p.test_metrics())),
            published: Some(progressive_to_pb(p.published())),
            user_bands: (!p.user_bands().is_empty()).then(|| user_bands_to_pb(p.user_bands())),
            cache: match weights {
                WeightsPlacement::Inline => p.cache().entries().into_iter().map(cache_entry_to_pb).collect(),
                WeightsPlacement::Apart => Vec::new(),
            },
            counters: Some(counters_to_pb(p.counters(), p.cache())),
            review: Some({
                let r = p.review().state();
                pb::ReviewState {
                    recent: r.recent,
                    band: r.band,
                    tokens: r.tokens,
                    seen: r.seen,
                }
            }),
            contradictions: p.contradiction_share(),
            reporters: p
                .reporters()
                .iter()
                .map(|(name, r)| pb::ReporterRecord {
                    name: name.to_string(),
                    labels: r.labels,
                    held: r.held,
                    recent: r.recent,
                    contradicted: r.contradicted,
                    excess: r.excess,
                    overridden: r.overridden,
                })
                .collect(),
            reporters_evicted: p.reporters().evicted,
            reported_fingerprints: p.reported().entries().map(|(fp, _)| fp).collect(),
            reported_classes: p.reported().entries().map(|(_, v)| v.class).collect(),
            reported_leads: p.reported().entries().map(|(_, v)| v.lead).collect(),
            reported_evicted: p.reported().evicted,
        }),
        positions,
        position_marks,
        ..capture_model_with(p.model(), weights)
    }
}

fn cache_entry_to_pb((id, e): (&str, &CacheEntry)) -> pb::CacheEntry {
    pb::CacheEntry {
        id: id.to_string(),
        text: e.text.text().map(Cow::into_owned).unwrap_or_default(),
        predicted: e.predicted.clone().unwrap_or_default(),
        prediction_unknown: e.predicted.is_none(),
        score: e.score,
        has_gold: e.taught.is_some(),
        gold: e.taught.as_ref().map(|t| t.labels.clone()).unwrap_or_default(),
        taught_reporter: e.taught.as_ref().map(|t| t.reporter.clone()).unwrap_or_default(),
        taught_voted: e.taught.as_ref().is_some_and(|t| t.voted),
        lesson: e.taught.as_ref().and_then(|t| t.lesson.as_ref()).map(lesson_to_pb),
        has_held: e.held.is_some(),
        held: e.held.as_ref().map(|h| h.labels.clone()).unwrap_or_default(),
        held_reporter: e.held.as_ref().map(|h| h.reporter.clone()).unwrap_or_default(),
        at_ms: e.at_ms,
        user: e.user.clone().unwrap_or_default(),
    }
}

fn lesson_to_pb(l: &Lesson) -> pb::Lesson {
    pb::Lesson {
        weight: l.weight,
        rate: l.rate,
        move_classes: l.moves.iter().map(|m| m.0).collect(),
        move_grads: l.moves.iter().map(|m| m.1).collect(),
        head_step: 0.0,
        added_steps: match l.added_steps.iter().any(|&s| s != 0.0) {
            true => l.added_steps.to_vec(),
            false => Vec::new(),
        },
        stack_step: l.stack_step.scale,
        stack_moves: if l.stack_step.scale == 0.0 {
            Vec::new()
        } else {
            l.stack_step.moves.to_vec()
        },
        shared_only: l.shared_only,
    }
}

/// The late-label cache left out of a [`WeightsPlacement::Apart`] capture, a few
/// thousand entries per piece, in the cache's order (pieces merge by
/// appending, as [`fragments`] do).
pub(super) fn cache_fragments<E>(
    p: &Pipeline,
    each: &mut dyn FnMut(&pb::Checkpoint) -> Result<(), E>,
) -> Result<(), E> {
    let entries = p.cache().entries();
    for chunk in entries.chunks(4096) {
        let piece = pb::Checkpoint {
            pipeline: Some(pb::PipelineState {
                cache: chunk.iter().copied().map(cache_entry_to_pb).collect(),
                ..Default::default()
            }),
            ..Default::default()
        };
        each(&piece)?;
    }
    Ok(())
}

/// The model alone, as a checkpoint without pipeline state or positions
/// (format version and time set): what `restore_model` reads back.
pub fn capture_model(m: &Model) -> pb::Checkpoint {
    capture_model_with(m, WeightsPlacement::Inline)
}

/// [`capture_model`], with the weights where `weights` says (apart: to
/// follow as [`fragments`], a model image written as a stream).
pub fn capture_model_with(m: &Model, weights: WeightsPlacement) -> pb::Checkpoint {
    pb::Checkpoint {
        format_version: format_for(m),
        created_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        features: Some(features_to_pb(&m.features)),
        hyper: Some(hyper_to_pb(&m.choice.single)),
        multilabel_hyper: Some(hyper_to_pb(&m.choice.multi)),
        model: Some(model_to_pb(m, weights)),
        ..Default::default()
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
        split_views: f.split_views,
        // Version 1 is left out (0), as the builds before the field wrote it.
        hash_version: match f.hash {
            FeatureHash::V1 => 0,
            FeatureHash::V2 => 2,
        },
        personal_scale: Some(f.personal_scale),
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
        fusion: h.fusion,
        fusion_rate: h.fusion_rate,
        fusion_alpha: h.fusion_alpha,
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

fn nb_to_pb(nb: &NaiveBayes) -> pb::NaiveBayesState {
    pb::NaiveBayesState {
        counts: Some(rows_to_pb(&nb.counts, nb.classes)),
        totals: (!nb.totals.is_empty()).then(|| rows_to_pb(&nb.totals, 1)),
        class_mass: nb.class_mass.clone(),
        class_docs: nb.class_docs.clone(),
        docs: nb.docs,
        mass: nb.mass,
        vocabulary: nb.vocabulary,
        multilabel: !nb.totals.is_empty(),
    }
}

fn model_to_pb(m: &Model, weights: WeightsPlacement) -> pb::ModelState {
    let state = match &m.state {
        State::Linear(w) => {
            let stride = w.compact_stride() as u32;
            let (parts, count) = match weights {
                WeightsPlacement::Inline => (w.to_parts(), 0),
                WeightsPlacement::Apart => w.meta(),
            };
            pb::model_state::State::Linear(pb::LinearState {
                rows: parts.entries.is_none().then(|| rows_to_pb(&parts.buf, stride as usize)),
                entries: parts.entries.map(|(keys, values)| pb::Entries {
                    stride,
                    keys,
                    values,
                    count: count as u64,
                    ..Default::default()
                }),
                scale: parts.scale,
                bsum: parts.bsum,
                steps: parts.steps,
                averaged: parts.averaged,
                adagrad: parts.adagrad,
                mirrored: parts.mirrored,
            })
        }
        State::NaiveBayes(nb) => pb::model_state::State::NaiveBayes(nb_to_pb(nb)),
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
        personal_switch: None,
        stack: m.stack().map(stack_to_pb),
        fusion: m.fusion.as_ref().map(|f| pb::FusionState {
            naive_bayes: Some(nb_to_pb(&f.nb)),
            weight: f.weight,
            sum_sq: f.sum_sq,
        }),
        members: members_to_pb(m),
        doc_freq: m.doc_freq().map(|d| {
            // Read through the model: the counts may ride in its weight rows.
            let (buckets, counts) = (0..m.doc_buckets() as u32)
                .map(|b| (b, m.doc_count(b)))
                .filter(|e| e.1 > 0)
                .unzip();
            pb::DocFreq {
                docs: d.docs,
                buckets,
                counts,
            }
        }),
        ..pb::ModelState::default()
    }
}

/// An added member of the stack as its state: `slots` and their
/// `values` (every slot holding anything, or those a delta changed).
pub fn member_to_pb(a: &dyn Added, slots: Vec<u32>, values: Vec<f32>) -> pb::MemberState {
    pb::MemberState {
        name: a.name().to_string(),
        width: a.width() as u32,
        slots,
        values,
    }
}

/// The stack's added members of `m` (`crate::model::member`), each with
/// every slot holding anything.
pub fn members_to_pb(m: &Model) -> Vec<pb::MemberState> {
    m.added()
        .iter()
        .map(|(_, a)| {
            let (slots, values) = a.nonzero();
            member_to_pb(a, slots, values)
        })
        .collect()
}

/// The stack's state: the bias and each member's weight, and their sums.
pub fn stack_to_pb(s: &Stack) -> pb::StackState {
    pb::StackState {
        weights: s.weights().to_vec(),
        sum_sq: s.sums().to_vec(),
        bound: s.bound(),
    }
}

/// A digest of the model's state (`inspect`): the xxh3-64 of its
/// protobuf form, the weights encoded piece by piece ([`fragments`]), so
/// that it costs no copy of them. Equal models have equal digests.
pub fn model_digest(m: &Model) -> u64 {
    use prost::Message as _;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = Vec::new();
    let light = model_to_pb(m, WeightsPlacement::Apart);
    light.encode(&mut buf).unwrap_or_default();
    h.update(&buf);
    let _ = fragments::<()>(m, &mut |piece| {
        buf.clear();
        piece.encode(&mut buf).unwrap_or_default();
        h.update(&buf);
        Ok(())
    });
    h.digest()
}

/// Rows or entries per fragment: a few MB each.
const FRAGMENT_ROWS: usize = 16 << 10;

/// The weights left out of a [`WeightsPlacement::Apart`] capture, as checkpoints
/// that hold a piece of them each (dense rows or sparse entries, with
/// their stride): decoded after the capture as one protobuf message, they
/// merge into it (repeated fields append), and a reader may also apply
/// them one at a time. Naive Bayes counts always travel inline.
pub fn fragments<E>(m: &Model, each: &mut dyn FnMut(&pb::Checkpoint) -> Result<(), E>) -> Result<(), E> {
    let State::Linear(w) = &m.state else {
        return Ok(());
    };
    let stride = w.compact_stride() as u32;
    let wrap = |linear: pb::LinearState| pb::Checkpoint {
        model: Some(pb::ModelState {
            state: Some(pb::model_state::State::Linear(linear)),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (mut rows, mut values) = (Vec::new(), Vec::new());
    let buckets = w.dense_rows();
    for start in (0..buckets).step_by(FRAGMENT_ROWS) {
        w.compact_rows(start..start + FRAGMENT_ROWS, &mut rows, &mut values);
        if rows.is_empty() {
            continue;
        }
        let piece = wrap(pb::LinearState {
            rows: Some(pb::Rows {
                stride,
                rows: std::mem::take(&mut rows),
                values: std::mem::take(&mut values),
            }),
            ..Default::default()
        });
        each(&piece)?;
    }
    w.entry_chunks(FRAGMENT_ROWS, |keys, values| {
        each(&wrap(pb::LinearState {
            entries: Some(pb::Entries {
                stride,
                keys: keys.to_vec(),
                values: values.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        }))
    })
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

fn user_bands_to_pb(b: &UserBands) -> pb::UserBands {
    let (slots, counts, bands) = b.parts();
    pb::UserBands {
        slots,
        counts,
        examples: bands.iter().map(|b| b.0).collect(),
        correct: bands.iter().map(|b| b.1).collect(),
    }
}

fn progressive_to_pb(p: &Progressive) -> pb::Progressive {
    let p = p.state();
    pb::Progressive {
        labels: p.labels.to_vec(),
        single: p.single,
        positive_name: p.positive_name,
        total: Some(tally_to_pb(&p.total)),
        window: Some(tally_to_pb(&p.window)),
        recent: (p.recent.iter())
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
        passed: c.passed,
        features: c.features,
        uncertain: c.uncertain,
        reviewed: c.reviewed,
        review_over_budget: c.review_over_budget,
        labels_in_full: c.labels_in_full,
        labels_down_weighted: c.labels_down_weighted,
        labels_held: c.labels_held,
        labels_corroborated: c.labels_corroborated,
        emails_cut: c.emails_cut,
        labels_repeated: c.labels_repeated,
        labels_replaced: c.labels_replaced,
        labels_forgotten: c.labels_forgotten,
        forgets_unmatched: c.forgets_unmatched,
        forgets_refused: c.forgets_refused,
        labels_unrecorded: c.labels_unrecorded,
        bad: BadReason::ALL
            .iter()
            .map(|r| (r.as_str().to_string(), c.bad[r.index()]))
            .collect(),
        predicted_by_label: c.predicted_by_label.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        cache_expired: cache.expired,
        cache_evicted: cache.evicted,
    }
}
