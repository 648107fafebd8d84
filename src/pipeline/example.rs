//! One example's way through the model, its data passed explicitly:
//! featurizing fills a [`Features`], predicting them fills a [`Scored`],
//! learning takes both. The buffers are the pipeline's [`Work`], taken at
//! the start of a message and given back at its end so that their
//! allocations are reused; nothing in them is read from one message to
//! the next.

use super::Pipeline;
use crate::features::SparseVec;
use crate::model::{Lesson, Scored};

/// A message's features: raw, then finished (IDF, normalisation, bias).
#[derive(Clone, Debug, Default)]
pub(crate) struct Features {
    pub(crate) x: SparseVec,
    /// How many of `x`'s entries are the document's own (the bias and the
    /// personal copies may follow).
    pub(super) doc_len: usize,
    /// The key of the user the message is for ([`crate::features::user_key`]):
    /// finishing adds their personal features.
    pub(crate) user: Option<u64>,
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

/// A user's first labels teach the shared part alone; their personal
/// copies learn from the next on. While every user is new, copies that
/// learned from one or two labels each would take a share of every step
/// from the shared part and give nothing back: grey mail renamed into
/// 10,000 users (two messages each) fell from 0.7405 without users to
/// 0.7189 with copies x4 learning from the first label, and is 0.7376
/// with 20; grey mail with its 60 users keeps 0.782 (5-50 measured the
/// same within 0.005; docs/model.md).
pub(crate) const PERSONAL_AFTER: u32 = 20;

/// The buffers one message's stages fill and pass along.
#[derive(Debug, Default)]
pub(crate) struct Work {
    pub(crate) features: Features,
    pub(crate) scored: Scored,
}

impl Pipeline {
    /// Finishes `f`, which holds the raw features of `text` (see
    /// [`super::Predictor::finish`]), first giving the model's sketch their
    /// names when learning and it asks. Returns a copy of the raw features
    /// when `keep_raw` (for `eval`'s extra passes and its test split).
    pub(super) fn finish(&mut self, text: &str, learning: bool, keep_raw: bool, f: &mut Features) -> Option<SparseVec> {
        let model = &mut self.predictor.model;
        if learning && self.cfg.name_features && model.sketch_mut().wants_next() {
            // The same features again, with their names (one document in 64).
            let names = self.predictor.prep.featurizer.featurize_raw_named(text, &mut f.x);
            model.sketch.observe(names.iter());
        }
        let raw = self.predictor.finish(text, keep_raw, f);
        self.counters.features += f.x.len() as u64;
        raw
    }

    /// Predicts finished features into `scored`; returns the predicted
    /// label names and the positive-class score for binary ROC.
    pub(super) fn predict_features(&self, f: &Features, scored: &mut Scored) -> (Vec<String>, Option<f32>) {
        self.predictor.model.predict(&f.x, scored);
        self.predictor.named(scored, self.positive())
    }

    /// Learns finished features as gold classes `ids` (with what was just
    /// `predicted` for them, if anything) and counts their document
    /// frequencies.
    /// Returns what the step taught, to take it back.
    pub(super) fn learn_features(
        &mut self,
        f: &Features,
        ids: &[usize],
        predicted: Option<&Scored>,
        weight: f32,
    ) -> Lesson {
        // Callers checked the labels against the task, so learning cannot
        // fail (an empty lesson would take nothing back).
        let lesson = match self.shared_only(f) {
            Some(shared) => {
                let mut lesson = self
                    .predictor
                    .model
                    .learn_weighted(&shared, ids, predicted, weight)
                    .unwrap_or_default();
                lesson.shared_only = true;
                lesson
            }
            None => self
                .predictor
                .model
                .learn_weighted(&f.x, ids, predicted, weight)
                .unwrap_or_default(),
        };
        self.predictor.model.observe_doc(&f.x.idx[..f.doc_len]);
        lesson
    }

    /// `f`'s features without their personal copies, when its user has
    /// given at most [`PERSONAL_AFTER`] labels (this one's counted).
    fn shared_only(&self, f: &Features) -> Option<SparseVec> {
        if self.user_bands().labels(f.user?) > PERSONAL_AFTER {
            return None;
        }
        f.x.without_copies()
    }

    /// `text`'s features finished as the first label of a learned message
    /// saw them: the message is taken out of the document frequencies
    /// (learning it again counts it again; [`Pipeline::recount`] puts it
    /// back otherwise).
    pub(super) fn finish_unseen(&mut self, text: &str, f: &mut Features) {
        self.predictor.featurize(text, f);
        self.predictor.model.forget_doc(&f.x.idx);
        self.finish(text, false, false, f);
    }

    /// Counts the message of `f` in the document frequencies again (after
    /// [`Pipeline::finish_unseen`], when it is not learned again).
    pub(super) fn recount(&mut self, f: &Features) {
        self.predictor.model.observe_doc(&f.x.idx[..f.doc_len]);
    }

    /// Takes back at `f` (from [`Pipeline::finish_unseen`]) what `lesson`
    /// taught as classes `ids`.
    pub(super) fn unlearn_features(&mut self, f: &Features, ids: &[usize], lesson: &Lesson) {
        self.predictor.model.unlearn(&f.x, ids, lesson);
    }
}
