//! One example's way through the model, its data passed explicitly:
//! featurizing fills a [`Features`], predicting them fills a [`Scored`],
//! learning takes both. The buffers are the pipeline's [`Work`], taken at
//! the start of a message and given back at its end so that their
//! allocations are reused; nothing in them is read from one message to
//! the next.

use super::{Pipeline, Reporter, trust};
use crate::features::SparseVec;
use crate::model::{Model, Scored, Task};

/// A label whose reporter's trust is under this is held (not learned
/// unless another reporter confirms it).
pub(super) const HOLD_BELOW: f32 = 0.05;
/// At most one log line naming an unreliable reporter this often.
const WARN_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// The recent share of confident contradictions is a moving average over
/// about 1 / this many labels.
const CONTRADICTION_ALPHA: f32 = 0.02;
/// Below the first share, labels are learned in full; past the second,
/// confident contradictions are down-weighted in full (docs/feedback.md).
const CONTRADICTION_BAND: (f32, f32) = (0.02, 0.04);
/// Past the first share the down-weighting fades, and past the second it
/// is off: so many contradictions are no longer noise but a change of the
/// stream, which must be learned (docs/feedback.md: SMS with its labels
/// swapped half-way, 601 errors without this fade, 481 with it, 249 with
/// no weighing; no noisy run changed).
const CHANGE_BAND: (f32, f32) = (0.5, 0.7);

/// A message's features: raw, then finished (IDF, normalisation, bias).
#[derive(Clone, Debug, Default)]
pub(crate) struct Features {
    pub(crate) x: SparseVec,
    /// How many of `x`'s entries are the document's own (the bias may follow).
    doc_len: usize,
}

impl Features {
    /// Raw features to finish, copied from `raw`.
    pub(super) fn set_raw(&mut self, raw: &SparseVec) {
        self.x.clone_from(raw);
    }

    /// Raw features to finish, copied from counted entries.
    pub(super) fn set_counted(&mut self, idx: &[u32], val: &[f32]) {
        self.x.idx.clear();
        self.x.idx.extend_from_slice(idx);
        self.x.val.clear();
        self.x.val.extend_from_slice(val);
    }
}

/// The buffers one message's stages fill and pass along.
#[derive(Debug, Default)]
pub(crate) struct Work {
    pub(crate) features: Features,
    pub(crate) scored: Scored,
}

impl Pipeline {
    /// `text`'s raw features into `f`.
    pub(super) fn featurize(&mut self, text: &str, f: &mut Features) {
        self.prep.featurizer.featurize_raw(text, &mut f.x);
    }

    /// Finishes `f`, which holds the raw features of `text`: names for the
    /// sketch when learning and it asks, then IDF, normalisation and the
    /// bias. Returns a copy of the raw features when `keep_raw` (for
    /// `eval`'s extra passes and its test split).
    pub(super) fn finish(&mut self, text: &str, learning: bool, keep_raw: bool, f: &mut Features) -> Option<SparseVec> {
        if learning && self.cfg.name_features && self.model.sketch_mut().wants_next() {
            // The same features again, with their names (one document in 64).
            let names = self.prep.featurizer.featurize_raw_named(text, &mut f.x);
            self.model.sketch.observe(names.iter());
        }
        let raw = keep_raw.then(|| f.x.clone());
        self.finalize(f);
        self.counters.features += f.x.len() as u64;
        raw
    }

    /// Completes `f` (raw features) in place with the model's IDF,
    /// normalisation and bias.
    pub(super) fn finalize(&self, f: &mut Features) {
        f.doc_len = f.x.len();
        let model = &self.model;
        self.prep
            .featurizer
            .finalize_prefetching(&mut f.x, model.doc_freq(), |b| model.prefetch_row(b));
    }

    /// Predicts finished features into `scored`; returns the predicted
    /// label names and the positive-class score for binary ROC.
    pub(super) fn predict_features(&self, f: &Features, scored: &mut Scored) -> (Vec<String>, Option<f32>) {
        self.model.predict(&f.x, scored);
        self.named(scored)
    }

    /// The label names of `scored` and its positive-class score.
    pub(super) fn named(&self, scored: &Scored) -> (Vec<String>, Option<f32>) {
        let labels = scored
            .labels
            .iter()
            .map(|&c| self.model.labels().name(c).to_string())
            .collect();
        (labels, self.positive_score(scored))
    }

    /// The positive class's score in `scored` (binary single-label tasks).
    pub(super) fn positive_score(&self, scored: &Scored) -> Option<f32> {
        if !self.progressive.is_binary() || self.model.task() == Some(Task::MultiLabel) {
            return None;
        }
        let pos = self.progressive.positive();
        match pos.and_then(|p| self.model.labels().get(p)) {
            Some(id) => Some(Model::positive_score(scored, id)),
            // The model does not know the positive class yet: it has no
            // evidence either way, so the neutral margin.
            None => Some(0.0),
        }
    }

    /// Learns finished features as gold classes `ids` (with what was just
    /// `predicted` for them, if anything) and counts their document
    /// frequencies.
    pub(super) fn learn_features(&mut self, f: &Features, ids: &[usize], predicted: Option<&Scored>, weight: f32) {
        // Callers checked the labels against the task, so learning cannot fail.
        let _ = self.model.learn_weighted(&f.x, ids, predicted, weight);
        self.model.observe_doc(&f.x.idx[..f.doc_len]);
    }

    /// How far to believe a single label `ids` from `reporter` given the
    /// model's prediction `scored` of the same features: a weight over 0
    /// and at most 1, or `None` when the reporter's trust is under
    /// [`HOLD_BELOW`] and the label is held, not learned.
    ///
    /// A label that contradicts the prediction by a raw-score margin m over
    /// r (`--contradiction-margin`; 0 turns all this off) is a confident
    /// contradiction. Its weight is `1 - s (1 - (r/m)^2)`, where s grows
    /// from 0 to 1 as the recent share of confident contradictions
    /// ([`Pipeline::contradictions`]) goes from 2 % to 4 %: clean feedback
    /// (under 2 % on the shared spam streams) is learned in full; under
    /// noise or an attack a label the model is sure is wrong moves it
    /// little, never not at all. Past 50-70 % the weighing fades out again
    /// ([`CHANGE_BAND`]): that many contradictions are a change of the
    /// stream. Every label is then scaled by its reporter's trust ([`super::trust`]), unless the reporter is trusted
    /// outright.
    pub(super) fn label_weight(&mut self, scored: &Scored, ids: &[usize], reporter: Option<&str>) -> Option<f32> {
        let r = self.cfg.trust.margin;
        let ([gold], Some(&predicted)) = (ids, scored.labels.first()) else {
            return Some(1.0);
        };
        // A multi-label prediction is a set, not one class against the rest.
        if r <= 0.0 || self.model.task() != Some(Task::SingleLabel) {
            return Some(1.0);
        }
        let margin = match scored.raw.get(*gold) {
            Some(g) if predicted != *gold => scored.raw[predicted] - g,
            _ => 0.0,
        };
        let confident = margin > r;
        let name = reporter.unwrap_or(trust::ANONYMOUS);
        let trusted = self.cfg.trust.trusts(name);
        let (trust, crossed) = match trusted {
            true => (1.0, false),
            false => self.reporters.observe(name, confident, self.contradictions),
        };
        if crossed {
            self.warn_unreliable(name);
        }
        if trust < HOLD_BELOW {
            // Held labels are not what everyone says: they stay out of the share.
            return None;
        }
        self.contradictions += CONTRADICTION_ALPHA * (f32::from(u8::from(confident)) - self.contradictions);
        if trusted {
            return Some(1.0);
        }
        // The band is calibrated on binary streams (spam filters); a
        // topic stream's clean labels contradict its model more often
        // (docs/feedback.md): there only the reporters' trust applies.
        if !confident || self.model.labels().len() != 2 {
            return Some(trust);
        }
        let (lo, hi) = CONTRADICTION_BAND;
        let s = ((self.contradictions - lo) / (hi - lo)).clamp(0.0, 1.0);
        let (lo, hi) = CHANGE_BAND;
        let s = s * (1.0 - ((self.contradictions - lo) / (hi - lo)).clamp(0.0, 1.0));
        let w = (r / margin) * (r / margin);
        Some(trust * (1.0 - s * (1.0 - w)))
    }

    /// Counts a label learned with `weight` (`None`: held) by its outcome.
    pub(super) fn count_weighed(&mut self, weight: Option<f32>, reporter: Option<&str>) {
        let c = &mut self.counters;
        match weight {
            None => {
                c.labels_held += 1;
                self.reporters.count_held(reporter.unwrap_or(trust::ANONYMOUS));
            }
            Some(w) if w < 1.0 => c.labels_down_weighted += 1,
            Some(_) => c.labels_in_full += 1,
        }
    }

    /// Logs that `name`'s trust fell under [`trust::UNRELIABLE_BELOW`], at
    /// most once every [`WARN_EVERY`] (the ones left out are counted in
    /// the next line).
    fn warn_unreliable(&mut self, name: &str) {
        let now = std::time::Instant::now();
        if self.warned.is_some_and(|(at, _)| now.duration_since(at) < WARN_EVERY) {
            if let Some((_, quiet)) = &mut self.warned {
                *quiet += 1;
            }
            return;
        }
        let quiet = self.warned.map_or(0, |(_, q)| q);
        self.warned = Some((now, 0));
        let everyone = self.contradictions;
        let share = self.reporters.get(name).map_or(0.0, Reporter::share);
        tracing::warn!(
            reporter = name,
            contradiction_share = share,
            everyone_share = everyone,
            others_since_last_line = quiet,
            "reporter judged unreliable: its labels contradict confident predictions far more often than \
             everyone's; they are held until another reporter confirms them"
        );
    }
}
