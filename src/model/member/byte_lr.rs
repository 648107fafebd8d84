//! The byte LR: the TREC 2007 baseline spam filter (Cormack's online
//! logistic regression over the byte 4-grams of a message's head), kept as
//! a member of a binary model whose log-odds add to the model's margin.
//!
//! Its input is the set of distinct 4-gram buckets of the document's first
//! [`HEAD_BYTES`] bytes (`features::HeadGrams`; for a raw e-mail, its
//! headers as they came), each valued `1/sqrt(n)`; its weights, one `f32`
//! per bucket of `2^`[`BYTE_LR_BITS`], learn at the constant rate
//! [`BYTE_LR_RATE`] from every label, weighed as the model's are. It
//! learns apart from the model (its part is left out of the model's own
//! step) and its margin `m`, the log-odds of class 1, is one member of
//! the model's stack (`crate::model::stack`), which learns its weight.
//!
//! Binary single-label tasks only, like the fusion: a third class or a
//! multi-label task drops it.

use super::{Added, Entry, Reads};
pub use crate::features::{BYTE_LR_BITS, HEAD_BYTES};
use crate::features::{SparseVec, prefetch};

/// Its line of the stack's registry (`super`): added at the
/// first raw e-mail unless `--byte-lr` says otherwise.
pub const ENTRY: Entry = Entry {
    name: "byte_lr",
    make: || Box::new(ByteLr::new()),
    on_email: true,
};

/// How many grams ahead a weight is fetched: they are scattered over
/// its 4 MB, a cache miss each.
const AHEAD: usize = 16;
/// Its constant learning rate (8 ranked best of 0.5, 2, 8 and 32).
pub const BYTE_LR_RATE: f32 = 8.0;
/// Its log-odds are clipped here when turned into a probability to learn
/// from: past it the gradient is nil anyway.
const LOGIT_CLIP: f32 = 30.0;

/// The member's weights, and which buckets learning changed since a
/// publisher last asked.
#[derive(Clone, Debug, PartialEq)]
pub struct ByteLr {
    weights: Vec<f32>,
    /// A bit per bucket learned since the changes were last taken (a
    /// learner that publishes), see [`ByteLr::take_changes`].
    changed: Option<Vec<u64>>,
}

impl Default for ByteLr {
    fn default() -> Self {
        Self::new()
    }
}

impl ByteLr {
    /// Zero weights over all its buckets.
    pub fn new() -> Self {
        ByteLr {
            weights: vec![0.0; 1 << BYTE_LR_BITS],
            changed: None,
        }
    }

    /// A member of the weights a checkpoint kept: as many as its buckets,
    /// else none.
    pub fn from_weights(weights: Vec<f32>) -> Option<Self> {
        (weights.len() == 1 << BYTE_LR_BITS).then_some(ByteLr { weights, changed: None })
    }

    /// Its weights, one per bucket.
    pub fn weights(&self) -> &[f32] {
        &self.weights
    }

    /// The value of each of `n` grams: `1/sqrt(n)`, the input's unit norm.
    fn value(n: usize) -> f32 {
        1.0 / (n.max(1) as f32).sqrt()
    }

    /// Its log-odds of class 1 for the gram buckets `grams` (distinct).
    pub fn margin(&self, grams: &[u32]) -> f32 {
        let w = &self.weights;
        let mut sum = 0.0;
        for (i, &g) in grams.iter().enumerate() {
            if let Some(&ahead) = grams.get(i + AHEAD) {
                prefetch(w, ahead as usize);
            }
            sum += w[g as usize];
        }
        sum * Self::value(grams.len())
    }

    /// One step of the log-loss at its margin `margin` for `grams`, toward
    /// class 1 when `positive`, scaled by `weight` (how far the label is
    /// believed). Returns the step each gram's weight took (what
    /// [`ByteLr::unlearn`] takes back).
    pub fn learn(&mut self, grams: &[u32], margin: f32, positive: bool, weight: f32) -> f32 {
        if grams.is_empty() || !margin.is_finite() {
            return 0.0;
        }
        let p = crate::model::sigmoid(margin.clamp(-LOGIT_CLIP, LOGIT_CLIP));
        let step = BYTE_LR_RATE * weight * (f32::from(u8::from(positive)) - p) * Self::value(grams.len());
        self.add(grams, step);
        step
    }

    /// Takes back a step of `step` on `grams` (what [`ByteLr::learn`]
    /// returned for them): its weights are exactly as before but for
    /// rounding (a constant rate, no per-gram state).
    pub fn unlearn(&mut self, grams: &[u32], step: f32) {
        if step != 0.0 && step.is_finite() {
            self.add(grams, -step);
        }
    }

    /// Adds `step` to each gram's weight, noting the grams as changed.
    fn add(&mut self, grams: &[u32], step: f32) {
        let w = &mut self.weights;
        for (i, &g) in grams.iter().enumerate() {
            if let Some(&ahead) = grams.get(i + AHEAD) {
                prefetch(w, ahead as usize);
            }
            w[g as usize] += step;
        }
        if let Some(bits) = &mut self.changed {
            for &g in grams {
                bits[g as usize / 64] |= 1 << (g % 64);
            }
        }
    }

    /// From now on, notes the buckets learning changes.
    pub fn track_changes(&mut self) {
        if self.changed.is_none() {
            self.changed = Some(vec![0; self.weights.len().div_ceil(64)]);
        }
    }

    /// The buckets changed since the last call (ascending), and a clean
    /// slate; `None` when changes are not tracked.
    pub fn take_changes(&mut self) -> Option<Vec<u32>> {
        let bits = self.changed.as_mut()?;
        Some(crate::model::drain_bits(bits))
    }

    /// A copy without the change tracking (copies that only score).
    pub fn scoring_copy(&self) -> Self {
        ByteLr {
            weights: self.weights.clone(),
            changed: None,
        }
    }

    /// Its weights' non-zero buckets, ascending, with their values (what a
    /// checkpoint or a full version holds).
    pub fn nonzero(&self) -> (Vec<u32>, Vec<f32>) {
        self.weights
            .iter()
            .enumerate()
            .filter(|&(_, &v)| v != 0.0)
            .map(|(b, &v)| (b as u32, v))
            .unzip()
    }

    /// Sets the buckets `buckets` to `values`; false (nothing set) when a
    /// bucket is out of range or the lengths differ.
    pub fn put(&mut self, buckets: &[u32], values: &[f32]) -> bool {
        let fits = buckets.len() == values.len() && buckets.iter().all(|&b| (b as usize) < self.weights.len());
        if fits {
            for (&b, &v) in buckets.iter().zip(values) {
                self.weights[b as usize] = v;
            }
        }
        fits
    }

    /// Bytes of its weights.
    pub fn bytes(&self) -> usize {
        self.weights.len() * 4
    }
}

/// A member of the stack: it scores and learns the head's grams (none
/// for a message without them), a weight per slot.
impl Added for ByteLr {
    fn name(&self) -> &'static str {
        ENTRY.name
    }

    fn reads(&self) -> Reads {
        Reads::Grams
    }

    fn margin(&self, x: &SparseVec) -> Option<f32> {
        (!x.head.is_empty()).then(|| ByteLr::margin(self, &x.head))
    }

    fn learn(&mut self, x: &SparseVec, gold: usize, margin: Option<f32>, weight: f32) -> f32 {
        if x.head.is_empty() {
            return 0.0;
        }
        let margin = margin.unwrap_or_else(|| ByteLr::margin(self, &x.head));
        ByteLr::learn(self, &x.head, margin, gold == 1, weight)
    }

    fn unlearn(&mut self, x: &SparseVec, _: Option<usize>, _: f32, step: f32) {
        if !x.head.is_empty() {
            ByteLr::unlearn(self, &x.head, step);
        }
    }

    fn track_changes(&mut self) {
        ByteLr::track_changes(self);
    }

    fn take_changes(&mut self) -> Option<Vec<u32>> {
        ByteLr::take_changes(self)
    }

    fn scoring_copy(&self) -> Box<dyn Added> {
        Box::new(ByteLr::scoring_copy(self))
    }

    fn boxed_clone(&self) -> Box<dyn Added> {
        Box::new(self.clone())
    }

    fn bytes(&self) -> usize {
        ByteLr::bytes(self)
    }

    fn width(&self) -> usize {
        1
    }

    fn nonzero(&self) -> (Vec<u32>, Vec<f32>) {
        ByteLr::nonzero(self)
    }

    fn values_of(&self, slots: &[u32]) -> Vec<f32> {
        slots
            .iter()
            .map(|&g| self.weights.get(g as usize).copied().unwrap_or(0.0))
            .collect()
    }

    fn fits(&self, slots: &[u32], values: &[f32]) -> bool {
        slots.len() == values.len() && slots.iter().all(|&b| (b as usize) < self.weights.len())
    }

    fn put(&mut self, slots: &[u32], values: &[f32]) -> bool {
        ByteLr::put(self, slots, values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_learns_toward_the_label_by_a_step_bounded_by_its_evidence() {
        let mut m = ByteLr::new();
        m.track_changes();
        let spam = [1u32, 2, 3, 4];
        assert_eq!(m.margin(&spam), 0.0);
        m.learn(&spam, 0.0, true, 1.0);
        // One step at margin 0: each weight moves 8 * 0.5 / 2 = 2, and the
        // margin is 4 * 2 / 2 = 4.
        assert!((m.margin(&spam) - 4.0).abs() < 1e-5, "{}", m.margin(&spam));
        // A message sharing one of the four grams gets a quarter of it,
        // scaled by its own length.
        assert!((m.margin(&[1, 9]) - 2.0 / 2f32.sqrt()).abs() < 1e-5);
        // A half-believed label moves half as far.
        let mut h = ByteLr::new();
        h.learn(&spam, 0.0, false, 0.5);
        assert!((h.margin(&spam) + 2.0).abs() < 1e-5);
        assert_eq!(m.take_changes(), Some(spam.to_vec()));
        assert_eq!(m.take_changes(), Some(vec![]));
        let (b, v) = m.nonzero();
        let mut copy = ByteLr::new();
        assert!(copy.put(&b, &v) && !copy.put(&[1 << BYTE_LR_BITS], &[1.0]));
        assert_eq!(copy, m.scoring_copy());
    }
}
