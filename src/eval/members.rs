//! Each member of a binary model's stack ranked alone: over the labeled
//! messages the stack served from its members, every member's log-odds
//! (turned toward the positive class) and the stack's own margin, so that
//! `eval` can report how each ranks by itself beside the whole
//! (`progressive.members`, ../shared/DESIGN.md) and what the stack loses
//! against its best member (the regret).
//!
//! Kept by `eval` only (the daemon does not pay for it), at most
//! [`super::ROC_CAP`] messages: past it the figures are those of the
//! first messages.

use std::collections::BTreeMap;

use serde::Serialize;

use super::ranking::ranking;
use super::roc_auc;

/// The members' and the stack's (score, is positive) pairs.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Members {
    /// The members' names, in the order of their scores (the first
    /// message's).
    names: Vec<&'static str>,
    /// Each message's members' scores, `names.len()` a message.
    pairs: Vec<f32>,
    stack: Vec<(f32, bool)>,
    /// Whether each member ever said anything but 0 (a model without a
    /// byte LR, a stream without users: not reported).
    spoke: Vec<bool>,
}

/// How one member (or the stack) ranks the stream alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct MemberReport {
    pub one_minus_roca_percent: Option<f64>,
    /// Percent of the positives at or under the score that lets 0.1 % of
    /// the negatives through.
    pub missed_at_0_1_percent_fp: Option<f64>,
    /// Messages on the wrong side of 0.
    pub errors: u64,
    pub examples: u64,
}

impl Members {
    /// Counts one message: its members' log-odds of class 1, by name
    /// (the same members every message), the stack's margin of the
    /// positive class `served`, whether class 1 is the positive class
    /// (`one_positive`) and whether the message is.
    pub(crate) fn record(&mut self, named: &[(&'static str, f32)], served: f32, one_positive: bool, positive: bool) {
        if self.stack.len() >= super::ROC_CAP || !served.is_finite() {
            return;
        }
        if self.names.is_empty() {
            self.names = named.iter().map(|&(name, _)| name).collect();
            self.spoke = vec![false; named.len()];
        }
        if named.len() != self.names.len() {
            return;
        }
        let sign = if one_positive { 1.0 } else { -1.0 };
        for (spoke, &(_, z)) in self.spoke.iter_mut().zip(named) {
            *spoke |= z != 0.0;
            self.pairs.push(sign * z);
        }
        self.stack.push((served, positive));
    }

    /// Each member that spoke, by name, and the stack itself under
    /// `"stack"`; none before a message was counted.
    pub(crate) fn report(&self) -> Option<BTreeMap<&'static str, MemberReport>> {
        if self.stack.is_empty() {
            return None;
        }
        let mut out = BTreeMap::new();
        let width = self.names.len();
        for (m, name) in self.names.iter().enumerate().filter(|&(m, _)| self.spoke[m]) {
            let pairs: Vec<(f32, bool)> = (self.pairs.chunks_exact(width).zip(&self.stack))
                .map(|(z, &(_, p))| (z[m], p))
                .collect();
            out.insert(*name, alone(&pairs));
        }
        out.insert("stack", alone(&self.stack));
        Some(out)
    }
}

/// The stack's 1-ROCA over its best member's alone (over 1: the whole
/// ranks worse than a part), from a [`Members::report`].
pub(crate) fn regret(report: &BTreeMap<&'static str, MemberReport>) -> Option<f64> {
    let stack = report.get("stack")?.one_minus_roca_percent?;
    let best = (report.iter())
        .filter(|(name, _)| **name != "stack")
        .filter_map(|(_, r)| r.one_minus_roca_percent)
        .fold(f64::INFINITY, f64::min);
    (best.is_finite() && best > 0.0).then(|| stack / best)
}

fn alone(pairs: &[(f32, bool)]) -> MemberReport {
    MemberReport {
        one_minus_roca_percent: roc_auc(pairs).map(|a| (1.0 - a) * 100.0),
        missed_at_0_1_percent_fp: ranking(pairs).map(|r| r.missed_at_0_1_percent_fp),
        errors: pairs.iter().filter(|&&(s, p)| (s > 0.0) != p).count() as u64,
        examples: pairs.len() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_member_is_ranked_alone_and_the_regret_compares_the_stack_with_the_best() {
        let mut m = Members::default();
        assert!(m.report().is_none());
        // Class 1 is ham: the members' log-odds turn toward spam. The
        // linear member ranks perfectly, the byte LR backwards, the
        // personal member never speaks; the stack errs once.
        for i in 0..20 {
            let spam = i % 2 == 0;
            let z = if spam { -2.0 } else { 2.0 };
            let served = if i == 4 {
                -1.0
            } else if spam {
                1.0
            } else {
                -1.0
            };
            let named = [("linear", z), ("personal", 0.0), ("naive_bayes", 0.5), ("byte_lr", -z)];
            m.record(&named, served, false, spam);
        }
        let r = m.report().unwrap();
        assert_eq!(
            r.keys().copied().collect::<Vec<_>>(),
            ["byte_lr", "linear", "naive_bayes", "stack"]
        );
        assert_eq!(r["linear"].one_minus_roca_percent, Some(0.0));
        assert_eq!(r["linear"].errors, 0);
        assert_eq!(r["byte_lr"].one_minus_roca_percent, Some(100.0));
        assert_eq!(r["byte_lr"].errors, 20);
        assert_eq!(r["stack"].errors, 1);
        assert_eq!(r["stack"].examples, 20);
        // The best member ranks perfectly: no ratio.
        assert_eq!(regret(&r), None);
        let mut r = r;
        r.get_mut("linear").unwrap().one_minus_roca_percent = Some(5.0);
        let stack = r["stack"].one_minus_roca_percent.unwrap();
        assert!((regret(&r).unwrap() - stack / 5.0).abs() < 1e-12);
    }
}
