//! What the model says about single features: the weight one unit of a
//! feature adds to a class's score (for explanations and `inspect`), and
//! each class's strongest features.

use super::stack::Member;
use super::{Model, State};

impl Model {
    /// What one unit of feature `bucket` adds to `class`'s score: its
    /// (averaged) weight; for naive Bayes, the log-ratio of the class's
    /// smoothed rate to the best other class's (0 for a bucket never seen).
    pub fn feature_weight(&self, bucket: u32, class: usize) -> f32 {
        match &self.state {
            State::Linear(w) => {
                let fused = self.fusion.as_ref().map_or(0.0, |f| f.feature_weight(bucket, class));
                w.get_averaged(bucket, class) + fused
            }
            State::NaiveBayes(nb) => {
                let k = self.labels.len();
                let row = &nb.counts[bucket as usize * k..bucket as usize * k + k];
                if row.iter().all(|&c| c == 0.0) {
                    return 0.0;
                }
                let a = self.hyper.nb_alpha;
                let rate = |c: usize| ((row[c] + a) as f64 / (nb.class_mass[c] + 1.0)).ln();
                let other = (0..k)
                    .filter(|&c| c != class)
                    .map(rate)
                    .fold(f64::NEG_INFINITY, f64::max);
                let own = rate(class);
                (if other.is_finite() { own - other } else { own }) as f32
            }
        }
    }

    /// Of a binary model with a stack, for its prediction `scored`: each
    /// member's share of the margin toward `class` (its weight times its
    /// bounded log-odds, turned toward the class) and the bias's
    /// (`"bias"`), largest first; members that add nothing are left out.
    pub fn member_shares(&self, scored: &super::Scored, class: usize) -> Option<Vec<(&'static str, f32)>> {
        let (stack, stacked) = (self.stack.as_ref()?, scored.stacked?);
        let toward = if class == 1 { 1.0 } else { -1.0 };
        let members = Member::ALL.iter().zip(stack.shares(&stacked.inputs));
        let mut shares: Vec<(&'static str, f32)> = members
            .filter(|&(_, s)| s != 0.0)
            .map(|(m, s)| (m.name(), toward * s))
            .chain([("bias", toward * stack.bias())])
            .collect();
        shares.sort_by(|a, b| b.1.total_cmp(&a.1));
        Some(shares)
    }

    /// The strongest features of class `class`: (bucket, weight), strongest first.
    pub fn top_features(&self, class: usize, n: usize) -> Vec<(u32, f32)> {
        let buckets = self.features.buckets() as u32;
        let mut all: Vec<(u32, f32)> = (0..buckets).map(|b| (b, self.feature_weight(b, class))).collect();
        all.retain(|&(_, w)| w != 0.0);
        all.sort_by(|a, b| b.1.total_cmp(&a.1));
        all.truncate(n);
        all
    }
}
