//! Restore: a checkpoint's protobuf form back into a pipeline and the
//! sources' positions, checking every length and id against what it claims
//! (a hand-edited or damaged checkpoint is refused with the field at fault).

use super::{Positions, pb};
use crate::eval::users::UserBands;
use crate::eval::{ClassCounts, Counted, Progressive, ProgressiveParts, Tally};
use crate::features::BYTE_LR_BITS;
use crate::features::{DocFreq, FeatureConfig, FeatureHash, LEGACY_PERSONAL_SCALE, ValueMode};
use crate::message::BadReason;
use crate::model::fusion::Fusion;
use crate::model::member::{self, ADDED, Members};
use crate::model::stack::Stack;
use crate::model::weights::WeightsParts;
use crate::model::{
    Hyper, HyperChoice, Labels, Lesson, Model, ModelParts, NaiveBayes, NameSketch, State, Task, Weights,
};
use crate::pipeline::{
    CacheEntry, Counters, FeedbackCache, Held, Ledger, Packed, Pipeline, PipelineConfig, PipelineState, Reported,
    Reporter, Reporters, ReviewState, Taught, Vote,
};

// ---- restore: protobuf -> pipeline ----

/// Rebuilds the pipeline and the positions; `Err` names what is inconsistent.
/// Why a checkpoint's state cannot be restored: it contradicts itself or
/// what this build can hold (the field at fault, in words).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct RestoreError(String);

impl From<String> for RestoreError {
    fn from(detail: String) -> Self {
        RestoreError(detail)
    }
}

impl From<&str> for RestoreError {
    fn from(detail: &str) -> Self {
        RestoreError(detail.to_string())
    }
}

pub fn restore(mut c: pb::Checkpoint, cfg: PipelineConfig) -> Result<(Pipeline, Positions), RestoreError> {
    let model = restore_model(&mut c)?;
    restore_with(c, model, cfg)
}

/// [`restore`], with the model already rebuilt (a checkpoint read in
/// pieces: `c`'s own model state is not read).
pub(super) fn restore_with(
    c: pb::Checkpoint,
    model: Model,
    cfg: PipelineConfig,
) -> Result<(Pipeline, Positions), RestoreError> {
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
                let taught = e.has_gold.then(|| {
                    Box::new(Taught {
                        labels: e.gold,
                        reporter: e.taught_reporter,
                        voted: e.taught_voted,
                        lesson: e.lesson.map(lesson_from_pb),
                    })
                });
                (
                    e.id,
                    CacheEntry {
                        text: Packed::Plain(e.text),
                        predicted: (!e.prediction_unknown).then_some(e.predicted),
                        score: e.score,
                        taught,
                        held: e.has_held.then_some(Held {
                            labels: e.held,
                            reporter: e.held_reporter,
                        }),
                        at_ms: e.at_ms,
                        user: (!e.user.is_empty()).then_some(e.user),
                    },
                )
            })
            .collect(),
        counters_pb.cache_expired,
        counters_pb.cache_evicted,
        cfg.cache_bytes,
    );
    let counters = counters_from_pb(counters_pb);
    let reporters = reporters_from_pb(ps.reporters, cfg.trust.max_reporters, ps.reporters_evicted);
    let reported = reported_from_pb(
        ps.reported_fingerprints,
        ps.reported_classes,
        ps.reported_leads,
        ps.reported_evicted,
    )?;
    let state = PipelineState {
        progressive,
        test,
        published,
        users: user_bands_from_pb(ps.user_bands)?,
        ledger: Ledger::from_parts(cache, ps.contradictions, reporters),
        reported,
        counters,
        review: ps.review.map(|r| ReviewState {
            recent: r.recent,
            band: r.band,
            tokens: r.tokens,
            seen: r.seen,
        }),
    };
    let pipeline = Pipeline::restored(model, cfg, state);
    let positions = Positions::from_maps(c.positions, c.position_marks).map_err(|e| RestoreError(e.to_string()))?;
    Ok((pipeline, positions))
}

/// The counters as a checkpoint holds them.
fn counters_from_pb(counters_pb: pb::Counters) -> Counters {
    let mut counters = Counters {
        learned: counters_pb.learned,
        predicted: counters_pb.predicted,
        test_scored: counters_pb.test_scored,
        feedback_matched: counters_pb.feedback_matched,
        feedback_corrections: counters_pb.feedback_corrections,
        feedback_unmatched: counters_pb.feedback_unmatched,
        skipped: counters_pb.skipped,
        passed: counters_pb.passed,
        features: counters_pb.features,
        uncertain: counters_pb.uncertain,
        reviewed: counters_pb.reviewed,
        review_over_budget: counters_pb.review_over_budget,
        labels_in_full: counters_pb.labels_in_full,
        labels_down_weighted: counters_pb.labels_down_weighted,
        labels_held: counters_pb.labels_held,
        labels_corroborated: counters_pb.labels_corroborated,
        emails_cut: counters_pb.emails_cut,
        labels_repeated: counters_pb.labels_repeated,
        labels_replaced: counters_pb.labels_replaced,
        labels_forgotten: counters_pb.labels_forgotten,
        forgets_unmatched: counters_pb.forgets_unmatched,
        forgets_refused: counters_pb.forgets_refused,
        labels_unrecorded: counters_pb.labels_unrecorded,
        predicted_by_label: counters_pb.predicted_by_label.into_iter().collect(),
        ..Counters::default()
    };
    for (k, v) in counters_pb.bad {
        if let Some(r) = BadReason::from_str_opt(&k) {
            counters.bad[r.index()] = v;
        }
    }
    counters
}

/// A learned label's step; a move whose class and gradient lists differ
/// in length keeps the pairs both have.
fn lesson_from_pb(l: pb::Lesson) -> Lesson {
    Lesson {
        weight: l.weight,
        rate: l.rate,
        moves: l.move_classes.into_iter().zip(l.move_grads).collect(),
        added_steps: added_steps_from_pb(l.head_step, &l.added_steps),
        stack_step: stack_step_from_pb(l.stack_step, &l.stack_moves),
        shared_only: l.shared_only,
    }
}

/// What a lesson's added members' steps returned (a lesson from before
/// them: the byte LR's step alone); those this build lacks are dropped.
fn added_steps_from_pb(head_step: f32, steps: &[f32]) -> [f32; ADDED] {
    let mut out = [0.0; ADDED];
    if steps.is_empty() {
        if let Some(i) = member::index_of("byte_lr") {
            out[i] = head_step;
        }
    } else {
        for (o, &s) in out.iter_mut().zip(steps) {
            *o = if s.is_finite() { s } else { 0.0 };
        }
    }
    out
}

/// A lesson's stack step: none when its parts are not finite or more
/// than this build's members (a step it could not take back right).
fn stack_step_from_pb(scale: f32, moves: &[f32]) -> crate::model::stack::Step {
    let mut step = crate::model::stack::Step::default();
    let fits = moves.len() <= step.moves.len() && scale.is_finite() && moves.iter().all(|m| m.is_finite());
    if fits {
        step.scale = scale;
        step.moves[..moves.len()].copy_from_slice(moves);
    }
    step
}

/// The reporters' records, at most `cap` kept.
fn reporters_from_pb(records: Vec<pb::ReporterRecord>, cap: usize, evicted: u64) -> Reporters {
    let reporters = records.into_iter().map(|r| {
        let record = Reporter {
            labels: r.labels,
            held: r.held,
            recent: r.recent,
            contradicted: r.contradicted,
            excess: r.excess,
            overridden: r.overridden,
        };
        (r.name, record)
    });
    Reporters::from_parts(cap, evicted, reporters)
}

/// The reported messages' votes from their three lists (checkpoints of
/// before the memory have none).
fn reported_from_pb(
    fingerprints: Vec<u64>,
    classes: Vec<u32>,
    leads: Vec<u32>,
    evicted: u64,
) -> Result<Reported, RestoreError> {
    let n = fingerprints.len();
    if classes.len() != n || leads.len() != n {
        return Err("reported messages: as many fingerprints, classes and leads expected".into());
    }
    let votes = classes.into_iter().zip(leads).map(|(class, lead)| Vote { class, lead });
    Ok(Reported::from_entries(fingerprints.into_iter().zip(votes), evicted))
}

/// The users' bands, empty in a checkpoint from before them.
fn user_bands_from_pb(b: Option<pb::UserBands>) -> Result<UserBands, RestoreError> {
    let Some(b) = b else { return Ok(UserBands::default()) };
    if b.examples.len() != b.correct.len() {
        return Err("user bands: as many examples as correct counts expected".into());
    }
    let bands: Vec<(u64, u64)> = b.examples.into_iter().zip(b.correct).collect();
    Ok(UserBands::from_parts(&b.slots, &b.counts, &bands)?)
}

fn features_from_pb(f: &pb::FeatureConfig) -> Result<FeatureConfig, RestoreError> {
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
        split_views: f.split_views,
        hash: FeatureHash::from_number(f.hash_version)
            .ok_or_else(|| format!("feature hash version {} unknown", f.hash_version))?,
        personal_scale: f.personal_scale.unwrap_or(LEGACY_PERSONAL_SCALE),
    };
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

fn hyper_from_pb(h: &pb::Hyper) -> Result<Hyper, RestoreError> {
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
        fusion: h.fusion,
        fusion_rate: h.fusion_rate,
        fusion_alpha: h.fusion_alpha,
    };
    hyper.validate().map_err(|e| e.to_string())?;
    Ok(hyper)
}

fn rows_from_pb(r: Option<pb::Rows>, buckets: usize, stride: usize) -> Result<Vec<f32>, RestoreError> {
    let r = r.unwrap_or_default();
    if r.stride as usize != stride && !(r.rows.is_empty() && r.values.is_empty()) {
        return Err(format!("row stride {} where {stride} was expected", r.stride).into());
    }
    if r.values.len() != r.rows.len() * stride {
        return Err(format!("{} rows but {} values at stride {stride}", r.rows.len(), r.values.len()).into());
    }
    // The same huge-page-backed table a fresh model gets.
    let mut out = crate::hugepages::zeroed(buckets * stride);
    for (i, &row) in r.rows.iter().enumerate() {
        let row = row as usize;
        if row >= buckets {
            return Err(format!("row {row} beyond {buckets} buckets").into());
        }
        out[row * stride..(row + 1) * stride].copy_from_slice(&r.values[i * stride..(i + 1) * stride]);
    }
    Ok(out)
}

fn nb_from_pb(n: pb::NaiveBayesState, buckets: usize, k: usize) -> Result<NaiveBayes, RestoreError> {
    if n.class_mass.len() != k || n.class_docs.len() != k {
        return Err("naive Bayes class counts disagree with the labels".into());
    }
    Ok(NaiveBayes {
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

/// Rebuilds the model alone (features, hyperparameters, model state),
/// taking the model state out of `c`: what a predictor needs of a
/// checkpoint or of a model-topic snapshot.
pub fn restore_model(c: &mut pb::Checkpoint) -> Result<Model, RestoreError> {
    let features = features_from_pb(c.features.as_ref().ok_or("no feature config")?)?;
    let single = hyper_from_pb(c.hyper.as_ref().ok_or("no hyperparameters")?)?;
    let multi = match &c.multilabel_hyper {
        Some(h) => hyper_from_pb(h)?,
        None => single.clone(),
    };
    model_from_pb(
        c.model.take().ok_or("no model")?,
        HyperChoice { single, multi },
        features,
    )
}

fn model_from_pb(m: pb::ModelState, choice: HyperChoice, features: FeatureConfig) -> Result<Model, RestoreError> {
    let task = match m.task.as_str() {
        "" => None,
        "single-label" => Some(Task::SingleLabel),
        "multi-label" => Some(Task::MultiLabel),
        other => return Err(format!("unknown task {other:?}").into()),
    };
    let hyper = choice.for_task(task.unwrap_or(Task::SingleLabel)).clone();
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = m.labels.iter().find(|l| !seen.insert(l.as_str())) {
        return Err(format!("label {twice:?} appears twice").into());
    }
    let k = m.labels.len();
    let buckets = features.buckets();
    let state = match m.state.ok_or("no model state")? {
        pb::model_state::State::Linear(l) => {
            if hyper.learner == crate::model::Learner::NaiveBayes {
                return Err("naive Bayes hyperparameters with linear weights".into());
            }
            State::Linear(weights_from_pb(l, k, buckets)?)
        }
        pb::model_state::State::NaiveBayes(n) => {
            if hyper.learner != crate::model::Learner::NaiveBayes {
                return Err("linear hyperparameters with naive Bayes counts".into());
            }
            State::NaiveBayes(nb_from_pb(n, buckets, k)?)
        }
    };
    let fusion = match m.fusion {
        None => None,
        Some(f) => {
            if !(hyper.fusion && features.split_views) || k > 2 {
                return Err(format!("a naive Bayes fusion with {k} labels or without --fusion and split views").into());
            }
            let nb = nb_from_pb(f.naive_bayes.unwrap_or_default(), features.words_end() as usize, k)?;
            let bias = crate::features::bias_bucket(&features);
            Some(Fusion::from_parts(nb, f.weight, f.sum_sq, bias, hyper.fusion_alpha))
        }
    };
    let binary_linear = k <= 2 && task != Some(Task::MultiLabel) && matches!(state, State::Linear(_));
    let legacy_byte_weight = m.byte_lr.as_ref().map_or(0.0, |b| b.weight);
    let mut states = m.members;
    legacy_fields(m.byte_lr, m.compression, &mut states)?;
    let added = members_from_pb(states, binary_linear, k)?;
    let legacy = Legacy {
        copies: m.personal_switch,
        naive_bayes: fusion.as_ref().map_or(0.0, |f| f.weight),
        byte_lr: legacy_byte_weight,
    };
    let stack = stack_from_pb(m.stack, binary_linear, legacy, k)?;
    let sketch = NameSketch::from_entries(
        m.sketch.into_iter().map(|e| (e.bucket, e.name, e.count)),
        m.sketch_offered,
    );
    let doc_freq = match (features.idf, m.doc_freq) {
        (false, _) => None,
        (true, None) => Some(DocFreq::new(buckets)),
        (true, Some(d)) => Some(doc_freq_from_pb(d, buckets)?),
    };
    Ok(Model::from_parts(ModelParts {
        choice,
        features,
        task,
        labels: Labels::from_names(m.labels),
        state,
        version: m.version,
        sketch,
        doc_freq,
        fusion,
        added,
        stack,
    }))
}

/// How a model from before the stack combined its members: the personal
/// switch's advantage, the fusion's weight, the byte LR's hinge weight.
struct Legacy {
    copies: Option<f32>,
    naive_bayes: f32,
    byte_lr: f32,
}

/// The stack of a model of `k` labels, binary and linear or not: the
/// stored one, else (a model from before it) its members' old combination.
fn stack_from_pb(
    stored: Option<pb::StackState>,
    binary_linear: bool,
    legacy: Legacy,
    k: usize,
) -> Result<Option<Stack>, RestoreError> {
    Ok(match (stored, binary_linear) {
        (Some(s), true) => Some(Stack::from_parts(&s.weights, &s.sum_sq, s.bound).ok_or_else(|| {
            format!(
                "a stack's weights {:?}, sums {:?} or bound {} out of range",
                s.weights, s.sum_sq, s.bound
            )
        })?),
        (Some(_), false) => return Err(format!("a stack with {k} labels, a multi-label task or naive Bayes").into()),
        (None, true) => Some(Stack::legacy(
            legacy
                .copies
                .map_or(1.0, |a| crate::model::sigmoid(a.clamp(-50.0, 50.0))),
            legacy.naive_bayes,
            legacy.byte_lr.clamp(0.0, 4.0),
        )),
        (None, false) => None,
    })
}

/// `m`'s added members as `members` carries them, from the fields that
/// held them before (format 6 and model records 10 and before): the byte
/// LR's every weight (a checkpoint or a full version) or the buckets a
/// delta set, the byte context models' slots; `members` wins when set.
/// Also what a replica does with an older learner's records.
pub fn legacy_members(m: &mut pb::ModelState) -> Result<(), RestoreError> {
    legacy_fields(m.byte_lr.take(), m.compression.take(), &mut m.members)
}

/// [`legacy_members`] of the fields themselves, into `members`.
fn legacy_fields(
    byte_lr: Option<pb::ByteLrState>,
    counts: Option<pb::CompressionState>,
    members: &mut Vec<pb::MemberState>,
) -> Result<(), RestoreError> {
    if !members.is_empty() {
        return Ok(());
    }
    if let Some(b) = byte_lr {
        let (slots, values) = match (b.weights.len(), b.buckets.len()) {
            (0, _) => (b.buckets, b.values),
            (n, 0) if n == 1 << BYTE_LR_BITS => (0..n as u32).zip(b.weights).filter(|(_, v)| *v != 0.0).unzip(),
            (n, rows) => return Err(format!("a byte LR of {n} weights and {rows} rows").into()),
        };
        members.push(pb::MemberState {
            name: "byte_lr".into(),
            width: 1,
            slots,
            values,
        });
    }
    if let Some(c) = counts {
        members.push(pb::MemberState {
            name: "compression".into(),
            width: 2,
            slots: c.slots,
            values: c.counts,
        });
    }
    Ok(())
}

/// The added members of a model of `k` labels, which must be binary
/// linear to have them: each a member this build knows by its name, of
/// its width, its slots and values in range.
fn members_from_pb(states: Vec<pb::MemberState>, binary_linear: bool, k: usize) -> Result<Members, RestoreError> {
    let mut members = Members::default();
    if !binary_linear && !states.is_empty() {
        return Err(format!("an added member of the stack with {k} labels, a multi-label task or naive Bayes").into());
    }
    for s in states {
        let Some((i, entry)) = member::index_of(&s.name).and_then(|i| Some((i, member::REGISTRY.get(i)?))) else {
            return Err(format!("a member of the stack this build does not know: {:?}", s.name).into());
        };
        let mut m = (entry.make)();
        if s.width as usize != m.width() || !m.put(&s.slots, &s.values) {
            return Err(format!(
                "the member {:?} of {} slots and {} values of width {}",
                s.name,
                s.slots.len(),
                s.values.len(),
                s.width
            )
            .into());
        }
        members.set(i, m);
    }
    Ok(members)
}

/// A linear model's weights, checked against its `k` labels and `buckets`.
fn weights_from_pb(l: pb::LinearState, k: usize, buckets: usize) -> Result<Weights, RestoreError> {
    if l.mirrored && k != 2 {
        return Err(format!("a mirrored pair of weights with {k} labels").into());
    }
    let columns = if l.mirrored { 1 } else { k };
    let slots = 1 + l.averaged as usize + l.adagrad as usize;
    let stride = columns * slots;
    let (buf, entries) = match l.entries {
        Some(e) if l.rows.is_some() => {
            return Err(format!("both dense rows and {} sparse entries", e.keys.len()).into());
        }
        Some(e) if e.stride as usize != slots => {
            return Err(format!("entry stride {} where {slots} was expected", e.stride).into());
        }
        Some(e) => (Vec::new(), Some((e.keys, e.values))),
        None => (rows_from_pb(l.rows, buckets, stride)?, None),
    };
    let parts = WeightsParts {
        buckets,
        classes: k,
        buf,
        entries,
        scale: l.scale,
        bsum: l.bsum,
        steps: l.steps,
        averaged: l.averaged,
        adagrad: l.adagrad,
        mirrored: l.mirrored,
    };
    Weights::from_parts(parts).ok_or_else(|| "inconsistent weight sizes".into())
}

/// Document frequencies, every bucket in range.
fn doc_freq_from_pb(d: pb::DocFreq, buckets: usize) -> Result<DocFreq, RestoreError> {
    if d.buckets.len() != d.counts.len() || d.buckets.iter().any(|&b| b as usize >= buckets) {
        return Err("document frequencies out of range".into());
    }
    let mut df = crate::hugepages::zeroed(buckets);
    for (b, c) in d.buckets.into_iter().zip(d.counts) {
        df[b as usize] = c;
    }
    Ok(DocFreq::with_counts(df, d.docs))
}

fn tally_from_pb(t: Option<pb::Tally>, n: usize) -> Result<Tally, RestoreError> {
    let t = t.unwrap_or_default();
    if t.per_class.len() != n {
        return Err(format!("{} per-class counts for {n} labels", t.per_class.len()).into());
    }
    let confusion: Vec<Vec<u64>> = if n > crate::eval::CONFUSION_MAX_CLASSES {
        Vec::new()
    } else if t.confusion.is_empty() {
        vec![vec![0; n + 1]; n]
    } else if t.confusion.len() == n * (n + 1) {
        t.confusion.chunks(n + 1).map(<[u64]>::to_vec).collect()
    } else {
        return Err(format!("confusion matrix of {} cells for {n} labels", t.confusion.len()).into());
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

fn progressive_from_pb(p: pb::Progressive) -> Result<Progressive, RestoreError> {
    let n = p.labels.len();
    if p.roc_scores.len() != p.roc_positive.len() {
        return Err("ROC scores and flags differ in length".into());
    }
    let recent = (p.recent.into_iter())
        .map(|o| Counted {
            gold: o.gold,
            predicted: o.predicted,
            score: o.score,
        })
        .collect();
    let parts = ProgressiveParts {
        single: p.single,
        positive_name: p.positive_name,
        total: tally_from_pb(p.total, n)?,
        window: tally_from_pb(p.window, n)?,
        recent,
        window_size: p.window_size.max(1) as usize,
        roc: p.roc_scores.into_iter().zip(p.roc_positive).collect(),
        roc_seen: p.roc_seen,
        labels: p.labels,
    };
    Ok(Progressive::restore(parts)?)
}
