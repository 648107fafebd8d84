//! A prediction of an unlabeled message, and with `--explain N` the N
//! features that pushed it to its label most: readable n-grams with their
//! contributions (the feature's value times its weight for the label; for
//! naive Bayes, times its log-likelihood ratio against the best other
//! class). Names come from the message's own text (the same names the
//! model's sketch keeps for `inspect`), so an explanation lists only what
//! the message contains, and costs nothing when N is 0.

use super::example::Work;
use super::predictor::{Positive, Predictor};
use super::{Contribution, Prediction};
use crate::features::SparseVec;
use crate::model::{Model, Task};

impl Predictor {
    /// Predicts `text`, whose raw features `w` holds, without learning or
    /// caching, with `explain` features named; returns the prediction and
    /// the `positive` class's score (`w` holds the finished features and
    /// the scores).
    pub(super) fn prediction(
        &mut self,
        id: String,
        text: &str,
        w: &mut Work,
        explain: usize,
        positive: Positive<'_>,
    ) -> (Prediction, Option<f32>) {
        self.finish(text, false, &mut w.features);
        let (labels, score) = self.predict_recalled(text, &w.features, &mut w.scored, positive);
        let names = self.model.labels();
        let named = |values: &[f32]| -> Vec<(String, f32)> {
            values
                .iter()
                .enumerate()
                .map(|(c, &s)| (names.name(c).to_string(), s))
                .collect()
        };
        let mut margins = Vec::new();
        self.model.margins(&w.scored, &mut margins);
        let (scores, margins) = (named(&w.scored.scores), named(&margins));
        let (explanation, members) = match (explain, w.scored.labels.first()) {
            (0, _) | (_, None) => (None, None),
            (n, Some(&class)) => {
                let members = self.model.member_shares(&w.scored, class).map(|shares| {
                    let named = shares.into_iter().map(|(m, s)| (m.to_string(), s));
                    named.collect()
                });
                (
                    Some(self.explanation(text, &w.features.x, w.features.user, class, n)),
                    members,
                )
            }
        };
        let prediction = Prediction {
            id,
            labels,
            scores,
            margins,
            multilabel: self.model.task() == Some(Task::MultiLabel),
            model_version: self.model.version(),
            explanation,
            members,
            uncertain: false,
            review: None,
            user: None,
        };
        (prediction, score)
    }

    /// The `n` features of `x` (finished) that add most to `class`'s
    /// score, named from `text`; a personal copy of a word for the user of
    /// key `user` is named as the word, marked `(personal)`: which part
    /// decided, the shared or the user's own. Each contribution is
    /// weighed by its member's weight in the stack (the shared words by
    /// the linear member's, a copy by the personal member's), so copies
    /// the stack gives little weight do not lead.
    fn explanation(
        &mut self,
        text: &str,
        x: &SparseVec,
        user: Option<u64>,
        class: usize,
        n: usize,
    ) -> Vec<Contribution> {
        use crate::model::stack::Member;
        let weight = |m: Member| self.model.stack().map_or(1.0, |s| s.weight(m));
        let (shared, copies) = (weight(Member::LINEAR), weight(Member::PERSONAL));
        let copies_from = if x.personal > 0 { x.personal as usize } else { x.len() };
        let values: Vec<(u32, f32)> = x
            .iter()
            .enumerate()
            .map(|(i, (b, v))| (b, v * if i >= copies_from { copies } else { shared }))
            .collect();
        let mut scratch = SparseVec::default();
        let names = self.prep.featurizer.featurize_raw_named(text, &mut scratch);
        let cfg = self.model.features();
        let bias = crate::features::bias_bucket(cfg);
        let personal: Vec<(u32, String)> = match user {
            Some(u) => names
                .iter()
                .filter(|&(b, _)| crate::features::crossed(cfg, b, bias))
                .map(|(b, name)| {
                    (
                        crate::features::personal_bucket(cfg, b, u),
                        format!("{name} (personal)"),
                    )
                })
                .collect(),
            None => Vec::new(),
        };
        let all = names.iter().chain(personal.iter().map(|(b, s)| (*b, s.as_str())));
        top_contributions(&self.model, &values, all, class, n)
    }
}

/// The `n` largest positive contributions to `class` of the features in
/// `values`, each bucket named by its first name in `names`: the buckets
/// are chosen first, then only theirs are looked up among the names.
fn top_contributions<'a>(
    model: &Model,
    values: &[(u32, f32)],
    names: impl Iterator<Item = (u32, &'a str)>,
    class: usize,
    n: usize,
) -> Vec<Contribution> {
    let mut best: Vec<(f32, u32)> = values
        .iter()
        .map(|&(b, v)| (v * model.feature_weight(b, class), b))
        .filter(|&(c, _)| c > 0.0)
        .collect();
    best.sort_by(|a, b| b.0.total_cmp(&a.0));
    // The bias has no name: its place goes to the next feature.
    let mut named: Vec<(f32, u32, Option<&str>)> = best.into_iter().take(n + 1).map(|(c, b)| (c, b, None)).collect();
    for (b, name) in names {
        if let Some(slot) = named.iter_mut().find(|s| s.1 == b && s.2.is_none()) {
            slot.2 = Some(name);
        }
    }
    named
        .into_iter()
        .filter_map(|(contribution, _, name)| {
            name.map(|name| Contribution {
                feature: name.to_string(),
                contribution,
            })
        })
        .take(n)
        .collect()
}
