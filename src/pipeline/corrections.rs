//! A label is a fact about its message, not an event (docs/feedback.md):
//! the same label again changes nothing; another label replaces the first
//! (what the first taught is taken back, then the new one is learned); a
//! forget takes the message's label back and drops its record. The record
//! is the late-label cache's entry of the message ([`super::cache::Taught`]):
//! its text, the label, who gave it, its vote, and the step it took.
//!
//! Who may override whom: a trusted reporter (`--trusted-reporter`)
//! replaces or forgets any label; nobody else replaces or forgets a
//! trusted reporter's label (theirs is held on the message, as a label of
//! an untrusted reporter is held); a reporter whose labels are held
//! ([`super::weighing::HOLD_BELOW`]) replaces nothing; anyone else, the
//! anonymous reporter among them, replaces an untrusted label.

use super::cache::{Held, Taught};
use super::example::Work;
use super::reported::Print;
use super::trust::ANONYMOUS;
use super::{Outcome, Pipeline, same_set};
use crate::message::Gold;

impl Pipeline {
    /// The label learned for the message cached under `id`, when `text`
    /// is that message's (a redelivery, not another message under the id).
    pub(super) fn taught_for(&self, id: &str, text: &str) -> Option<Taught> {
        let entry = self.ledger.get(id)?;
        let taught = entry.taught.as_ref()?;
        (entry.text.text().as_deref() == Some(text)).then(|| (**taught).clone())
    }

    /// A label that says again what is known of its message: not learned.
    pub(super) fn repeated(&mut self) -> Outcome {
        self.counters.labels_repeated += 1;
        Outcome::Repeated
    }

    /// A label `gold` for message `id` (of `text`), which was learned as
    /// `old`: nothing when it says the same; else, when its reporter may,
    /// a replacement: what `old` taught is taken back, then `gold` is
    /// learned as weighed like any label (weighed before the old one is
    /// taken back, so that a label held leaves the model as it was).
    pub(super) fn relabel(
        &mut self,
        id: &str,
        text: &str,
        old: Taught,
        gold: Gold,
        reporter: Option<String>,
        w: &mut Work,
    ) -> Outcome {
        if same_set(&old.labels, gold.as_slice()) {
            return self.repeated();
        }
        let name = reporter.as_deref().unwrap_or(ANONYMOUS);
        if !self.ledger.may_override(&self.cfg.trust, &old.reporter, name) {
            return self.hold_relabel(id, gold, reporter);
        }
        let ids = match self.gold_ids(&gold) {
            Ok(ids) => ids,
            Err(bad) => return Outcome::Bad(bad),
        };
        self.finish_unseen(text, &mut w.features);
        let weight = if self.cfg.trust.margin > 0.0 {
            self.predictor.model.predict(&w.features.x, &mut w.scored);
            self.label_weight(&w.scored, &ids, reporter.as_deref())
        } else {
            Some(1.0)
        };
        let Some(weight) = weight else {
            self.recount(&w.features);
            return self.hold_relabel(id, gold, reporter);
        };
        let fp = self
            .predictor
            .report_fingerprint(text, self.predictor.model.task(), w.features.user);
        self.take_back(&old, fp, name, w);
        self.count_weighed(Some(weight), reporter.as_deref());
        let voted = self.note_report(fp, &ids, Some(weight), reporter.as_deref());
        let lesson = self.learn_features(&w.features, &ids, None, weight);
        self.ledger.teach(
            id,
            Some(Box::new(Taught::new(gold.into_vec(), reporter, voted, lesson))),
        );
        self.counters.feedback_matched += 1;
        self.counters.feedback_corrections += 1;
        self.counters.labels_replaced += 1;
        Outcome::FeedbackMatched {
            correct: None,
            correction: true,
            taught: true,
        }
    }

    /// A relabel its reporter may not make alone: held on the message
    /// (the learned label stays) until a reporter who may confirms it.
    fn hold_relabel(&mut self, id: &str, gold: Gold, reporter: Option<String>) -> Outcome {
        self.count_weighed(None, reporter.as_deref());
        if let Some(e) = self.ledger.get_mut(id) {
            e.held = Some(Held::new(gold.into_vec(), reporter));
        }
        self.counters.feedback_matched += 1;
        Outcome::FeedbackMatched {
            correct: None,
            correction: true,
            taught: false,
        }
    }

    /// Takes back what `old` taught for the message whose features `w`
    /// holds as [`Pipeline::finish_unseen`] finished them (fingerprint
    /// `fp`), on behalf of reporter `by`: its step, its vote, and a mark
    /// on its reporter's record when someone else overrode it.
    fn take_back(&mut self, old: &Taught, fp: Option<Print>, by: &str, w: &Work) {
        // Labels are never removed, so a learned label still has its class.
        let ids: Vec<usize> = old
            .labels
            .iter()
            .filter_map(|l| self.predictor.model.labels().get(l))
            .collect();
        match &old.lesson {
            Some(lesson) => self.unlearn_features(&w.features, &ids, lesson),
            None => self.counters.labels_unrecorded += 1,
        }
        if let (true, Some(fp), [class]) = (old.voted, fp, &ids[..]) {
            self.unvote(fp, *class);
        }
        if old.reporter != by {
            self.ledger.count_overridden(&old.reporter);
        }
    }

    /// `{"id": X, "forget": true}`: takes back what message X's label
    /// taught (when its reporter may); the record keeps the message,
    /// unlabeled, so that a label for it later (an undo, then another
    /// decision) is learned. An id not in the record is counted; a message
    /// never labeled has nothing to forget (`found: false`, nothing
    /// counted).
    pub(super) fn forget(&mut self, id: &str, reporter: Option<String>, w: &mut Work) -> Outcome {
        self.forget_as(id, reporter.as_deref().unwrap_or(ANONYMOUS), false, w)
    }

    /// `{"forget_reporter": R}`: takes back every label of R's the record
    /// still holds, learned or held, the newest first (each as a forget of
    /// its message: the record keeps the messages, unlabeled). An
    /// operator's act: R's own standing, or a trusted R, does not stand in
    /// the way. `found` when it took anything back.
    pub(super) fn forget_reporter(&mut self, of: &str, by: Option<&str>, w: &mut Work) -> Outcome {
        let ids = self.ledger.ids_of(of);
        let mut taken = 0usize;
        for id in ids.iter().rev() {
            let learned_by_of = (self.ledger.get(id))
                .and_then(|e| e.taught.as_ref())
                .is_some_and(|t| t.reporter == of);
            if learned_by_of {
                taken += usize::from(self.forget_as(id, of, true, w) == (Outcome::Forgotten { found: true }));
            } else if let Some(e) = self.ledger.get_mut(id) {
                // Only a label of R's held on a message someone else taught.
                e.held = None;
                self.counters.labels_forgotten += 1;
                taken += 1;
            }
        }
        tracing::info!(
            reporter = ?of,
            by = ?by.unwrap_or(ANONYMOUS),
            labels = taken,
            "forgot a reporter's labels"
        );
        Outcome::Forgotten { found: taken > 0 }
    }

    /// Forgets message `id`'s label on behalf of `by`; `operator`: whoever
    /// gave it (a reporter's labels taken back together).
    fn forget_as(&mut self, id: &str, by: &str, operator: bool, w: &mut Work) -> Outcome {
        let Some((taught, text, user)) = self.ledger.get(id).map(|e| {
            (
                e.taught.clone(),
                e.text.text().map(std::borrow::Cow::into_owned),
                e.user.clone(),
            )
        }) else {
            self.counters.forgets_unmatched += 1;
            return Outcome::Forgotten { found: false };
        };
        w.features.user = self.predictor.user_key(user.as_deref());
        let Some(old) = taught else {
            if self.ledger.get(id).is_some_and(|e| e.held.is_none()) {
                return Outcome::Forgotten { found: false };
            }
            // A label held, never learned: the record drops it.
            self.ledger.forgotten(id);
            self.counters.labels_forgotten += 1;
            return Outcome::Forgotten { found: true };
        };
        if !operator && !self.ledger.may_override(&self.cfg.trust, &old.reporter, by) {
            self.counters.forgets_refused += 1;
            return Outcome::Forgotten { found: true };
        }
        if let Some(text) = text {
            self.finish_unseen(&text, &mut w.features);
            let fp = self
                .predictor
                .report_fingerprint(&text, self.predictor.model.task(), w.features.user);
            self.take_back(&old, fp, by, w);
        }
        self.ledger.forgotten(id);
        self.counters.labels_forgotten += 1;
        Outcome::Forgotten { found: true }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::pipeline;
    use super::super::{Outcome, Pipeline, PipelineConfig, TrustConfig};
    use crate::checkpoint::{capture, model_digest, restore};
    use crate::features::FeatureConfig;
    use crate::model::{Hyper, Learner, Model, State};

    const TEXTS: [(&str, &str); 6] = [
        ("win cash prize now, call to claim", "spam"),
        ("lunch at noon tomorrow?", "ham"),
        ("free entry in a weekly competition", "spam"),
        ("see you at the station at six", "ham"),
        ("urgent: your mobile has won a prize", "spam"),
        ("can you pick up some milk on the way", "ham"),
    ];

    fn id0() -> String {
        "line-0".into()
    }

    fn send(p: &mut Pipeline, line: serde_json::Value) -> Outcome {
        p.handle(line.to_string().as_bytes(), &id0, 0)
    }

    /// Every text unlabeled under id m-i, then its label from `r1`.
    fn learned(mut p: Pipeline) -> Pipeline {
        for (i, (text, label)) in TEXTS.iter().enumerate() {
            send(&mut p, serde_json::json!({"id": format!("m-{i}"), "text": text}));
            send(
                &mut p,
                serde_json::json!({"id": format!("m-{i}"), "label": label, "reporter": "r1"}),
            );
        }
        p
    }

    /// A naive Bayes pipeline over 2^12 buckets.
    fn naive_bayes() -> Pipeline {
        let features = FeatureConfig {
            bits: 12,
            ..FeatureConfig::default()
        };
        Pipeline::new(
            Model::new(Hyper::defaults(Learner::NaiveBayes), features),
            PipelineConfig::default(),
        )
    }

    /// Naive Bayes counts equal but for the rounding of a sum less a
    /// term (`(c + v) - v` is `c` within an ulp).
    fn same_counts(a: &Model, b: &Model) {
        let (State::NaiveBayes(a), State::NaiveBayes(b)) = (a.state(), b.state()) else {
            panic!("not naive Bayes");
        };
        assert_eq!(
            (a.docs, &a.class_docs, a.vocabulary),
            (b.docs, &b.class_docs, b.vocabulary)
        );
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-5 * (1.0 + x.abs());
        assert!(close(a.mass, b.mass), "{} {}", a.mass, b.mass);
        assert!(a.class_mass.iter().zip(&b.class_mass).all(|(&x, &y)| close(x, y)));
        let off = a
            .counts
            .iter()
            .zip(&b.counts)
            .filter(|&(&x, &y)| !close(x as f64, y as f64))
            .count();
        assert_eq!((a.counts.len(), off), (b.counts.len(), 0));
    }

    fn score(p: &Pipeline, text: &str, label: &str) -> f32 {
        let mut p = Pipeline::new(p.model().clone(), p.config().clone());
        let line = serde_json::json!({"id": "probe", "text": text}).to_string();
        let prediction = p.predictor_mut().predict_only(line.as_bytes(), &id0).unwrap();
        prediction
            .margins
            .iter()
            .find(|(l, _)| l == label)
            .map_or(f32::NAN, |m| m.1)
    }

    /// A label delivered again, as a labeled message or as feedback, is
    /// no update: the same model, version and reporter record; counted.
    #[test]
    fn the_same_label_again_changes_nothing() {
        let mut p = learned(pipeline(PipelineConfig::default()));
        let (digest, version) = (model_digest(p.model()), p.model().version());
        let labels = p.reporters().get("r1").unwrap().labels;
        let again = serde_json::json!({"id": "m-2", "label": "spam", "reporter": "r1"});
        assert_eq!(send(&mut p, again), Outcome::Repeated);
        send(
            &mut p,
            serde_json::json!({"id": "x", "text": TEXTS[0].0, "label": "spam"}),
        );
        let version = (version + 1, model_digest(p.model()));
        assert_eq!(
            send(
                &mut p,
                serde_json::json!({"id": "x", "text": TEXTS[0].0, "label": "spam"})
            ),
            Outcome::Repeated
        );
        assert_eq!((p.model().version(), model_digest(p.model())), version);
        assert_ne!(digest, version.1);
        assert_eq!(p.reporters().get("r1").unwrap().labels, labels);
        assert_eq!(p.counters().labels_repeated, 2);
        // Another message under a known id is a new message, learned.
        send(
            &mut p,
            serde_json::json!({"id": "x", "text": "other words", "label": "spam"}),
        );
        assert_eq!(p.model().version(), version.0 + 1);
        // A request sent again keeps its message's learned label; another
        // text under the id starts a new record.
        send(&mut p, serde_json::json!({"id": "m-1", "text": TEXTS[1].0}));
        let again = serde_json::json!({"id": "m-1", "label": "ham", "reporter": "r1"});
        assert_eq!(send(&mut p, again.clone()), Outcome::Repeated);
        send(&mut p, serde_json::json!({"id": "m-1", "text": "a new text"}));
        assert!(matches!(
            send(&mut p, again),
            Outcome::FeedbackMatched {
                correct: Some(_),
                correction: false,
                taught: true
            }
        ));
    }

    /// Naive Bayes: a label replaced right after it was learned leaves
    /// exactly the counts of the new label alone; forgetting it leaves
    /// those of the message never labeled. Both survive a checkpoint.
    #[test]
    fn naive_bayes_counts_are_taken_back_exactly() {
        let mut relabeled = learned(naive_bayes());
        let mut direct = learned(naive_bayes());
        let mut never = learned(naive_bayes());
        for p in [&mut relabeled, &mut direct, &mut never] {
            send(
                p,
                serde_json::json!({"id": "q", "text": "call now to claim your free milk"}),
            );
        }
        send(&mut relabeled, serde_json::json!({"id": "q", "label": "spam"}));
        let back = restore(capture(&relabeled, &Default::default()), relabeled.config().clone())
            .unwrap()
            .0;
        assert_eq!(back.cache(), relabeled.cache());
        relabeled = back;
        let out = send(&mut relabeled, serde_json::json!({"id": "q", "label": "ham"}));
        assert_eq!(
            out,
            Outcome::FeedbackMatched {
                correct: None,
                correction: true,
                taught: true
            }
        );
        send(&mut direct, serde_json::json!({"id": "q", "label": "ham"}));
        same_counts(relabeled.model(), direct.model());
        assert_eq!(relabeled.counters().labels_replaced, 1);
        assert_eq!(
            send(&mut relabeled, serde_json::json!({"id": "q", "forget": true})),
            Outcome::Forgotten { found: true }
        );
        same_counts(relabeled.model(), never.model());
        let counts = |m: &Model| (0..m.doc_buckets() as u32).map(|b| m.doc_count(b)).collect::<Vec<_>>();
        assert_eq!(relabeled.model().doc_freq(), never.model().doc_freq());
        assert_eq!(counts(relabeled.model()), counts(never.model()));
        // The record keeps the message, unlabeled: a forget again finds
        // nothing to take back and counts nothing; a label is learned anew,
        // as if the first had never been (an undo, then a decision).
        let forgotten = relabeled.counters().labels_forgotten;
        assert_eq!(
            send(&mut relabeled, serde_json::json!({"id": "q", "forget": true})),
            Outcome::Forgotten { found: false }
        );
        assert_eq!(relabeled.counters().labels_forgotten, forgotten);
        assert!(matches!(
            send(&mut relabeled, serde_json::json!({"id": "q", "label": "ham"})),
            Outcome::FeedbackMatched { taught: true, .. }
        ));
        assert_ne!(model_digest(relabeled.model()), model_digest(never.model()));
        let taught = relabeled.cache().get("q").and_then(|e| e.taught.clone());
        assert_eq!(taught.map(|t| t.labels), Some(vec!["ham".to_string()]));
        assert_eq!(relabeled.counters().forgets_unmatched, 0);
    }

    /// Forgetting a reporter takes back every label of its that the record
    /// holds, whoever else taught since, and leaves naive Bayes's counts as
    /// if it had never spoken; a line that names nobody is bad input.
    #[test]
    fn a_reporter_is_forgotten_whole() {
        let (mut forgot, never) = (learned(naive_bayes()), learned(naive_bayes()));
        let extra = [
            "win a free phone today",
            "meet me at the cafe",
            "claim your cash reward",
        ];
        for (i, text) in extra.iter().enumerate() {
            send(&mut forgot, serde_json::json!({"id": format!("x-{i}"), "text": text}));
            send(
                &mut forgot,
                serde_json::json!({"id": format!("x-{i}"), "label": "ham", "reporter": "flip"}),
            );
        }
        let mut never = never;
        for (i, text) in extra.iter().enumerate() {
            send(&mut never, serde_json::json!({"id": format!("x-{i}"), "text": text}));
        }
        let before = forgot.counters().labels_forgotten;
        let out = send(
            &mut forgot,
            serde_json::json!({"forget_reporter": "flip", "reporter": "admin"}),
        );
        assert_eq!(out, Outcome::Forgotten { found: true });
        assert_eq!(forgot.counters().labels_forgotten, before + 3);
        same_counts(forgot.model(), never.model());
        assert!(
            forgot.cache().get("x-0").is_some_and(|e| e.taught.is_none()),
            "kept, unlabeled"
        );
        assert!(
            forgot.cache().get("m-0").is_some_and(|e| e.taught.is_some()),
            "r1's labels stay"
        );
        let again = send(&mut forgot, serde_json::json!({"forget_reporter": "flip"}));
        assert_eq!(again, Outcome::Forgotten { found: false }, "nothing left to take back");
        for bad in [
            serde_json::json!({"forget_reporter": 5}),
            serde_json::json!({"forget_reporter": "flip", "id": "x-0"}),
            serde_json::json!({"forget_reporter": "flip", "label": "ham"}),
        ] {
            assert!(matches!(send(&mut forgot, bad), Outcome::Bad(_)));
        }
    }

    /// The linear model: a replaced label's copy is scored on the new
    /// label's side; a label forgotten right away leaves the scores as
    /// they were (the fusion off: its stacking weight keeps what it learned).
    #[test]
    fn a_linear_model_takes_its_step_back() {
        let mut hyper = Hyper::defaults(Learner::Logistic);
        hyper.fusion = false;
        let features = FeatureConfig {
            bits: 16,
            ..FeatureConfig::default()
        };
        let mut p = learned(Pipeline::new(Model::new(hyper, features), PipelineConfig::default()));
        let text = "pick up your free prize at the station";
        let before = score(&p, text, "spam");
        send(&mut p, serde_json::json!({"id": "q", "text": text}));
        send(&mut p, serde_json::json!({"id": "q", "label": "spam"}));
        assert!(
            score(&p, text, "spam") > before + 0.1,
            "{before} {}",
            score(&p, text, "spam")
        );
        send(&mut p, serde_json::json!({"id": "q", "label": "ham"}));
        assert!(score(&p, text, "spam") < 0.0, "{}", score(&p, text, "spam"));
        send(&mut p, serde_json::json!({"id": "q", "forget": true}));
        let after = score(&p, text, "spam");
        assert!(
            (after - before).abs() < 0.05 * before.abs().max(0.1),
            "{before} then {after}"
        );
        for (t, _) in TEXTS {
            assert!(score(&p, t, "spam").is_finite());
        }
    }

    /// A trusted reporter's label stands against an untrusted relabel or
    /// forget (held, the model unchanged); a trusted relabel replaces an
    /// untrusted label and marks its reporter's record.
    #[test]
    fn who_may_override_whom() {
        let trust = TrustConfig {
            trusted: vec!["reviewer".into()],
            ..TrustConfig::default()
        };
        let cfg = PipelineConfig {
            trust,
            ..PipelineConfig::default()
        };
        let mut p = learned(pipeline(cfg));
        send(
            &mut p,
            serde_json::json!({"id": "m-1", "label": "spam", "reporter": "reviewer"}),
        );
        assert_eq!(p.counters().labels_replaced, 1);
        assert_eq!(p.reporters().get("r1").unwrap().overridden, 1);
        let digest = model_digest(p.model());
        for line in [
            serde_json::json!({"id": "m-1", "label": "ham", "reporter": "r1"}),
            serde_json::json!({"id": "m-1", "label": "ham"}),
            serde_json::json!({"id": "m-1", "forget": true, "reporter": "r1"}),
        ] {
            send(&mut p, line);
        }
        assert_eq!(model_digest(p.model()), digest);
        assert_eq!(p.counters().labels_replaced, 1);
        assert_eq!(p.counters().forgets_refused, 1);
        assert!(p.cache().get("m-1").unwrap().held.is_some());
        // The reviewer itself may take it back.
        send(
            &mut p,
            serde_json::json!({"id": "m-1", "forget": true, "reporter": "reviewer"}),
        );
        assert_ne!(model_digest(p.model()), digest);
        let m1 = p.cache().get("m-1").unwrap();
        assert!(m1.taught.is_none() && m1.held.is_none(), "kept, unlabeled");
    }
}
