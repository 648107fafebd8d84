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
//! step) and its margin `m`, the log-odds of class 1, is added to the raw
//! scores as `(-a m/2, a m/2)`: the binary margin grows by `a m`.
//!
//! The weight `a` starts at 0 and is learned for ranking, the way ROSVM
//! learns a spam filter (Sculley and Wachman 2007): each label compares
//! its example with the last [`RECENT`] learned examples of the other
//! class, and where the combined margins order a pair by less than
//! [`HINGE`], `a` takes an AdaGrad step of the pairwise hinge loss's
//! gradient (clamped to `[0, MAX_WEIGHT]`). So `a` grows only where the
//! byte LR orders pairs the model misorders: on raw CSDMC2010 it settles
//! near 1, on SpamAssassin near 0 (docs/accuracy.md, issue 40).
//!
//! Binary single-label tasks only, like the fusion: a third class or a
//! multi-label task drops it.

use std::collections::VecDeque;

use crate::features::prefetch;
pub use crate::features::{BYTE_LR_BITS, HEAD_BYTES};

/// How many grams ahead a weight is fetched: they are scattered over
/// its 4 MB, a cache miss each.
const AHEAD: usize = 16;
/// Its constant learning rate (8 ranked best of 0.5, 2, 8 and 32).
pub const BYTE_LR_RATE: f32 = 8.0;
/// The learned weight's recent examples per class (a pair each with
/// every one of the other class's).
pub const RECENT: usize = 10;
/// The pairwise hinge: a pair ordered by less than this margin moves `a`.
pub const HINGE: f32 = 1.0;
/// AdaGrad's rate for `a`.
pub const WEIGHT_RATE: f32 = 0.05;
/// The most `a` may grow to.
pub const MAX_WEIGHT: f32 = 4.0;
/// Its log-odds are clipped here when turned into a probability to learn
/// from: past it the gradient is nil anyway.
const LOGIT_CLIP: f32 = 30.0;

/// The byte LR's part of a prediction's raw scores: its margin (log-odds
/// of class 1), and what was added to each class's raw score (`a` times
/// half of it, either way), which learning takes out again.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Part {
    pub margin: f32,
    pub added: [f32; 2],
}

/// The learned weight's state as stored (a checkpoint, a model-topic
/// record), checked: `a` in `[0, MAX_WEIGHT]`, a finite sum, at most
/// [`RECENT`] examples a class.
#[derive(Clone, Debug, PartialEq)]
pub struct Stacking {
    weight: f32,
    sum_sq: f32,
    recent: [Vec<(f32, f32)>; 2],
}

impl Stacking {
    /// From its stored parts (each class's recent examples as flattened
    /// pairs); `None` when a part is out of range.
    pub fn from_flat(weight: f32, sum_sq: f32, recent_0: &[f32], recent_1: &[f32]) -> Option<Self> {
        let pairs = |flat: &[f32]| -> Option<Vec<(f32, f32)>> {
            let ok = flat.len().is_multiple_of(2) && flat.len() / 2 <= RECENT;
            ok.then(|| flat.chunks(2).map(|p| (p[0], p[1])).collect())
        };
        let ok = (0.0..=MAX_WEIGHT).contains(&weight) && sum_sq.is_finite() && sum_sq >= 0.0;
        Some(Stacking {
            weight,
            sum_sq,
            recent: [pairs(recent_0)?, pairs(recent_1)?],
        })
        .filter(|_| ok)
    }
}

/// The member's weights, and which buckets learning changed since a
/// publisher last asked.
#[derive(Clone, Debug, PartialEq)]
pub struct ByteLr {
    pub(crate) weights: Vec<f32>,
    /// The weight `a` of its margin in the model's.
    pub(crate) weight: f32,
    /// AdaGrad's sum of squared gradients of `weight`.
    pub(crate) sum_sq: f32,
    /// The last [`RECENT`] examples learned of each class: the model's own
    /// binary margin of class 1 and this member's.
    pub(crate) recent: [VecDeque<(f32, f32)>; 2],
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
            weight: 0.0,
            sum_sq: 0.0,
            recent: Default::default(),
            changed: None,
        }
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

    /// Its part of a binary task's raw scores at its margin `margin`:
    /// `(-a m/2, a m/2)`.
    pub fn part(&self, margin: f32) -> Part {
        let half = self.weight * margin / 2.0;
        Part {
            margin,
            added: [-half, half],
        }
    }

    /// One step of the weight `a` for a learned example of class `gold`
    /// (0 or 1) whose binary margin of class 1 was `own` by the model and
    /// `margin` by this member, scaled by `weight` (how far the label is
    /// believed); then the example joins its class's recent ones.
    pub fn learn_weight(&mut self, own: f32, margin: f32, gold: usize, weight: f32) {
        if gold > 1 || !own.is_finite() || !margin.is_finite() {
            return;
        }
        let sign = if gold == 1 { 1.0 } else { -1.0 };
        let others = &self.recent[1 - gold];
        if !others.is_empty() {
            let mut g = 0.0;
            for &(own_j, margin_j) in others {
                let d = sign * ((own - own_j) + self.weight * (margin - margin_j));
                if d < HINGE {
                    g += sign * (margin - margin_j);
                }
            }
            let g = weight * g / others.len() as f32;
            if g != 0.0 {
                self.sum_sq += g * g;
                self.weight = (self.weight + WEIGHT_RATE * g / self.sum_sq.sqrt()).clamp(0.0, MAX_WEIGHT);
            }
        }
        let mine = &mut self.recent[gold];
        if mine.len() == RECENT {
            mine.pop_front();
        }
        mine.push_back((own, margin));
    }

    /// One step of the log-loss at its margin `margin` for `grams`, toward
    /// class 1 when `positive`, scaled by `weight` (how far the label is
    /// believed). Returns the step each gram's weight took (what
    /// [`ByteLr::unlearn`] takes back).
    pub fn learn(&mut self, grams: &[u32], margin: f32, positive: bool, weight: f32) -> f32 {
        if grams.is_empty() || !margin.is_finite() {
            return 0.0;
        }
        let p = super::sigmoid(margin.clamp(-LOGIT_CLIP, LOGIT_CLIP));
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
        Some(super::drain_bits(bits))
    }

    /// A copy without the change tracking (copies that only score).
    pub fn scoring_copy(&self) -> Self {
        ByteLr {
            weights: self.weights.clone(),
            weight: self.weight,
            sum_sq: self.sum_sq,
            recent: self.recent.clone(),
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

    /// Puts a stored state of the learned weight in place.
    pub fn set_stacking(&mut self, s: Stacking) {
        (self.weight, self.sum_sq) = (s.weight, s.sum_sq);
        self.recent = s.recent.map(VecDeque::from);
    }

    /// Bytes of its weights.
    pub fn bytes(&self) -> usize {
        self.weights.len() * 4
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

    #[test]
    fn its_weight_grows_where_it_orders_pairs_the_model_misorders() {
        let mut m = ByteLr::new();
        assert_eq!(m.part(4.0).added, [0.0, 0.0]);
        // The model orders every pair wrong (class 1 below class 0), the
        // byte LR right: its weight grows.
        for _ in 0..20 {
            m.learn_weight(-1.0, 3.0, 1, 1.0);
            m.learn_weight(1.0, -3.0, 0, 1.0);
        }
        let grown = m.weight;
        assert!(grown > 0.3, "{grown}");
        assert_eq!(m.part(2.0).added, [-grown, grown]);
        assert!(m.recent.iter().all(|r| r.len() == RECENT));
        // The model orders them right, barely, the byte LR wrong: its
        // weight falls back, never below zero.
        for _ in 0..200 {
            m.learn_weight(0.2, -3.0, 1, 1.0);
            m.learn_weight(-0.2, 3.0, 0, 1.0);
        }
        // Pairs the model orders right by a wide margin move nothing.
        let settled = m.weight;
        m.learn_weight(9.0, -3.0, 1, 1.0);
        m.learn_weight(-9.0, 3.0, 0, 1.0);
        assert_eq!(m.weight, settled);
        assert!(m.weight < grown / 2.0 && m.weight >= 0.0, "{}", m.weight);
        let flat = |c: usize| m.recent[c].iter().flat_map(|&(a, b)| [a, b]).collect::<Vec<_>>();
        let stored = Stacking::from_flat(m.weight, m.sum_sq, &flat(0), &flat(1));
        assert!(stored.is_some());
        let mut copy = ByteLr::new();
        copy.set_stacking(stored.unwrap());
        assert_eq!(
            (copy.weight, copy.sum_sq, &copy.recent),
            (m.weight, m.sum_sq, &m.recent)
        );
        assert!(Stacking::from_flat(MAX_WEIGHT + 1.0, 0.0, &[], &[]).is_none());
        assert!(Stacking::from_flat(1.0, 0.0, &[1.0], &[]).is_none());
        assert!(Stacking::from_flat(1.0, 0.0, &[0.0; 2 * RECENT + 2], &[]).is_none());
    }
}
