//! `eval --feedback-noise P --seed S`: the labels the learner sees are
//! flipped at random, a share P of them, while the metrics score the
//! stream's own labels: how a learner stands noisy feedback, reproducibly.
//! Which examples flip, and to which class, depends only on the seed and
//! the example's place among the labeled examples of the stream.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Random label flips at `rate`, drawn from `seed`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LabelNoise {
    pub rate: f64,
    pub seed: u64,
}

impl LabelNoise {
    /// The class the learner sees for labeled example `n` of gold class
    /// `gold`, among `k` classes: another class, uniformly, with
    /// probability `rate`; else `gold`.
    pub fn class(&self, n: u64, gold: usize, k: usize) -> usize {
        if k < 2 {
            return gold;
        }
        let draw = xxh3_64_with_seed(&n.to_le_bytes(), self.seed);
        // The top 53 bits as a uniform number in [0, 1).
        let u = (draw >> 11) as f64 / (1u64 << 53) as f64;
        if u >= self.rate {
            return gold;
        }
        let pick = xxh3_64_with_seed(&n.to_le_bytes(), !self.seed) % (k as u64 - 1);
        let pick = pick as usize;
        if pick >= gold { pick + 1 } else { pick }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flips_the_share_asked_to_other_classes_and_repeats_with_its_seed() {
        let noise = LabelNoise { rate: 0.1, seed: 7 };
        let n = 100_000;
        let flipped: Vec<u64> = (0..n).filter(|&i| noise.class(i, 1, 2) != 1).collect();
        let share = flipped.len() as f64 / n as f64;
        assert!((share - 0.1).abs() < 0.005, "share {share}");
        assert!((0..n).all(|i| noise.class(i, 1, 2) == noise.class(i, 1, 2)));
        // Another seed flips other examples.
        let other = LabelNoise { rate: 0.1, seed: 8 };
        let same = flipped.iter().filter(|&&i| other.class(i, 1, 2) != 1).count();
        assert!(same < flipped.len() / 5, "{same} of {}", flipped.len());
        // Among five classes a flip never lands on the gold class, and reaches every other.
        let to: std::collections::BTreeSet<usize> = (0..n).map(|i| noise.class(i, 2, 5)).collect();
        assert_eq!(to, [0, 1, 2, 3, 4].into());
        assert!((0..n).filter(|&i| noise.class(i, 2, 5) == 2).count() > 85_000);
        // One class known: nothing to flip to.
        assert!((0..1000).all(|i| noise.class(i, 0, 1) == 0));
        assert!((0..1000).all(|i| LabelNoise { rate: 0.0, seed: 1 }.class(i, 0, 2) == 0));
    }
}
