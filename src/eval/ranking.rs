//! How a binary stream's scores rank, at the operating points a spam
//! filter is run at (the TREC spam track's measures): the positives missed
//! at 0.1 % and 0.01 % negative false positives, lam %, and the costliest
//! mistakes with their rank cost (how many examples of the other class
//! each one outranks). Computed from the progressive (score, positive)
//! pairs, scores being the unrounded margins of the positive class.

use serde::Serialize;

/// Costliest mistakes reported.
pub(crate) const COSTLIEST: usize = 10;

/// The ranking figures of a binary stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ranking {
    /// Percent of the positives scored at or under the threshold that
    /// lets 0.1 % of the negatives through (TREC's h=.1%).
    pub missed_at_0_1_percent_fp: f64,
    /// The same at 0.01 % of the negatives.
    pub missed_at_0_01_percent_fp: f64,
    /// Logistic average misclassification at the model's own threshold
    /// (margin 0), in percent: the inverse logit of the mean of the logits
    /// of the two error rates, each smoothed as (errors + 0.5) / (n + 1)
    /// so that a class without errors still counts.
    pub lam_percent: f64,
    /// The costliest mistakes, costliest first.
    pub costliest: Vec<Mistake>,
    /// Share of all misranked pairs that the costliest mistakes make.
    pub costliest_share: f64,
}

/// One misjudged example and what it costs the ranking.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mistake {
    /// Its place among the scored examples, from 1.
    pub example: usize,
    pub positive: bool,
    pub margin: f32,
    /// Examples of the other class it is ranked wrongly against (ties half).
    pub rank_cost: f64,
}

/// The figures of `pairs` (score, is positive), `None` unless both classes occur.
pub(crate) fn ranking(pairs: &[(f32, bool)]) -> Option<Ranking> {
    let mut pos: Vec<f32> = pairs.iter().filter(|p| p.1).map(|p| p.0).collect();
    let mut neg: Vec<f32> = pairs.iter().filter(|p| !p.1).map(|p| p.0).collect();
    if pos.is_empty() || neg.is_empty() {
        return None;
    }
    pos.sort_by(f32::total_cmp);
    neg.sort_by(f32::total_cmp);
    let missed_at = |fp: f64| {
        let i = ((neg.len() as f64 * (1.0 - fp)) as usize).min(neg.len() - 1);
        let threshold = neg[i];
        100.0 * pos.partition_point(|&s| s <= threshold) as f64 / pos.len() as f64
    };
    let cost = |s: f32, positive: bool| {
        let (other, lo, hi) = if positive {
            (&neg, neg.partition_point(|&x| x < s), neg.partition_point(|&x| x <= s))
        } else {
            (&pos, pos.partition_point(|&x| x < s), pos.partition_point(|&x| x <= s))
        };
        let ties = (hi - lo) as f64 / 2.0;
        if positive {
            (other.len() - hi) as f64 + ties
        } else {
            lo as f64 + ties
        }
    };
    let mut mistakes: Vec<Mistake> = pairs
        .iter()
        .enumerate()
        .filter(|&(_, &(s, p))| (s > 0.0) != p)
        .map(|(i, &(margin, positive))| Mistake {
            example: i + 1,
            positive,
            margin,
            rank_cost: cost(margin, positive),
        })
        .collect();
    mistakes.sort_by(|a, b| b.rank_cost.total_cmp(&a.rank_cost));
    mistakes.truncate(COSTLIEST);
    // Every misranked pair, counted once from its negative side.
    let misranked: f64 = neg.iter().map(|&s| cost(s, false)).sum();
    let costly: f64 = mistakes.iter().map(|m| m.rank_cost).sum();
    Some(Ranking {
        missed_at_0_1_percent_fp: missed_at(0.001),
        missed_at_0_01_percent_fp: missed_at(0.0001),
        lam_percent: lam(&pos, &neg),
        costliest: mistakes,
        costliest_share: if misranked > 0.0 {
            costly / (2.0 * misranked)
        } else {
            0.0
        },
    })
}

/// lam % at margin 0 of sorted positive and negative scores.
fn lam(pos: &[f32], neg: &[f32]) -> f64 {
    let missed = pos.partition_point(|&s| s <= 0.0) as f64;
    let passed = (neg.len() - neg.partition_point(|&s| s <= 0.0)) as f64;
    let rate = |e: f64, n: usize| (e + 0.5) / (n as f64 + 1.0);
    let logit = |p: f64| (p / (1.0 - p)).ln();
    let l = (logit(rate(missed, pos.len())) + logit(rate(passed, neg.len()))) / 2.0;
    100.0 / (1.0 + (-l).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mistake_costs_the_examples_of_the_other_class_it_outranks() {
        // 1,000 negatives at -1 .. -1000 and 100 positives at 1 .. 100;
        // one negative at 50.5 outranks 51 positives (1 .. 50 and the
        // positive at -500.5), which 501 negatives outrank (-1 .. -500 and
        // the one at 50.5).
        let mut pairs: Vec<(f32, bool)> = (1..=1000).map(|i| (-(i as f32), false)).collect();
        pairs.extend((1..=100).map(|i| (i as f32, true)));
        pairs.push((50.5, false));
        pairs.push((-500.5, true));
        let r = ranking(&pairs).unwrap();
        assert_eq!(r.costliest.len(), 2);
        assert_eq!((r.costliest[0].example, r.costliest[0].rank_cost), (1102, 501.0));
        assert_eq!((r.costliest[1].example, r.costliest[1].rank_cost), (1101, 51.0));
        assert!(!r.costliest[1].positive && r.costliest[1].margin == 50.5);
        // The 0.1 % threshold (the 1,000th of 1,001 negatives, -1) lets
        // through only the positive at -500.5.
        assert!((r.missed_at_0_1_percent_fp - 100.0 / 101.0).abs() < 1e-9);
        // 551 misranked pairs, each counted from both sides: 1,102; the
        // two mistakes make 552 of them.
        assert!(
            (r.costliest_share - 552.0 / 1102.0).abs() < 1e-9,
            "{}",
            r.costliest_share
        );
        // One error of each class: lam is about the two rates' mean here.
        assert!(r.lam_percent > 0.1 && r.lam_percent < 1.5, "{}", r.lam_percent);
        assert_eq!(ranking(&[(1.0, true)]), None);
    }

    #[test]
    fn a_perfect_ranking_misses_nothing_and_costs_nothing() {
        let pairs: Vec<(f32, bool)> = (0..2000).map(|i| (i as f32 - 999.5, i >= 1000)).collect();
        let r = ranking(&pairs).unwrap();
        assert_eq!((r.missed_at_0_1_percent_fp, r.missed_at_0_01_percent_fp), (0.0, 0.0));
        assert!(r.costliest.is_empty() && r.costliest_share == 0.0);
        assert!(r.lam_percent < 0.1);
    }
}
