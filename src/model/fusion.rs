//! Fusion of a linear learner with naive Bayes on the words: the stacking
//! of filters that led the TREC spam tracks (Lynam & Cormack 2006,
//! "On-line spam filter fusion"), folded into one model.
//!
//! Naive Bayes counts the word view of each learned example (the buckets
//! below [`FeatureConfig::words_end`], without the bias: words and word
//! n-grams, IDF-weighted and normalised as the linear learner sees them).
//! Its log-odds of class 1 against class 0, clipped at [`FUSION_CLIP`],
//! is split between the two classes as `f = (-d/2, d/2)`, and the model's
//! raw score becomes `w_k . x + a f_k`. The one weight `a` learns by AdaGrad from the same
//! log-loss (or hinge, perceptron) gradient as the linear weights, so the
//! stacker needs no labels or pass of its own. Binary tasks only: at a
//! third class the model drops its fusion (topics gained nothing from it,
//! and its counts grow with every class).
//!
//! [`FeatureConfig::words_end`]: crate::features::FeatureConfig::words_end

use super::naive_bayes::NaiveBayes;
use crate::features::SparseVec;

/// How far below the best class a class's naive Bayes log-posterior may
/// count: long e-mails give differences of hundreds of nats, which would
/// swamp the linear score (10 was best of 3, 5, 10, 30 and 100 on the
/// spam streams; docs/accuracy.md).
pub const FUSION_CLIP: f32 = 10.0;

/// The naive Bayes member and the stacker's weight.
#[derive(Clone, Debug, PartialEq)]
pub struct Fusion {
    /// Counts of the word view (`nb.buckets` is the view's end).
    pub(crate) nb: NaiveBayes,
    /// The weight `a` of the naive Bayes input in every class's raw score.
    pub(crate) weight: f32,
    /// AdaGrad's sum of squared gradients of `weight`.
    pub(crate) sum_sq: f32,
    alpha: f32,
    /// The bias feature's bucket, left out of the view.
    bias: u32,
}

impl Fusion {
    /// An empty fusion over the word view `[0, words_end)`.
    pub fn new(words_end: u32, bias: u32, alpha: f32) -> Self {
        Self::from_parts(NaiveBayes::new(words_end as usize, false), 0.0, 0.0, bias, alpha)
    }

    /// Rebuilds a fusion from its stored parts.
    pub fn from_parts(nb: NaiveBayes, weight: f32, sum_sq: f32, bias: u32, alpha: f32) -> Self {
        Fusion {
            nb,
            weight,
            sum_sq,
            alpha,
            bias,
        }
    }

    /// Adds a class; false (nothing changed) past two: fusion is for
    /// binary tasks.
    pub fn add_class(&mut self) -> bool {
        if self.nb.classes >= 2 {
            return false;
        }
        self.nb.add_class();
        true
    }

    /// The inputs `f_k` of `x`: `-d/2` and `d/2`, where `d` is naive
    /// Bayes's log-odds of class 1 against class 0, clipped to
    /// `FUSION_CLIP` either way. Zero before naive Bayes has seen both
    /// classes.
    pub fn inputs(&self, x: &SparseVec) -> [f32; 2] {
        let nb = &self.nb;
        if nb.classes < 2 || nb.class_docs.contains(&0) {
            return [0.0; 2];
        }
        let mut s = [0f32; 2];
        nb.scores_entries(view(nb.buckets as u32, self.bias, x), self.alpha, &mut s);
        let d = s[1] - s[0];
        if !d.is_finite() {
            return [0.0; 2];
        }
        // Half each way: the scores of a binary task stay a mirrored pair,
        // and their difference is the same as with each class's
        // log-posterior less the best one's.
        let d = d.clamp(-FUSION_CLIP, FUSION_CLIP) / 2.0;
        [-d, d]
    }

    /// Hints the CPU to fetch `bucket`'s counts, when it is in the view.
    #[inline(always)]
    pub fn prefetch_row(&self, bucket: u32) {
        if (bucket as usize) < self.nb.buckets {
            crate::features::prefetch(&self.nb.counts, bucket as usize * self.nb.classes);
        }
    }

    /// Adds `a f_k` to the raw scores.
    pub fn add(&self, f: [f32; 2], raw: &mut [f32]) {
        for (r, v) in raw.iter_mut().zip(f) {
            *r += self.weight * v;
        }
    }

    /// The fusion's part of a word's weight for `class` against the other
    /// class (for explanations and `inspect`): `a` times its log-likelihood
    /// ratio, 0 for a bucket outside the view or never counted.
    pub fn feature_weight(&self, bucket: u32, class: usize) -> f32 {
        let b = bucket as usize;
        if self.nb.classes < 2 || b >= self.nb.buckets || bucket == self.bias || class > 1 {
            return 0.0;
        }
        let counts = &self.nb.counts[b * 2..b * 2 + 2];
        if counts == [0.0, 0.0] {
            return 0.0;
        }
        let a = self.alpha;
        self.weight * ((counts[class] + a).ln() - (counts[1 - class] + a).ln())
    }

    /// One AdaGrad step of `a` along `grad` (the learner's ascent direction
    /// per class, e.g. `y_k - p_k`) at `rate`, with `f` the example's
    /// inputs; then counts the example's words for `gold`.
    /// The words are counted with `weight` (1: as they are).
    pub fn learn(&mut self, x: &SparseVec, f: [f32; 2], grad: &[f32], rate: f32, gold: usize, weight: f32) {
        let g: f32 = f.iter().zip(grad).map(|(&v, &d)| v * d).sum();
        if g.is_finite() && g != 0.0 {
            self.sum_sq += g * g;
            self.weight += rate * g / (0.01 + self.sum_sq.sqrt());
        }
        if gold >= self.nb.classes {
            return;
        }
        let (end, bias) = (self.nb.buckets as u32, self.bias);
        if weight == 1.0 {
            self.nb.learn_entries(view(end, bias, x), &[gold]);
        } else {
            let weighted = view(end, bias, x).map(|(b, v)| (b, v * weight));
            self.nb.learn_entries(weighted, &[gold]);
        }
    }

    /// Takes back the counts [`Fusion::learn`] added for `x` of class
    /// `gold` with `weight` (the stacker's weight `a` keeps what it
    /// learned: one number fitted over every example).
    pub fn unlearn(&mut self, x: &SparseVec, gold: usize, weight: f32) {
        if gold >= self.nb.classes {
            return;
        }
        let (end, bias) = (self.nb.buckets as u32, self.bias);
        let weighted = view(end, bias, x).map(|(b, v)| (b, v * weight));
        self.nb.unlearn_entries(weighted, &[gold]);
    }

    /// Bytes of its counts.
    pub fn bytes(&self) -> usize {
        self.nb.counts.len() * 4
    }
}

/// The entries of `x` below `end`, but `bias`.
fn view(end: u32, bias: u32, x: &SparseVec) -> impl Iterator<Item = (u32, f32)> + Clone + '_ {
    x.iter().filter(move |&(b, _)| b < end && b != bias)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vec(entries: &[(u32, f32)]) -> SparseVec {
        let mut x = SparseVec::default();
        for &(i, v) in entries {
            x.idx.push(i);
            x.val.push(v);
        }
        x
    }

    #[test]
    fn inputs_are_naive_bayes_log_odds_clipped_and_blind_to_chars() {
        let mut f = Fusion::new(8, 7, 0.01);
        assert!(f.add_class() && f.add_class() && !f.add_class());
        // Word 1 says class 1, word 2 says class 0; bucket 9 is a character
        // n-gram and 7 the bias: neither counts.
        for _ in 0..5 {
            f.learn(
                &vec(&[(1, 1.0), (7, 1.0), (9, 1.0)]),
                [0.0; 2],
                &[0.0, 0.0],
                0.1,
                1,
                1.0,
            );
            f.learn(
                &vec(&[(2, 1.0), (7, 1.0), (9, 1.0)]),
                [0.0; 2],
                &[0.0, 0.0],
                0.1,
                0,
                1.0,
            );
        }
        assert_eq!(f.nb.counts.len(), 16);
        let [a, b] = f.inputs(&vec(&[(1, 1.0), (9, 5.0)]));
        assert!(a < 0.0 && b == -a, "{a} {b}");
        let [a, b] = f.inputs(&vec(&[(2, 1.0)]));
        assert!(a > 0.0 && b == -a, "{a} {b}");
        // Many repeats of one word: clipped.
        let [a, _] = f.inputs(&vec(&[(1, 1000.0)]));
        assert_eq!(a, -FUSION_CLIP / 2.0);
        // The weight moves toward what lowers the loss: here f says class
        // 1 and the gradient wants class 1 up, so a grows.
        let before = f.weight;
        f.learn(&vec(&[(1, 1.0)]), [-3.0, 0.0], &[-0.5, 0.5], 0.1, 1, 1.0);
        assert!(f.weight > before);
        assert!(f.feature_weight(1, 1) > 0.0 && f.feature_weight(2, 1) < 0.0);
        assert_eq!(f.feature_weight(9, 1), 0.0);
        // Parts round trip.
        let g = Fusion::from_parts(f.nb.clone(), f.weight, f.sum_sq, 7, 0.01);
        assert_eq!(g, f);
    }
}
