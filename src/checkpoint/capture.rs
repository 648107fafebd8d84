//! Capture: the pipeline's state and the sources' positions into the
//! protobuf form of a checkpoint. Reads the pipeline; changes nothing.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{FORMAT_VERSION, MARK_PREFIX, pb};
use crate::eval::{Progressive, Tally};
use crate::features::FeatureConfig;
use crate::message::BadReason;
use crate::model::{Hyper, Model, NaiveBayes, State, Task};
use crate::pipeline::{Counters, FeedbackCache, Pipeline};

// ---- capture: pipeline -> protobuf ----

/// The protobuf form of the pipeline's state and the sources' positions.
pub fn capture(p: &Pipeline, positions: &BTreeMap<String, u64>) -> pb::Checkpoint {
    pb::Checkpoint {
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
                    predicted: e.predicted.clone().unwrap_or_default(),
                    prediction_unknown: e.predicted.is_none(),
                    score: e.score,
                    has_gold: e.gold.is_some(),
                    gold: e.gold.clone().unwrap_or_default(),
                    has_held: e.held.is_some(),
                    held: e.held.as_ref().map(|h| h.labels.clone()).unwrap_or_default(),
                    held_reporter: e.held.as_ref().map(|h| h.reporter.clone()).unwrap_or_default(),
                    at_ms: e.at_ms,
                })
                .collect(),
            counters: Some(counters_to_pb(&p.counters, &p.cache)),
            review: Some({
                let (recent, band, tokens, seen) = p.review().state();
                pb::ReviewState {
                    recent,
                    band,
                    tokens,
                    seen,
                }
            }),
            contradictions: p.contradictions,
            reporters: p
                .reporters
                .iter()
                .map(|(name, r)| pb::ReporterRecord {
                    name: name.to_string(),
                    labels: r.labels,
                    held: r.held,
                    recent: r.recent,
                    contradicted: r.contradicted,
                    excess: r.excess,
                })
                .collect(),
            reporters_evicted: p.reporters.evicted,
        }),
        // Marks ride in the positions map under `mark:KEY` (see
        // `MARK_PREFIX`) and in a field of their own on disk.
        positions: positions
            .iter()
            .filter(|(k, _)| !k.starts_with(MARK_PREFIX))
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        position_marks: positions
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(MARK_PREFIX)?.to_string(), *v)))
            .collect(),
        ..capture_model(&p.model)
    }
}

/// The model alone, as a checkpoint without pipeline state or positions
/// (format version and time set): what `restore_model` reads back.
pub fn capture_model(m: &Model) -> pb::Checkpoint {
    pb::Checkpoint {
        format_version: FORMAT_VERSION,
        created_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        features: Some(features_to_pb(&m.features)),
        hyper: Some(hyper_to_pb(&m.choice.single)),
        multilabel_hyper: Some(hyper_to_pb(&m.choice.multi)),
        model: Some(model_to_pb(m)),
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

fn model_to_pb(m: &Model) -> pb::ModelState {
    let state = match &m.state {
        State::Linear(w) => {
            let parts = w.to_parts();
            let stride = w.compact_stride() as u32;
            pb::model_state::State::Linear(pb::LinearState {
                rows: parts.entries.is_none().then(|| rows_to_pb(&parts.buf, stride as usize)),
                entries: parts.entries.map(|(keys, values)| pb::Entries { stride, keys, values }),
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
        fusion: m.fusion.as_ref().map(|f| pb::FusionState {
            naive_bayes: Some(nb_to_pb(&f.nb)),
            weight: f.weight,
            sum_sq: f.sum_sq,
        }),
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
        bad: BadReason::ALL
            .iter()
            .map(|r| (r.as_str().to_string(), c.bad[r.index()]))
            .collect(),
        predicted_by_label: c.predicted_by_label.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        cache_expired: cache.expired,
        cache_evicted: cache.evicted,
    }
}
