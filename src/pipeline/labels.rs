//! Learning from labels: a labeled message (predicted, counted, then
//! learned) and a late label joined to its cached message. Each label is
//! weighed first ([`Pipeline::label_weight`]): learned in full, with less
//! weight, or held on its cache entry until another reporter confirms it.

use super::cache::{CacheEntry, Held, Packed, Taught};
use super::driver::Driver;
use super::example::Work;
use super::settings::HeldExample;
use super::trust::ANONYMOUS;
use super::{Outcome, Pipeline, same_set};
use crate::eval::drift::Watched;
use crate::message::Gold;
use crate::model::Lesson;

/// A labeled message's id, labels and their reporter.
pub(super) struct Labeled {
    pub(super) id: String,
    pub(super) gold: Gold,
    pub(super) reporter: Option<String>,
    /// Who the message is for.
    pub(super) user: Option<String>,
}

impl Pipeline {
    /// Learns a labeled example; with `keep`, hands its raw features to
    /// `driver` too.
    pub(super) fn train(
        &mut self,
        labeled: Labeled,
        text: String,
        now_ms: u64,
        (keep, driver): (bool, &mut dyn Driver),
        w: &mut Work,
    ) -> Outcome {
        let Labeled {
            id,
            gold,
            reporter,
            user,
        } = labeled;
        // Check the labels before touching the model or the metrics.
        if let Err(bad) = self.check_gold(&gold) {
            return Outcome::Bad(bad);
        }
        // The same message labeled again: a fact already known, or one
        // that replaces it (another message under the same id is new).
        if let Some(old) = self.taught_for(&id, &text) {
            return self.relabel(&id, &text, old, gold, reporter, w);
        }
        let raw = self.finish(&text, true, keep, &mut w.features);
        let (predicted, score) = self.predict_features(&w.features, &mut w.scored);
        // The gold fits the model's task (checked above).
        let fp = self
            .predictor
            .report_fingerprint(&text, Some(Self::task_of(&gold)), w.features.user);
        // What is counted is what would have been published: a reported
        // copy's label. What is learned from is the model's own scores.
        let (predicted, score) = self
            .predictor
            .recalled_named(fp, &w.scored, self.positive())
            .unwrap_or((predicted, score));
        let ids = match self.gold_ids(&gold) {
            Ok(ids) => ids,
            Err(bad) => return Outcome::Bad(bad),
        };
        let gold_names = gold.as_slice();
        let correct = same_set(&predicted, gold_names);
        self.accuracy.progressive.record(gold_names, &predicted, score);
        if let Some(s) = w.scored.stacked.filter(|_| self.accuracy.progressive.tracks_members()) {
            let served = self.predictor.positive_score(&w.scored, self.positive());
            let one = self.predictor.model.labels().name(1);
            let named = crate::model::stack::Member::ALL.map(|m| (m.name(), s.inputs.get(m)));
            self.accuracy
                .progressive
                .record_members(&named, served, one, gold_names);
        }
        if let Some(user) = w.features.user {
            self.accuracy.users.record(user, correct);
        }
        self.accuracy.drift.observe(Watched::Progressive, !correct);
        if driver.budgets_labels() && !self.review_current(&w.scored, true).ask {
            self.counters.labels_declined += 1;
            return Outcome::Learned { correct, taught: false };
        }
        let (ids, gold_vec) = self.as_seen(ids, gold.into_vec(), driver);
        let weight = self.label_weight(&w.scored, &ids, reporter.as_deref());
        self.count_weighed(weight, reporter.as_deref());
        let voted = self.note_report(fp, &ids, weight, reporter.as_deref());
        let mut entry = CacheEntry {
            text: Packed::Plain(text),
            predicted: Some(predicted),
            score,
            taught: None,
            held: None,
            at_ms: now_ms,
            user,
        };
        let taught = weight.is_some();
        if let Some(weight) = weight {
            let lesson = self.learn_features(&w.features, &ids, Some(&w.scored), weight);
            self.counters.learned += 1;
            if let Some(raw) = raw {
                let held = HeldExample {
                    raw,
                    gold: gold_vec.clone(),
                    user: w.features.user,
                };
                driver.learned(held);
            }
            entry.taught = Some(Box::new(Taught::new(gold_vec, reporter, voted, lesson)));
        } else {
            entry.held = Some(Held::new(gold_vec, reporter));
        }
        self.ledger.keep(id, entry, &self.cfg);
        Outcome::Learned { correct, taught }
    }

    /// The labels the learner sees: the gold ones, or in a single-label
    /// task the class `driver` says (`eval --feedback-noise`: sometimes
    /// another).
    fn as_seen(&mut self, ids: Vec<usize>, gold: Vec<String>, driver: &mut dyn Driver) -> (Vec<usize>, Vec<String>) {
        let [class] = ids[..] else {
            return (ids, gold);
        };
        let n = self.accuracy.progressive.total().examples;
        let seen = driver.seen_class(n, class, self.predictor.model.labels().len());
        if seen == class {
            return (ids, gold);
        }
        self.counters.labels_flipped += 1;
        (vec![seen], vec![self.predictor.model.labels().name(seen).to_string()])
    }

    /// Scores what was published for a message (`predicted`, with its
    /// positive-class `score`) against its first label `gold`: the
    /// published metrics, the user's band, the drift watch. Whether it
    /// was right.
    fn score_published(
        &mut self,
        gold: &[String],
        predicted: &[String],
        score: Option<f32>,
        user: Option<u64>,
    ) -> bool {
        self.accuracy.published.record(gold, predicted, score);
        let right = same_set(predicted, gold);
        if let Some(user) = user {
            self.accuracy.users.record(user, right);
        }
        self.accuracy.drift.observe(Watched::Published, !right);
        right
    }

    /// Joins a late label to its cached message, scores what was published
    /// for it (the first label only), and learns it as weighed: a held
    /// label waits on the entry, and a later label from another reporter
    /// that agrees with it is learned in full.
    /// The message's user (as cached), else the label's, names the
    /// personal features it learns.
    pub(super) fn feedback(
        &mut self,
        id: &str,
        gold: Gold,
        reporter: Option<String>,
        user: Option<String>,
        w: &mut Work,
    ) -> Outcome {
        if let Err(bad) = self.check_gold(&gold) {
            return Outcome::Bad(bad);
        }
        let Some(entry) = self.ledger.get(id) else {
            self.counters.feedback_unmatched += 1;
            return Outcome::FeedbackUnmatched;
        };
        w.features.user = self.predictor.user_key(entry.user.as_deref().or(user.as_deref()));
        let Some(text) = entry.text.text().map(std::borrow::Cow::into_owned) else {
            self.counters.feedback_unmatched += 1;
            return Outcome::FeedbackUnmatched;
        };
        if let Some(old) = entry.taught.clone() {
            return self.relabel(id, &text, *old, gold, reporter, w);
        }
        if entry
            .held
            .as_ref()
            .is_some_and(|h| h.repeated_by(gold.as_slice(), reporter.as_deref()))
        {
            return self.repeated();
        }
        let first = entry.held.is_none();
        let (predicted, score) = (entry.predicted.clone(), entry.score);
        let held = entry.held.clone();
        let ids = match self.gold_ids(&gold) {
            Ok(ids) => ids,
            Err(bad) => return Outcome::Bad(bad),
        };
        let gold_names = gold.into_vec();
        let published = predicted.as_ref().filter(|_| first);
        let correct = published.map(|p| self.score_published(&gold_names, p, score, w.features.user));
        self.predictor.featurize(&text, &mut w.features);
        self.finish(&text, true, false, &mut w.features);
        let mut weight = if self.cfg.trust.margin > 0.0 {
            self.predictor.model.predict(&w.features.x, &mut w.scored);
            self.label_weight(&w.scored, &ids, reporter.as_deref())
        } else {
            Some(1.0)
        };
        if weight.is_some() && held.is_some_and(|h| h.confirmed_by(&gold_names, reporter.as_deref())) {
            weight = Some(1.0);
            self.counters.labels_corroborated += 1;
        }
        self.count_weighed(weight, reporter.as_deref());
        let fp = self
            .predictor
            .report_fingerprint(&text, self.predictor.model.task(), w.features.user);
        let voted = self.note_report(fp, &ids, weight, reporter.as_deref());
        let taught = weight.is_some();
        match weight {
            Some(weight) => {
                let lesson = self.learn_features(&w.features, &ids, None, weight);
                self.ledger
                    .teach(id, Some(Box::new(Taught::new(gold_names, reporter, voted, lesson))));
            }
            None => {
                if let Some(e) = self.ledger.get_mut(id) {
                    e.held = Some(Held::new(gold_names, reporter));
                }
            }
        }
        self.counters.feedback_matched += 1;
        Outcome::FeedbackMatched {
            correct,
            correction: false,
            taught,
        }
    }
}

impl Taught {
    pub(super) fn new(labels: Vec<String>, reporter: Option<String>, voted: bool, lesson: Lesson) -> Self {
        Taught {
            labels,
            reporter: reporter.unwrap_or_else(|| ANONYMOUS.to_string()),
            voted,
            lesson: Some(lesson),
        }
    }
}

impl Held {
    /// Whether `labels` from `reporter` say again what this held label
    /// says, from the same reporter: nothing new.
    fn repeated_by(&self, labels: &[String], reporter: Option<&str>) -> bool {
        self.reporter == reporter.unwrap_or(ANONYMOUS) && same_set(&self.labels, labels)
    }

    pub(super) fn new(labels: Vec<String>, reporter: Option<String>) -> Self {
        Held {
            labels,
            reporter: reporter.unwrap_or_else(|| ANONYMOUS.to_string()),
        }
    }

    /// Whether `labels` from `reporter` confirm this held label: the same
    /// labels from someone else.
    fn confirmed_by(&self, labels: &[String], reporter: Option<&str>) -> bool {
        self.reporter != reporter.unwrap_or(ANONYMOUS) && same_set(&self.labels, labels)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::pipeline;
    use super::super::{Outcome, PipelineConfig, TrustConfig};

    fn id0() -> String {
        "line-0".into()
    }

    /// One reporter flipping every label loses its trust and its labels are
    /// held; a held label another reporter confirms is learned in full; a
    /// trusted reporter's labels are never weighed; all of it survives a
    /// checkpoint.
    #[test]
    fn a_flooder_is_held_and_a_confirmed_label_is_learned() {
        let trust = TrustConfig {
            trusted: vec!["reviewer".into()],
            ..TrustConfig::default()
        };
        let mut p = pipeline(PipelineConfig {
            trust,
            ..PipelineConfig::default()
        });
        for i in 0..300 {
            let (text, label, flipped) = match i % 2 {
                0 => ("win cash prize now", "spam", "ham"),
                _ => ("lunch at noon tomorrow?", "ham", "spam"),
            };
            let id = format!("m-{i}");
            p.handle(format!(r#"{{"id": "{id}", "text": "{text}"}}"#).as_bytes(), &id0, 0);
            let (label, reporter) = if i % 10 == 3 {
                (flipped, "flooder")
            } else {
                (label, "honest")
            };
            let feedback = format!(r#"{{"id": "{id}", "label": "{label}", "reporter": "{reporter}"}}"#);
            p.handle(feedback.as_bytes(), &id0, 0);
        }
        let flooder = p.reporters().get("flooder").unwrap();
        assert_eq!(flooder.labels, 30);
        assert!(flooder.held >= 20, "{flooder:?}");
        assert_eq!(p.reporters().least_trusted(1)[0].0, "flooder");
        assert_eq!(p.counters().labels_held, flooder.held);
        assert_eq!(p.reporters().get("honest").unwrap().trust(), 1.0);

        // A held label, then the same from another reporter: learned in full.
        p.handle(br#"{"id": "x", "text": "win cash prize now"}"#, &id0, 0);
        let version = p.model().version();
        let out = p.handle(br#"{"id": "x", "label": "ham", "reporter": "flooder"}"#, &id0, 0);
        assert!(matches!(out, Outcome::FeedbackMatched { taught: false, .. }), "{out:?}");
        assert_eq!(p.model().version(), version);
        assert!(p.cache().get("x").unwrap().held.is_some());
        let version = p.model().version();
        let (back, _) =
            crate::checkpoint::restore(crate::checkpoint::capture(&p, &Default::default()), p.config().clone())
                .unwrap();
        assert_eq!(back.reporters(), p.reporters());
        assert_eq!(back.cache(), p.cache());
        assert_eq!(back.counters(), p.counters());
        let out = p.handle(br#"{"id": "x", "label": "ham", "reporter": "reviewer"}"#, &id0, 0);
        let matched = |correction, taught| Outcome::FeedbackMatched {
            correct: None,
            correction,
            taught,
        };
        assert_eq!(out, matched(false, true));
        assert_eq!(p.counters().labels_corroborated, 1);
        assert_eq!(p.model().version(), version + 1);
        assert!(p.cache().get("x").unwrap().held.is_none());
        // A labeled message whose label is held is counted, not learned.
        let version = p.model().version();
        let out = p.handle(
            br#"{"id": "y", "text": "win cash prize now", "label": "ham", "reporter": "flooder"}"#,
            &id0,
            0,
        );
        assert_eq!(
            out,
            Outcome::Learned {
                correct: false,
                taught: false
            }
        );
        assert_eq!(p.model().version(), version);
        let out = p.handle(
            br#"{"id": "z", "text": "win cash prize now", "label": "spam", "reporter": "honest"}"#,
            &id0,
            0,
        );
        assert_eq!(
            out,
            Outcome::Learned {
                correct: true,
                taught: true
            }
        );
        // The trusted reviewer is never tracked, however it labels.
        assert!(p.reporters().get("reviewer").is_none());
    }
}
