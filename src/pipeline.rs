//! The one pipeline every transport drives: raw bytes -> parse -> features
//! -> model -> an [`Outcome`] for the transport to deliver.
//!
//! Labeled examples are predicted, counted (progressive evaluation) and then
//! learned. Unlabeled ones are predicted and returned for publishing. Late
//! feedback labels are joined by id through a bounded cache, learned, and
//! scored against the prediction that was published. Bad input becomes
//! [`Outcome::Bad`] with a reason from a bounded set; it never stops the
//! pipeline. Transports (JSON lines, Kafka) only move bytes and positions.

use std::collections::VecDeque;
use std::ops::Range;

use foldhash::HashMap;

use crate::eval::Progressive;
use crate::features::{FeatureConfig, Featurizer, SparseVec};
use crate::message::{self, Bad, BadReason, Gold, Message, Split};
use crate::model::{Model, ModelError, Scored, Task};

/// Settings of the pipeline around the model.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineConfig {
    pub max_message_bytes: usize,
    /// Length of the sliding metric window.
    pub window: usize,
    /// Positive class for ROC of binary tasks (default: "spam", else the second label seen).
    pub positive_label: Option<String>,
    /// Most messages kept for joining late labels.
    pub cache_entries: usize,
    /// Most text bytes kept for joining late labels.
    pub cache_bytes: usize,
    /// How long a message waits for its late label, in milliseconds.
    pub cache_ttl_ms: u64,
    /// Hold test-split examples back (returned as [`Outcome::Test`]) instead
    /// of scoring them at once; `eval` scores them after all training.
    pub defer_test: bool,
    /// Return the features of learned examples marked `"split": "train"`
    /// (for `eval`'s extra passes).
    pub keep_train: bool,
    /// Keep the model's feature-name sketch (what `inspect` shows) up to
    /// date. `eval` turns it off: it keeps no model, and the sampled
    /// documents would be featurized twice and their names allocated.
    pub name_features: bool,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            max_message_bytes: message::DEFAULT_MAX_MESSAGE_BYTES,
            window: crate::eval::DEFAULT_WINDOW,
            positive_label: None,
            cache_entries: 100_000,
            cache_bytes: 64 << 20,
            cache_ttl_ms: 24 * 3600 * 1000,
            defer_test: false,
            keep_train: false,
            name_features: true,
        }
    }
}

/// What became of one message.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// A labeled example, counted and learned. `kept` holds its raw features
    /// and gold labels when [`PipelineConfig::keep_train`] is on.
    Learned {
        correct: bool,
        kept: Option<(SparseVec, Vec<String>)>,
    },
    /// An unlabeled message's prediction, to publish.
    Predicted(Prediction),
    /// A test-split example, scored without learning, or held back when
    /// [`PipelineConfig::defer_test`] is on.
    Test { deferred: Option<(SparseVec, Vec<String>)> },
    /// A late label joined to its message and learned.
    FeedbackMatched { correct: Option<bool>, correction: bool },
    /// A late label whose message is not (or no longer) in the cache.
    FeedbackUnmatched,
    /// Bad input, for the dead-letter output.
    Bad(Bad),
    /// A blank line.
    Skipped,
}

/// A prediction to publish.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    pub id: String,
    pub labels: Vec<String>,
    pub scores: Vec<(String, f32)>,
    pub multilabel: bool,
    pub model_version: u64,
}

impl Prediction {
    /// The JSON line of the output contract (without the newline).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        use serde::ser::{SerializeMap, Serializer};
        struct Scores<'a>(&'a [(String, f32)]);
        impl serde::Serialize for Scores<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (k, v) in self.0 {
                    m.serialize_entry(k, &((*v as f64 * 1e6).round() / 1e6))?;
                }
                m.end()
            }
        }
        #[derive(serde::Serialize)]
        struct Out<'a> {
            id: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            label: Option<Option<&'a str>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            labels: Option<&'a [String]>,
            scores: Scores<'a>,
            model_version: u64,
        }
        let o = Out {
            id: &self.id,
            label: (!self.multilabel).then(|| self.labels.first().map(String::as_str)),
            labels: self.multilabel.then_some(&self.labels[..]),
            scores: Scores(&self.scores),
            model_version: self.model_version,
        };
        // Writing to a Vec cannot fail, and every key is a string.
        let _ = serde_json::to_writer(&mut *out, &o);
    }
}

/// Counters of what the pipeline has done, by kind and outcome.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    pub learned: u64,
    pub predicted: u64,
    pub test_scored: u64,
    pub feedback_matched: u64,
    pub feedback_corrections: u64,
    pub feedback_unmatched: u64,
    pub skipped: u64,
    /// Non-zero features of every featurized message, summed.
    pub features: u64,
    /// Bad input by [`BadReason::index`].
    pub bad: [u64; BadReason::ALL.len()],
    /// Predictions published, by label name.
    pub predicted_by_label: HashMap<String, u64>,
}

impl Counters {
    pub fn bad_total(&self) -> u64 {
        self.bad.iter().sum()
    }
}

/// A message waiting for its late label.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheEntry {
    pub text: String,
    /// The labels published for it (unlabeled messages).
    pub predicted: Vec<String>,
    /// The positive class's score that was published (binary tasks).
    pub score: Option<f32>,
    /// Its gold labels, once known.
    pub gold: Option<Vec<String>>,
    /// When it was cached (event time, ms).
    pub at_ms: u64,
}

/// The bounded join cache: a size cap, a byte cap and a TTL, oldest out first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FeedbackCache {
    pub(crate) map: HashMap<String, (CacheEntry, u64)>,
    /// (id, generation) in insertion order; stale generations are skipped.
    pub(crate) order: VecDeque<(String, u64)>,
    pub(crate) generation: u64,
    pub(crate) bytes: usize,
    /// Entries dropped because their TTL passed.
    pub expired: u64,
    /// Entries dropped to respect the caps.
    pub evicted: u64,
}

impl FeedbackCache {
    fn insert(&mut self, id: String, entry: CacheEntry, cfg: &PipelineConfig) {
        if cfg.cache_entries == 0 || entry.text.len() > cfg.cache_bytes {
            return;
        }
        self.generation += 1;
        self.bytes += entry.text.len();
        if let Some((old, _)) = self.map.insert(id.clone(), (entry, self.generation)) {
            self.bytes -= old.text.len();
        }
        self.order.push_back((id, self.generation));
        while self.map.len() > cfg.cache_entries || self.bytes > cfg.cache_bytes {
            if !self.pop_oldest() {
                break;
            }
            self.evicted += 1;
        }
    }

    /// Drops the oldest live entry; false when empty.
    fn pop_oldest(&mut self) -> bool {
        while let Some((id, generation)) = self.order.pop_front() {
            if self.map.get(&id).is_some_and(|e| e.1 == generation) {
                if let Some((e, _)) = self.map.remove(&id) {
                    self.bytes -= e.text.len();
                }
                return true;
            }
        }
        false
    }

    /// Drops entries older than the TTL at event time `now_ms`.
    fn expire(&mut self, now_ms: u64, ttl_ms: u64) {
        while let Some((id, generation)) = self.order.front() {
            match self.map.get(id) {
                Some((e, g)) if g == generation => {
                    if now_ms.saturating_sub(e.at_ms) <= ttl_ms {
                        break;
                    }
                    self.pop_oldest();
                    self.expired += 1;
                }
                _ => {
                    self.order.pop_front();
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Live entries, oldest first (for checkpoints).
    pub fn entries(&self) -> Vec<(&str, &CacheEntry)> {
        self.order
            .iter()
            .filter_map(|(id, g)| self.map.get(id).filter(|e| e.1 == *g).map(|e| (id.as_str(), &e.0)))
            .collect()
    }

    /// Rebuilds a cache from entries, oldest first.
    pub fn from_entries(entries: Vec<(String, CacheEntry)>, expired: u64, evicted: u64) -> Self {
        let mut c = FeedbackCache {
            expired,
            evicted,
            ..Default::default()
        };
        for (id, e) in entries {
            c.generation += 1;
            c.bytes += e.text.len();
            c.order.push_back((id.clone(), c.generation));
            c.map.insert(id, (e, c.generation));
        }
        c
    }
}

/// Messages after the stages that need no model state: parsed, their
/// texts' features hashed to buckets and, optionally, their repeats counted
/// (IDF, normalisation and the bias follow in the pipeline). A transport
/// may run [`Preparer::prepare`] on another thread and hand the messages to
/// [`Pipeline::handle_prepared`] in order; [`Pipeline::handle`] runs both
/// in turn. Counting may happen on either side: the result is the same, so
/// a transport lets whichever thread has time do it.
///
/// The features of all the messages lie one after another in shared
/// buffers, so a batch reused for message after message holds about what
/// its current messages need, not one buffer per slot each as large as the
/// largest message that slot ever held (20 MB of an `eval` of
/// SpamAssassin's 58 MB heap, in batches of 256 lines).
#[derive(Debug, Default)]
pub struct Prepared {
    messages: Vec<PreparedMessage>,
    /// Every example's buckets, repeats and all, one example after another.
    buckets: Vec<u32>,
    /// The counted raw features of the examples counted, one after another.
    counted: SparseVec,
}

#[derive(Debug)]
struct PreparedMessage {
    /// `None`: a blank message (skipped), or one already handled.
    message: Option<Result<Message, Bad>>,
    /// Its range in `Prepared::buckets` (empty unless an example).
    buckets: Range<usize>,
    /// Its range in `Prepared::counted`, when counted.
    counted: Option<Range<usize>>,
}

impl Prepared {
    /// Forgets every message, keeping the buffers.
    pub fn clear(&mut self) {
        self.messages.clear();
        self.buckets.clear();
        self.counted.idx.clear();
        self.counted.val.clear();
    }

    /// Messages prepared.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

/// Parses and featurizes messages: the model-free front of the pipeline.
#[derive(Debug)]
pub struct Preparer {
    featurizer: Featurizer,
    max_message_bytes: usize,
    /// One document's counted features, before they join a batch's.
    scratch: SparseVec,
}

impl Preparer {
    pub fn new(features: FeatureConfig, max_message_bytes: usize) -> Self {
        Preparer {
            featurizer: Featurizer::new(features),
            max_message_bytes,
            scratch: SparseVec::default(),
        }
    }

    /// Parses `raw` and appends it to `out`, with its text's features
    /// hashed and, when `count`, their repeats counted too.
    pub fn prepare(&mut self, raw: &[u8], count: bool, out: &mut Prepared) {
        let from = out.buckets.len();
        let mut prepared = PreparedMessage {
            message: None,
            buckets: from..from,
            counted: None,
        };
        if !raw.iter().all(u8::is_ascii_whitespace) {
            let message = message::parse(raw, self.max_message_bytes);
            if let Ok(Message::Example { text, .. }) = &message {
                self.featurizer.hash_buckets(text, &mut out.buckets);
                prepared.buckets = from..out.buckets.len();
                if count {
                    self.featurizer
                        .count_buckets(&out.buckets[prepared.buckets.clone()], &mut self.scratch);
                    let at = out.counted.idx.len();
                    out.counted.idx.extend_from_slice(&self.scratch.idx);
                    out.counted.val.extend_from_slice(&self.scratch.val);
                    prepared.counted = Some(at..out.counted.idx.len());
                }
            }
            prepared.message = Some(message);
        }
        out.messages.push(prepared);
    }
}

/// The pipeline: model, features, metrics, join cache and counters.
#[derive(Debug)]
pub struct Pipeline {
    pub(crate) cfg: PipelineConfig,
    pub(crate) model: Model,
    /// The front stages, run by [`Pipeline::handle`]; its featurizer also
    /// featurizes cached texts for late labels and finishes every vector.
    prep: Preparer,
    /// Buffers for [`Pipeline::handle`]'s own [`Prepared`].
    spare: Prepared,
    /// Progressive (test-then-train) metrics of labeled examples.
    pub(crate) progressive: Progressive,
    /// Metrics of held-out test-split examples.
    pub(crate) test: Progressive,
    /// Published predictions judged by late feedback.
    pub(crate) published: Progressive,
    pub(crate) cache: FeedbackCache,
    pub(crate) counters: Counters,
    /// Scratch buffers for the hot path: the finished vector, how many of
    /// its entries are document features (the bias may follow), and a copy
    /// of the raw features (before IDF, normalisation and bias), kept only
    /// when `eval` holds vectors back for more passes or for the test split.
    x: SparseVec,
    raw_len: usize,
    raw: SparseVec,
    scored: Scored,
}

impl Pipeline {
    pub fn new(model: Model, cfg: PipelineConfig) -> Self {
        let prep = Preparer::new(*model.features(), cfg.max_message_bytes);
        let progressive = Progressive::new(cfg.window, cfg.positive_label.clone());
        let test = Progressive::new(cfg.window, cfg.positive_label.clone());
        let published = Progressive::new(cfg.window, cfg.positive_label.clone());
        Pipeline {
            cfg,
            model,
            prep,
            spare: Prepared::default(),
            progressive,
            test,
            published,
            cache: FeedbackCache::default(),
            counters: Counters::default(),
            x: SparseVec::default(),
            raw_len: 0,
            raw: SparseVec::default(),
            scored: Scored::default(),
        }
    }

    /// Rebuilds a pipeline from checkpointed state.
    pub(crate) fn from_parts(
        model: Model,
        cfg: PipelineConfig,
        progressive: Progressive,
        test: Progressive,
        published: Progressive,
        cache: FeedbackCache,
        counters: Counters,
    ) -> Self {
        let mut p = Pipeline::new(model, cfg);
        p.progressive = progressive;
        p.test = test;
        p.published = published;
        p.cache = cache;
        p.counters = counters;
        p
    }

    pub fn model(&self) -> &Model {
        &self.model
    }
    pub fn config(&self) -> &PipelineConfig {
        &self.cfg
    }
    pub fn progressive(&self) -> &Progressive {
        &self.progressive
    }
    pub fn test_metrics(&self) -> &Progressive {
        &self.test
    }
    pub fn published(&self) -> &Progressive {
        &self.published
    }
    pub fn cache(&self) -> &FeedbackCache {
        &self.cache
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// A front stage for this pipeline's model, to run apart (e.g. on a
    /// reader thread) and feed [`Pipeline::handle_prepared`].
    pub fn preparer(&self) -> Preparer {
        Preparer::new(*self.model.features(), self.cfg.max_message_bytes)
    }

    /// Handles one raw message. `default_id` names it when it has no "id"
    /// (its position in the source); `now_ms` is its event time.
    pub fn handle(&mut self, raw: &[u8], default_id: &dyn Fn() -> String, now_ms: u64) -> Outcome {
        let mut p = std::mem::take(&mut self.spare);
        p.clear();
        self.prep.prepare(raw, false, &mut p);
        let outcome = self.handle_prepared(&mut p, 0, default_id, now_ms);
        self.spare = p;
        outcome
    }

    /// Handles message `i` of those that a [`Preparer`] for this
    /// pipeline's model prepared into `p` (the message is taken from `p`;
    /// a message handled again, or out of range, counts as blank).
    pub fn handle_prepared(
        &mut self,
        p: &mut Prepared,
        i: usize,
        default_id: &dyn Fn() -> String,
        now_ms: u64,
    ) -> Outcome {
        let taken = p
            .messages
            .get_mut(i)
            .and_then(|m| Some((m.message.take()?, m.buckets.clone(), m.counted.clone())));
        let Some((message, buckets, counted)) = taken else {
            self.counters.skipped += 1;
            return Outcome::Skipped;
        };
        self.cache.expire(now_ms, self.cfg.cache_ttl_ms);
        let outcome = match message {
            Err(bad) => Outcome::Bad(bad),
            Ok(Message::Feedback { id, gold }) => self.feedback(&id, gold),
            Ok(Message::Example { id, text, gold, split }) => {
                match counted {
                    Some(r) => {
                        self.x.idx.clear();
                        self.x.idx.extend_from_slice(&p.counted.idx[r.clone()]);
                        self.x.val.clear();
                        self.x.val.extend_from_slice(&p.counted.val[r]);
                    }
                    None => self.prep.featurizer.count_buckets(&p.buckets[buckets], &mut self.x),
                }
                let id = id.unwrap_or_else(default_id);
                match (gold, split) {
                    (Some(gold), Some(Split::Test)) => self.test_example(&text, gold),
                    (Some(gold), split) => {
                        let keep = self.cfg.keep_train && split == Some(Split::Train);
                        self.train(id, text, gold, now_ms, keep)
                    }
                    (None, _) => self.predict(id, text, now_ms),
                }
            }
        };
        if let Outcome::Bad(b) = &outcome {
            self.counters.bad[b.reason.index()] += 1;
        }
        outcome
    }

    fn task_of(gold: &Gold) -> Task {
        match gold {
            Gold::One(_) => Task::SingleLabel,
            Gold::Set(_) => Task::MultiLabel,
        }
    }

    /// Interns gold labels (adding classes), fixing the task on the first ones.
    fn gold_ids(&mut self, gold: &Gold) -> Result<Vec<usize>, Bad> {
        // Callers ran `check_gold` first: the labels fit the task and the class cap.
        self.model.ensure_task(Self::task_of(gold));
        gold.as_slice()
            .iter()
            .map(|l| {
                self.model.intern(l).map_err(|e| match e {
                    ModelError::TooManyClasses(_) => Bad::new(BadReason::TooManyClasses, e.to_string()),
                    other => Bad::new(BadReason::BadLabel, other.to_string()),
                })
            })
            .collect()
    }

    /// Predicts `self.x` into `self.scored`; returns the predicted label
    /// names and the positive-class score for binary ROC.
    fn predict_current(&mut self) -> (Vec<String>, Option<f32>) {
        self.model.predict(&self.x, &mut self.scored);
        let labels = self
            .scored
            .labels
            .iter()
            .map(|&c| self.model.labels().name(c).to_string())
            .collect();
        let score = self.positive_score();
        (labels, score)
    }

    fn positive_score(&self) -> Option<f32> {
        if !self.progressive.is_binary() || self.model.task() == Some(Task::MultiLabel) {
            return None;
        }
        let pos = self.progressive.positive();
        match pos.and_then(|p| self.model.labels().get(p)) {
            Some(id) => Some(Model::positive_score(&self.scored, id)),
            // The model does not know the positive class yet: it has no
            // evidence either way, so the neutral margin.
            None => Some(0.0),
        }
    }

    /// Featurizes `text` into the current vector and finishes it.
    fn featurize(&mut self, text: &str, learning: bool) {
        self.prep.featurizer.featurize_raw(text, &mut self.x);
        self.finish_features(text, learning, false);
    }

    /// Finishes the current vector, which holds the raw features of `text`:
    /// names for the sketch when learning and it asks, a raw copy in
    /// `self.raw` when `keep_raw`, then IDF, normalisation and the bias.
    fn finish_features(&mut self, text: &str, learning: bool, keep_raw: bool) {
        if learning && self.cfg.name_features && self.model.sketch_mut().wants_next() {
            // The same features again, with their names (one document in 64).
            let names = self.prep.featurizer.featurize_raw_named(text, &mut self.x);
            self.model.sketch.observe(names.iter());
        }
        if keep_raw {
            self.raw.clone_from(&self.x);
        }
        self.finalize_current();
        self.counters.features += self.x.len() as u64;
    }

    /// Completes `self.x` (raw features) in place with the model's IDF,
    /// normalisation and bias.
    fn finalize_current(&mut self) {
        self.raw_len = self.x.len();
        let model = &self.model;
        self.prep
            .featurizer
            .finalize_prefetching(&mut self.x, model.doc_freq(), |b| model.prefetch_row(b));
    }

    /// Learns `self.x` and counts its document frequencies.
    fn learn_current(&mut self, ids: &[usize], raw_scores: Option<&[f32]>) {
        // Callers checked the labels against the task, so learning cannot fail.
        let _ = self.model.learn_scored(&self.x, ids, raw_scores);
        self.model.observe_doc(&self.x.idx[..self.raw_len]);
    }

    /// Learns a labeled example; `keep` returns its raw features too.
    fn train(&mut self, id: String, text: String, gold: Gold, now_ms: u64, keep: bool) -> Outcome {
        // Check the labels before touching the model or the metrics.
        if let Err(bad) = self.check_gold(&gold) {
            return Outcome::Bad(bad);
        }
        self.finish_features(&text, true, keep);
        let (predicted, score) = self.predict_current();
        let ids = match self.gold_ids(&gold) {
            Ok(ids) => ids,
            Err(bad) => return Outcome::Bad(bad),
        };
        let gold_names = gold.as_slice();
        let correct = same_set(&predicted, gold_names);
        self.progressive.record(gold_names, &predicted, score);
        let scores = std::mem::take(&mut self.scored.raw);
        self.learn_current(&ids, Some(&scores));
        self.scored.raw = scores;
        self.counters.learned += 1;
        let kept = keep.then(|| (std::mem::take(&mut self.raw), gold_names.to_vec()));
        let gold_vec = gold.into_vec();
        self.cache.insert(
            id,
            CacheEntry {
                text,
                predicted,
                score,
                gold: Some(gold_vec),
                at_ms: now_ms,
            },
            &self.cfg,
        );
        Outcome::Learned { correct, kept }
    }

    /// Whether `gold` fits the model's task (without changing anything).
    fn check_gold(&self, gold: &Gold) -> Result<(), Bad> {
        let task = self.model.task().unwrap_or(Self::task_of(gold));
        let n = gold.as_slice().len();
        if task == Task::SingleLabel && n != 1 {
            return Err(Bad::new(
                BadReason::BadLabel,
                format!("this model is single-label, but the message has {n} labels"),
            ));
        }
        let new = gold
            .as_slice()
            .iter()
            .filter(|l| self.model.labels().get(l).is_none())
            .count();
        if self.model.labels().len() + new > crate::model::MAX_CLASSES {
            return Err(Bad::new(
                BadReason::TooManyClasses,
                format!("over the cap of {} classes", crate::model::MAX_CLASSES),
            ));
        }
        Ok(())
    }

    fn test_example(&mut self, text: &str, gold: Gold) -> Outcome {
        if let Err(bad) = self.check_gold(&gold) {
            return Outcome::Bad(bad);
        }
        self.finish_features(text, false, true);
        if self.cfg.defer_test {
            return Outcome::Test {
                deferred: Some((std::mem::take(&mut self.raw), gold.as_slice().to_vec())),
            };
        }
        self.model.ensure_task(Self::task_of(&gold));
        let raw = std::mem::take(&mut self.raw);
        self.score_test(&raw, gold.as_slice());
        self.raw = raw;
        Outcome::Test { deferred: None }
    }

    /// Scores a held-out example (raw features, as [`Outcome::Test`] holds
    /// them) with the model as it stands.
    pub fn score_test(&mut self, raw: &SparseVec, gold: &[String]) {
        self.x.clone_from(raw);
        self.finalize_current();
        self.model.predict(&self.x, &mut self.scored);
        let predicted: Vec<&str> = self
            .scored
            .labels
            .iter()
            .map(|&c| self.model.labels().name(c))
            .collect();
        let score = self.positive_score();
        self.test.record(gold, &predicted, score);
        self.counters.test_scored += 1;
    }

    /// Learns an example again (extra passes of `eval`, raw features as
    /// [`Outcome::Learned`] keeps them), without metrics or new document counts.
    pub fn relearn(&mut self, raw: &SparseVec, gold: &[String]) {
        let ids: Option<Vec<usize>> = gold.iter().map(|l| self.model.labels().get(l)).collect();
        if let Some(ids) = ids {
            self.x.clone_from(raw);
            self.finalize_current();
            let _ = self.model.learn(&self.x, &ids);
        }
    }

    /// Predicts `text` (whose raw features the current vector holds)
    /// without learning or caching; returns the prediction and the
    /// positive-class score.
    fn prediction(&mut self, id: String, text: &str) -> (Prediction, Option<f32>) {
        self.finish_features(text, false, false);
        let (labels, score) = self.predict_current();
        let names = self.model.labels();
        let scores = self
            .scored
            .scores
            .iter()
            .enumerate()
            .map(|(c, &s)| (names.name(c).to_string(), s))
            .collect();
        let prediction = Prediction {
            id,
            labels,
            scores,
            multilabel: self.model.task() == Some(Task::MultiLabel),
            model_version: self.model.version(),
        };
        (prediction, score)
    }

    fn predict(&mut self, id: String, text: String, now_ms: u64) -> Outcome {
        let (prediction, score) = self.prediction(id.clone(), &text);
        for l in &prediction.labels {
            *self.counters.predicted_by_label.entry(l.clone()).or_default() += 1;
        }
        self.counters.predicted += 1;
        let entry = CacheEntry {
            text,
            predicted: prediction.labels.clone(),
            score,
            gold: None,
            at_ms: now_ms,
        };
        self.cache.insert(id, entry, &self.cfg);
        Outcome::Predicted(prediction)
    }

    /// Predicts any message with text (labeled or not) without learning:
    /// the `predict` command. Feedback lines and bad input are refused.
    pub fn predict_only(&mut self, raw: &[u8], default_id: &dyn Fn() -> String) -> Result<Prediction, Bad> {
        match message::parse(raw, self.cfg.max_message_bytes)? {
            Message::Example { id, text, .. } => {
                self.prep.featurizer.featurize_raw(&text, &mut self.x);
                Ok(self.prediction(id.unwrap_or_else(default_id), &text).0)
            }
            Message::Feedback { .. } => Err(Bad::new(
                BadReason::MissingText,
                "a feedback label has no text to predict",
            )),
        }
    }

    fn feedback(&mut self, id: &str, gold: Gold) -> Outcome {
        if let Err(bad) = self.check_gold(&gold) {
            return Outcome::Bad(bad);
        }
        let Some((entry, _)) = self.cache.map.get(id) else {
            self.counters.feedback_unmatched += 1;
            return Outcome::FeedbackUnmatched;
        };
        let text = entry.text.clone();
        let correction = entry.gold.is_some();
        let (predicted, score) = (entry.predicted.clone(), entry.score);
        let ids = match self.gold_ids(&gold) {
            Ok(ids) => ids,
            Err(bad) => return Outcome::Bad(bad),
        };
        let gold_names = gold.into_vec();
        let mut correct = None;
        if !correction {
            self.published.record(&gold_names, &predicted, score);
            correct = Some(same_set(&predicted, &gold_names));
        }
        self.featurize(&text, true);
        self.learn_current(&ids, None);
        if let Some((e, _)) = self.cache.map.get_mut(id) {
            e.gold = Some(gold_names);
        }
        self.counters.feedback_matched += 1;
        if correction {
            self.counters.feedback_corrections += 1;
        }
        Outcome::FeedbackMatched { correct, correction }
    }
}

fn same_set(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureConfig;
    use crate::model::{Hyper, Learner};

    fn pipeline(cfg: PipelineConfig) -> Pipeline {
        let features = FeatureConfig {
            bits: 16,
            ..FeatureConfig::default()
        };
        Pipeline::new(Model::new(Hyper::defaults(Learner::Logistic), features), cfg)
    }

    fn id0() -> String {
        "line-0".into()
    }

    /// Messages prepared into shared batches (counted on either side)
    /// handle exactly as one at a time: the same outcomes, the same model.
    #[test]
    fn prepared_batches_handle_like_single_messages() {
        let lines: Vec<&[u8]> = vec![
            br#"{"text": "win win win cash prize now", "label": "spam"}"#,
            br#"{"text": "lunch at noon? lunch is on me", "label": "ham"}"#,
            b"   ",
            br#"{"id": "u-1", "text": "cash cash prize"}"#,
            br#"{"text": "not json"#,
            br#"{"text": "", "label": "ham"}"#,
            br#"{"id": "u-1", "label": "spam"}"#,
            br#"{"text": "free entry: call now, win a prize!", "label": "spam"}"#,
            br#"{"text": "see you at the station at six", "label": "ham"}"#,
            br#"{"id": "u-2", "text": "are we still on for lunch"}"#,
            br#"{"id": "u-2", "label": "ham"}"#,
            br#"{"text": "urgent: your prize is waiting, call call call", "label": "spam"}"#,
        ];
        let mut one = pipeline(PipelineConfig::default());
        let want: Vec<Outcome> = lines
            .iter()
            .enumerate()
            .map(|(n, l)| one.handle(l, &id0, n as u64))
            .collect();
        let mut batched = pipeline(PipelineConfig::default());
        let mut prep = batched.preparer();
        let mut batch = Prepared::default();
        let mut got = Vec::new();
        for (k, chunk) in lines.chunks(5).enumerate() {
            batch.clear();
            for (j, l) in chunk.iter().enumerate() {
                // Two in three counted here, the rest by the pipeline.
                prep.prepare(l, (k * 5 + j) % 3 != 2, &mut batch);
            }
            assert_eq!(batch.len(), chunk.len());
            for i in 0..batch.len() {
                got.push(batched.handle_prepared(&mut batch, i, &id0, (k * 5 + i) as u64));
            }
        }
        assert_eq!(got, want);
        assert_eq!(batched.counters().learned, one.counters().learned);
        let probe = br#"{"id": "p", "text": "win a free lunch prize"}"#;
        assert_eq!(batched.handle(probe, &id0, 99), one.handle(probe, &id0, 99));
        // A message taken already, or past the end, is blank.
        assert_eq!(batched.handle_prepared(&mut batch, 0, &id0, 0), Outcome::Skipped);
        assert_eq!(batched.handle_prepared(&mut batch, 9, &id0, 0), Outcome::Skipped);
    }

    /// The name sketch is kept only when asked for, and asking for it
    /// changes nothing else: the same outcomes and the same predictions.
    #[test]
    fn names_are_sketched_only_when_asked_and_change_nothing_else() {
        let lines: [&[u8]; 3] = [
            br#"{"text": "win cash prize now", "label": "spam"}"#,
            br#"{"text": "lunch at noon", "label": "ham"}"#,
            br#"{"id": "q", "text": "win a free lunch"}"#,
        ];
        let mut named = pipeline(PipelineConfig::default());
        let mut bare = pipeline(PipelineConfig {
            name_features: false,
            ..PipelineConfig::default()
        });
        for (n, l) in lines.iter().enumerate() {
            assert_eq!(named.handle(l, &id0, n as u64), bare.handle(l, &id0, n as u64));
        }
        assert!(named.model().sketch().len() > 10, "{}", named.model().sketch().len());
        assert_eq!(bare.model().sketch().len(), 0);
    }

    #[test]
    fn labeled_unlabeled_feedback_and_bad() {
        let mut p = pipeline(PipelineConfig::default());
        for _ in 0..5 {
            p.handle(br#"{"text": "win cash prize now", "label": "spam"}"#, &id0, 0);
            p.handle(br#"{"text": "lunch at noon?", "label": "ham"}"#, &id0, 0);
        }
        assert_eq!(p.counters().learned, 10);
        let Outcome::Predicted(pred) = p.handle(br#"{"id": "m-1", "text": "cash prize"}"#, &id0, 0) else {
            panic!("expected a prediction")
        };
        assert_eq!(pred.labels, ["spam"]);
        let mut json = Vec::new();
        pred.write_json(&mut json);
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["id"], "m-1");
        assert_eq!(v["label"], "spam");
        assert_eq!(v["model_version"], 10);
        assert!(v["scores"]["spam"].as_f64().unwrap() > 0.5);
        // The late label joins; a second one is a correction; an unknown id is counted.
        let v0 = p.model().version();
        assert_eq!(
            p.handle(br#"{"id": "m-1", "label": "spam"}"#, &id0, 1),
            Outcome::FeedbackMatched {
                correct: Some(true),
                correction: false
            }
        );
        assert_eq!(p.model().version(), v0 + 1);
        assert_eq!(
            p.handle(br#"{"id": "m-1", "label": "ham"}"#, &id0, 2),
            Outcome::FeedbackMatched {
                correct: None,
                correction: true
            }
        );
        assert_eq!(
            p.handle(br#"{"id": "nope", "label": "ham"}"#, &id0, 3),
            Outcome::FeedbackUnmatched
        );
        assert_eq!(p.published().total().examples, 1);
        assert_eq!(p.counters().feedback_corrections, 1);
        assert_eq!(p.counters().feedback_unmatched, 1);
        // Bad input is counted by reason and leaves the model alone.
        let v1 = p.model().version();
        assert!(matches!(p.handle(b"{oops", &id0, 4), Outcome::Bad(b) if b.reason == BadReason::BadJson));
        assert!(matches!(
            p.handle(br#"{"text": "x", "labels": ["a", "b"]}"#, &id0, 4),
            Outcome::Bad(b) if b.reason == BadReason::BadLabel
        ));
        assert_eq!(p.model().version(), v1);
        assert_eq!(p.counters().bad[BadReason::BadJson.index()], 1);
        assert_eq!(p.counters().bad_total(), 2);
        assert_eq!(p.progressive().total().examples, 10);
    }

    #[test]
    fn cache_respects_ttl_and_caps() {
        let cfg = PipelineConfig {
            cache_entries: 2,
            cache_ttl_ms: 100,
            ..PipelineConfig::default()
        };
        let mut p = pipeline(cfg);
        p.handle(br#"{"id": "a", "text": "one"}"#, &id0, 0);
        p.handle(br#"{"id": "b", "text": "two"}"#, &id0, 10);
        p.handle(br#"{"id": "c", "text": "three"}"#, &id0, 20);
        assert_eq!(p.cache().len(), 2);
        assert_eq!(p.cache().evicted, 1);
        assert_eq!(
            p.handle(br#"{"id": "a", "label": "x"}"#, &id0, 30),
            Outcome::FeedbackUnmatched
        );
        // At t=115, "b" (t=10) is past its TTL; "c" (t=20) is not.
        assert_eq!(
            p.handle(br#"{"id": "b", "label": "x"}"#, &id0, 115),
            Outcome::FeedbackUnmatched
        );
        assert_eq!(p.cache().expired, 1);
        assert!(matches!(
            p.handle(br#"{"id": "c", "label": "x"}"#, &id0, 115),
            Outcome::FeedbackMatched { .. }
        ));
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(400))]

        /// Arbitrary bytes never panic: they are an outcome, bad input at worst.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let mut p = pipeline(PipelineConfig { max_message_bytes: 200, ..PipelineConfig::default() });
            let _ = p.handle(&bytes, &id0, 0);
        }

        /// JSON-shaped input with arbitrary strings and labels never panics either,
        /// and a well-formed labeled line is always learned.
        #[test]
        fn arbitrary_messages_never_panic(text in "\\PC{0,200}", label in "\\PC{0,20}", multi in proptest::prelude::any::<bool>()) {
            let mut p = pipeline(PipelineConfig::default());
            let line = if multi {
                serde_json::json!({"text": text, "labels": [label.clone()]})
            } else {
                serde_json::json!({"text": text, "label": label.clone()})
            };
            let out = p.handle(line.to_string().as_bytes(), &id0, 0);
            let ok_label = !label.is_empty() && !label.chars().any(char::is_control);
            if ok_label {
                proptest::prop_assert!(matches!(out, Outcome::Learned { .. }), "{out:?}");
            }
            let _ = p.handle(serde_json::json!({"text": text}).to_string().as_bytes(), &id0, 0);
        }
    }

    #[test]
    fn missing_id_takes_the_default() {
        let mut p = pipeline(PipelineConfig::default());
        let Outcome::Predicted(pred) = p.handle(br#"{"text": "hello"}"#, &|| "stdin:7".to_string(), 0) else {
            panic!()
        };
        assert_eq!(pred.id, "stdin:7");
        assert_eq!(pred.labels, Vec::<String>::new(), "no class known yet");
    }
}
