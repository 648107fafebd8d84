//! Tests of the parent module.

use super::*;
use crate::features::FeatureConfig;
use crate::model::member::compression::Compression;
use crate::model::{Hyper, Learner, Scored};

/// A logistic pipeline over 2^16 buckets (for tests here and elsewhere).
pub(crate) fn pipeline(cfg: PipelineConfig) -> Pipeline {
    let features = FeatureConfig {
        bits: 16,
        ..FeatureConfig::default()
    };
    Pipeline::new(Model::new(Hyper::defaults(Learner::Logistic), features), cfg)
}

fn id0() -> String {
    "line-0".into()
}

/// Messages prepared into shared batches (counted on either side)
/// handle exactly as one at a time: the same outcomes, the same model.
#[test]
fn prepared_batches_handle_like_single_messages() {
    let lines: Vec<&[u8]> = vec![
        br#"{"text": "win win win cash prize now", "label": "spam"}"#,
        br#"{"text": "lunch at noon? lunch is on me", "label": "ham"}"#,
        b"   ",
        br#"{"id": "u-1", "text": "cash cash prize"}"#,
        br#"{"text": "not json"#,
        br#"{"text": "", "label": "ham"}"#,
        br#"{"id": "u-1", "label": "spam"}"#,
        br#"{"text": "free entry: call now, win a prize!", "label": "spam"}"#,
        br#"{"text": "see you at the station at six", "label": "ham"}"#,
        br#"{"id": "u-2", "text": "are we still on for lunch"}"#,
        br#"{"id": "u-2", "label": "ham"}"#,
        br#"{"text": "urgent: your prize is waiting, call call call", "label": "spam"}"#,
    ];
    let mut one = pipeline(PipelineConfig::default());
    let want: Vec<Outcome> = lines
        .iter()
        .enumerate()
        .map(|(n, l)| one.handle(l, &id0, n as u64))
        .collect();
    let mut batched = pipeline(PipelineConfig::default());
    let mut prep = batched.preparer();
    let mut batch = Prepared::default();
    let mut got = Vec::new();
    for (k, chunk) in lines.chunks(5).enumerate() {
        batch.clear();
        for (j, l) in chunk.iter().enumerate() {
            // Two in three counted here, the rest by the pipeline.
            prep.prepare(l, (k * 5 + j) % 3 != 2, &mut batch);
        }
        assert_eq!(batch.len(), chunk.len());
        for i in 0..batch.len() {
            got.push(batched.handle_entry(Entry::Prepared(&mut batch, i), &id0, (k * 5 + i) as u64, &mut Daemon));
        }
    }
    assert_eq!(got, want);
    assert_eq!(batched.counters().learned, one.counters().learned);
    let probe = br#"{"id": "p", "text": "win a free lunch prize"}"#;
    assert_eq!(batched.handle(probe, &id0, 99), one.handle(probe, &id0, 99));
    // A message taken already, or past the end, is blank.
    assert_eq!(
        batched.handle_entry(Entry::Prepared(&mut batch, 0), &id0, 0, &mut Daemon),
        Outcome::Skipped
    );
    assert_eq!(
        batched.handle_entry(Entry::Prepared(&mut batch, 9), &id0, 0, &mut Daemon),
        Outcome::Skipped
    );
}

/// The name sketch is kept only when asked for, and asking for it
/// changes nothing else: the same outcomes and the same predictions.
#[test]
fn names_are_sketched_only_when_asked_and_change_nothing_else() {
    let lines: [&[u8]; 3] = [
        br#"{"text": "win cash prize now", "label": "spam"}"#,
        br#"{"text": "lunch at noon", "label": "ham"}"#,
        br#"{"id": "q", "text": "win a free lunch"}"#,
    ];
    let mut named = pipeline(PipelineConfig::default());
    let mut bare = pipeline(PipelineConfig {
        name_features: false,
        ..PipelineConfig::default()
    });
    for (n, l) in lines.iter().enumerate() {
        assert_eq!(named.handle(l, &id0, n as u64), bare.handle(l, &id0, n as u64));
    }
    assert!(named.model().sketch().len() > 10, "{}", named.model().sketch().len());
    assert_eq!(bare.model().sketch().len(), 0);
}

#[test]
fn labeled_unlabeled_feedback_and_bad() {
    let mut p = pipeline(PipelineConfig::default());
    for _ in 0..5 {
        p.handle(br#"{"text": "win cash prize now", "label": "spam"}"#, &id0, 0);
        p.handle(br#"{"text": "lunch at noon?", "label": "ham"}"#, &id0, 0);
    }
    assert_eq!(p.counters().learned, 10);
    let Outcome::Predicted(pred) = p.handle(br#"{"id": "m-1", "text": "cash prize"}"#, &id0, 0) else {
        panic!("expected a prediction")
    };
    assert_eq!(pred.labels, ["spam"]);
    let mut json = Vec::new();
    pred.write_json(&mut json);
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["id"], "m-1");
    assert_eq!(v["label"], "spam");
    assert_eq!(v["model_version"], 10);
    assert!(v["scores"]["spam"].as_f64().unwrap() > 0.5);
    // Margins: unrounded log-odds, one class's the other's negation, and
    // the probability their sigmoid.
    let (spam, ham) = (
        v["margins"]["spam"].as_f64().unwrap(),
        v["margins"]["ham"].as_f64().unwrap(),
    );
    assert!(spam > 0.0 && (spam + ham).abs() < 1e-6, "{spam} {ham}");
    let p_spam = 1.0 / (1.0 + (-spam).exp());
    assert!((p_spam - v["scores"]["spam"].as_f64().unwrap()).abs() < 1e-5);
    // The late label joins; a second one is a correction; an unknown id is counted.
    let v0 = p.model().version();
    assert_eq!(
        p.handle(br#"{"id": "m-1", "label": "spam"}"#, &id0, 1),
        Outcome::FeedbackMatched {
            correct: Some(true),
            correction: false,
            taught: true
        }
    );
    assert_eq!(p.model().version(), v0 + 1);
    assert_eq!(
        p.handle(br#"{"id": "m-1", "label": "ham"}"#, &id0, 2),
        Outcome::FeedbackMatched {
            correct: None,
            correction: true,
            taught: true
        }
    );
    assert_eq!(
        p.handle(br#"{"id": "nope", "label": "ham"}"#, &id0, 3),
        Outcome::FeedbackUnmatched
    );
    assert_eq!(p.published().total().examples, 1);
    assert_eq!(p.counters().feedback_corrections, 1);
    assert_eq!(p.counters().feedback_unmatched, 1);
    // Bad input is counted by reason and leaves the model alone.
    let v1 = p.model().version();
    assert!(matches!(p.handle(b"{oops", &id0, 4), Outcome::Bad(b) if b.reason == BadReason::BadJson));
    assert!(matches!(
        p.handle(br#"{"text": "x", "labels": ["a", "b"]}"#, &id0, 4),
        Outcome::Bad(b) if b.reason == BadReason::BadLabel
    ));
    assert_eq!(p.model().version(), v1);
    assert_eq!(p.counters().bad[BadReason::BadJson.index()], 1);
    assert_eq!(p.counters().bad_total(), 2);
    assert_eq!(p.progressive().total().examples, 10);
}

#[test]
fn cache_respects_ttl_and_caps() {
    let cfg = PipelineConfig {
        cache_entries: 2,
        cache_ttl_ms: 100,
        ..PipelineConfig::default()
    };
    let mut p = pipeline(cfg);
    p.handle(br#"{"id": "a", "text": "one"}"#, &id0, 0);
    p.handle(br#"{"id": "b", "text": "two"}"#, &id0, 10);
    p.handle(br#"{"id": "c", "text": "three"}"#, &id0, 20);
    assert_eq!(p.cache().len(), 2);
    assert_eq!(p.cache().evicted, 1);
    assert_eq!(
        p.handle(br#"{"id": "a", "label": "x"}"#, &id0, 30),
        Outcome::FeedbackUnmatched
    );
    // At t=115, "b" (t=10) is past its TTL; "c" (t=20) is not.
    assert_eq!(
        p.handle(br#"{"id": "b", "label": "x"}"#, &id0, 115),
        Outcome::FeedbackUnmatched
    );
    assert_eq!(p.cache().expired, 1);
    assert!(matches!(
        p.handle(br#"{"id": "c", "label": "x"}"#, &id0, 115),
        Outcome::FeedbackMatched { .. }
    ));
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(400))]

    /// Arbitrary bytes never panic: they are an outcome, bad input at worst.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
        let mut p = pipeline(PipelineConfig { max_message_bytes: 200, ..PipelineConfig::default() });
        let _ = p.handle(&bytes, &id0, 0);
    }

    /// JSON-shaped input with arbitrary strings and labels never panics either,
    /// and a well-formed labeled line is always learned.
    #[test]
    fn arbitrary_messages_never_panic(text in "\\PC{0,200}", label in "\\PC{0,20}", multi in proptest::prelude::any::<bool>()) {
        let mut p = pipeline(PipelineConfig::default());
        let line = if multi {
            serde_json::json!({"text": text, "labels": [label.clone()]})
        } else {
            serde_json::json!({"text": text, "label": label.clone()})
        };
        let out = p.handle(line.to_string().as_bytes(), &id0, 0);
        let ok_label = !label.is_empty() && !label.chars().any(char::is_control);
        if ok_label {
            proptest::prop_assert!(matches!(out, Outcome::Learned { .. }), "{out:?}");
        }
        let _ = p.handle(serde_json::json!({"text": text}).to_string().as_bytes(), &id0, 0);
    }
}

#[test]
fn missing_id_takes_the_default() {
    let mut p = pipeline(PipelineConfig::default());
    let Outcome::Predicted(pred) = p.handle(br#"{"text": "hello"}"#, &|| "stdin:7".to_string(), 0) else {
        panic!()
    };
    assert_eq!(pred.id, "stdin:7");
    assert_eq!(pred.labels, Vec::<String>::new(), "no class known yet");
}

/// `"text": null` on a labeled message is bad input (counted, for the
/// dead-letter output), not a late label for the id it carries: the
/// cached message with that id stays unlabeled and nothing is learned.
#[test]
fn a_null_text_is_bad_input_not_a_late_label() {
    let mut p = pipeline(PipelineConfig::default());
    let predicted = p.handle(br#"{"id": "p3", "text": "cash prize now"}"#, &id0, 0);
    assert!(matches!(predicted, Outcome::Predicted(_)), "{predicted:?}");
    match p.handle(br#"{"id": "p3", "text": null, "label": "spam"}"#, &id0, 1) {
        Outcome::Bad(bad) => assert_eq!(bad.reason, BadReason::WrongType),
        other => panic!("a null text was taken as {other:?}"),
    }
    assert_eq!(p.counters().bad[BadReason::WrongType.index()], 1);
    assert_eq!(p.counters().feedback_matched + p.counters().learned, 0);
    assert_eq!(p.model().version(), 0);
}

/// A predictor predicts and keeps nothing for a join (its late labels go
/// to the learner) and passes labeled messages and feedback by; a learner
/// keeps unlabeled messages for the join without predicting them, and
/// learns their feedback.
#[test]
fn roles_do_their_part_of_a_message() {
    let cfg = |role| PipelineConfig {
        role,
        ..PipelineConfig::default()
    };
    let labeled: &[u8] = br#"{"text": "win cash now", "label": "spam"}"#;
    let request: &[u8] = br#"{"id": "u-1", "text": "cash prize"}"#;
    let feedback: &[u8] = br#"{"id": "u-1", "label": "spam"}"#;

    let mut predictor = pipeline(cfg(Role::Predictor));
    assert_eq!(predictor.handle(labeled, &id0, 0), Outcome::Passed);
    assert!(matches!(predictor.handle(request, &id0, 1), Outcome::Predicted(_)));
    assert_eq!(predictor.handle(feedback, &id0, 2), Outcome::Passed);
    assert!(predictor.cache().is_empty());
    assert_eq!(predictor.model().version(), 0);
    assert_eq!(predictor.counters().passed, 2);

    let mut learner = pipeline(cfg(Role::Learner));
    assert!(matches!(learner.handle(labeled, &id0, 0), Outcome::Learned { .. }));
    assert_eq!(learner.handle(request, &id0, 1), Outcome::Passed);
    assert_eq!(learner.counters().predicted, 0);
    assert_eq!(learner.cache().len(), 2);
    assert!(matches!(
        learner.handle(feedback, &id0, 2),
        Outcome::FeedbackMatched {
            correct: None,
            correction: false,
            taught: true
        }
    ));
    assert_eq!(learner.model().version(), 2);
}

/// `--explain 5`: a spam message's prediction lists at most five features,
/// each adding to the predicted label's score, strongest first, and each
/// one the message contains (words as tokenized, character n-grams as
/// written); without it the prediction has none and its JSON no field.
#[test]
fn explanations_name_what_the_message_contains() {
    let sms = include_str!("../../tests/data/sms_head1000.jsonl");
    let mut explained = pipeline(PipelineConfig {
        explain: 5,
        ..PipelineConfig::default()
    });
    let mut plain = pipeline(PipelineConfig::default());
    for (i, line) in sms.lines().enumerate() {
        explained.handle(line.as_bytes(), &|| i.to_string(), i as u64);
        plain.handle(line.as_bytes(), &|| i.to_string(), i as u64);
    }
    let spam = [
        "WINNER!! As a valued network customer you have been selected to receive a £900 prize reward!",
        "Free entry in 2 a wkly comp to win FA Cup final tkts. Text FA to 87121 to receive entry",
        "URGENT! You have won a 1 week FREE membership in our £100,000 Prize Jackpot! Txt CLAIM to 81010",
        "Had your mobile 11 months or more? U R entitled to Update to the latest colour mobiles with camera for Free!",
        "SIX chances to win CASH! From 100 to 20,000 pounds txt> CSH11 and send to 87575.",
    ];
    for text in spam {
        let raw = serde_json::json!({"id": "q", "text": text}).to_string();
        let p = explained
            .predictor_mut()
            .predict_only(raw.as_bytes(), &|| "q".into())
            .unwrap();
        assert_eq!(p.labels, ["spam"], "{text}");
        let e = p.explanation.clone().unwrap();
        assert!(!e.is_empty() && e.len() <= 5, "{e:?}");
        assert!(e.windows(2).all(|w| w[0].contribution >= w[1].contribution) && e[4].contribution > 0.0);
        let lower = text.to_lowercase();
        for c in &e {
            match c.feature.strip_prefix("c:") {
                Some(quoted) => {
                    let piece: String = serde_json::from_str(quoted).unwrap();
                    assert!(text.contains(&piece), "{piece:?} not in {text:?}");
                }
                None => {
                    for word in c.feature.split(' ') {
                        assert!(lower.contains(word), "{word:?} not in {text:?}");
                    }
                }
            }
        }
        let mut json = Vec::new();
        p.write_json(&mut json);
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["explanation"][0]["feature"], e[0].feature.as_str());
        // The same prediction without explanations.
        let q = plain
            .predictor_mut()
            .predict_only(raw.as_bytes(), &|| "q".into())
            .unwrap();
        assert_eq!((q.explanation.as_ref(), &q.scores), (None, &p.scores));
        let mut json = Vec::new();
        q.write_json(&mut json);
        assert!(!String::from_utf8(json).unwrap().contains("explanation"));
    }
}

/// `--contradiction-margin`: a label that contradicts a confident
/// prediction is learned in full while such labels are rare, and with
/// weight (r/m)^2 once they are common (past 4 % of recent labels); the
/// recent share rides in the checkpoint.
#[test]
fn confident_contradictions_weigh_less_only_when_they_are_common() {
    let mut p = Pipeline::new(
        Model::new(Hyper::defaults(Learner::Logistic), FeatureConfig::default()),
        PipelineConfig::default(),
    );
    p.predictor.model.ensure_task(Task::SingleLabel);
    for class in ["spam", "ham"] {
        p.predictor.model.intern(class).unwrap();
    }
    let scored = Scored {
        scores: vec![0.99, 0.01],
        raw: vec![3.0, -3.0],
        labels: vec![0],
        probabilities: true,
        fused: None,
        stacked: None,
    };
    // Agreement, or a contradiction within the margin: in full.
    assert_eq!(p.label_weight(&scored, &[0], None), Some(1.0));
    // Rare: in full (the share is now 2 %, the bottom of the band).
    assert_eq!(p.label_weight(&scored, &[1], None), Some(1.0));
    assert!((p.ledger.contradiction_share() - 0.02).abs() < 1e-6);
    // Common: (1 / 6)^2.
    p.ledger.set_contradiction_share(0.05);
    let w = p.label_weight(&scored, &[1], None).unwrap();
    assert!((w - 1.0 / 36.0).abs() < 1e-4, "{w}");
    // Off: every label in full, and nothing tracked.
    let mut off = Pipeline::new(
        Model::new(Hyper::defaults(Learner::Logistic), FeatureConfig::default()),
        PipelineConfig {
            trust: crate::pipeline::TrustConfig {
                margin: 0.0,
                ..Default::default()
            },
            ..PipelineConfig::default()
        },
    );
    off.ledger.set_contradiction_share(0.5);
    assert_eq!(off.label_weight(&scored, &[1], None), Some(1.0));
    assert!(off.reporters().is_empty());
    assert_eq!(off.ledger.contradiction_share(), 0.5);
    // The share survives a checkpoint.
    let (back, _) =
        crate::checkpoint::restore(crate::checkpoint::capture(&p, &Default::default()), p.config().clone()).unwrap();
    assert_eq!(back.ledger.contradiction_share(), p.ledger.contradiction_share());
}

/// A request prepared apart (outside the daemon's lock) is answered as one
/// handed whole, also when its preparer's features are not the model's
/// any more (it is then prepared again); bad and blank ones are refused.
#[test]
fn requests_prepared_apart_answer_like_whole_ones() {
    let mut p = pipeline(PipelineConfig::default());
    for (n, l) in [
        br#"{"text": "win cash prize now", "label": "spam"}"#.as_slice(),
        br#"{"text": "lunch at noon with the team", "label": "ham"}"#,
    ]
    .iter()
    .enumerate()
    {
        p.handle(l, &id0, n as u64);
    }
    let raw = br#"{"id": "r", "text": "a cash prize for lunch"}"#;
    let whole = p.classify_request(raw, &id0, 5, Some(3)).expect("a text");
    let stale = Preparer::new(
        FeatureConfig {
            bits: 12,
            ..FeatureConfig::default()
        },
        PipelineConfig::default().reading(),
    );
    let kept = p.cache().get("r").map(|e| e.score);
    let mut copy = p.serving_copy();
    for mut preparer in [p.preparer(), stale] {
        let mut batch = Prepared::default();
        preparer.prepare(raw, false, &mut batch);
        let (apart, answered) = copy
            .answer(Raw::json(raw), (&preparer, &mut batch), &id0, 6, Some(3))
            .expect("a text");
        assert_eq!(apart, whole);
        // What its late label will be scored by: the learner's own score
        // of the positive class, not a copy's guess.
        assert_eq!(answered.kept.then_some(answered.entry.score), kept);
    }
    for bad in [b"   ".as_slice(), b"{\"text\": 3}", br#"{"id": "r", "label": "ham"}"#] {
        let mut batch = Prepared::default();
        let mut preparer = p.preparer();
        preparer.prepare(bad, false, &mut batch);
        assert!(
            copy.answer(Raw::json(bad), (&preparer, &mut batch), &id0, 7, None)
                .is_err()
        );
    }
}

/// Before a second class is learned, a prediction has the evidence of
/// the one class's examples (Laplace's rule of succession), not a
/// certainty: after one spam, probability 2/3 and margin ln 2.
#[test]
fn one_class_known_is_the_evidence_of_its_examples() {
    let mut p = pipeline(PipelineConfig::default());
    let unlabeled = |p: &mut Pipeline| match p.handle(br#"{"id": "m-1", "text": "win cash prize now"}"#, &id0, 0) {
        Outcome::Predicted(pred) => pred,
        _ => panic!("expected a prediction"),
    };
    let before = unlabeled(&mut p);
    assert!(before.labels.is_empty() && before.margins.is_empty());
    p.handle(br#"{"text": "win cash prize now", "label": "spam"}"#, &id0, 0);
    let pred = unlabeled(&mut p);
    assert_eq!(pred.labels, ["spam"]);
    assert_eq!(pred.scores[0].0, "spam");
    assert!((pred.scores[0].1 - 2.0 / 3.0).abs() < 1e-6, "{:?}", pred.scores);
    assert!((pred.margins[0].1 - 2f32.ln()).abs() < 1e-6, "{:?}", pred.margins);
    // The ROC ranks by the same margin: the ham that follows scores ln 2
    // for spam, and the spam after it (both classes known) by the model.
    p.handle(br#"{"text": "see you at lunch", "label": "ham"}"#, &id0, 0);
    assert!((p.progressive().state().roc[1].0 - 2f32.ln()).abs() < 1e-6);
}

/// `--byte-lr email` and `--compression email` (the defaults) add the
/// byte LR and the compression member at the first raw e-mail, not for
/// text; `always` from the first message; `off` never. Once in, they
/// score every message's head, and the stack learns their weights.
#[test]
fn the_byte_lr_and_the_compression_member_join_at_the_first_e_mail() {
    let text = br#"{"text": "win cash prize now", "label": "spam"}"#;
    let mail = |label: &str, body: &str| {
        format!(r#"{{"email": "From: a@example.com\nSubject: {body}\n\n{body}\n", "label": "{label}"}}"#)
    };
    for (when, after_text, after_mail) in [
        (MemberWhen::Email, false, true),
        (MemberWhen::Always, true, true),
        (MemberWhen::Off, false, false),
    ] {
        let mut p = pipeline(PipelineConfig {
            members: AddedWhen::default().with("byte_lr", when).with("compression", when),
            ..PipelineConfig::default()
        });
        let has = |p: &Pipeline, name: &str| p.model().added().named(name).is_some();
        p.handle(text, &id0, 0);
        assert_eq!(has(&p, "byte_lr"), after_text, "{when:?}");
        assert_eq!(has(&p, "compression"), after_text, "{when:?}");
        for i in 0..5 {
            p.handle(mail("spam", &format!("cheap pills {i}")).as_bytes(), &id0, 0);
            p.handle(mail("ham", &format!("lunch at noon {i}")).as_bytes(), &id0, 0);
        }
        assert_eq!(has(&p, "byte_lr"), after_mail, "{when:?}");
        assert_eq!(has(&p, "compression"), after_mail, "{when:?}");
        assert!(!has(&p, "length"), "off unless asked for");
        let Outcome::Predicted(pred) = p.handle(br#"{"id": "q", "text": "cheap pills 9"}"#, &id0, 0) else {
            panic!("expected a prediction")
        };
        assert_eq!(pred.labels, ["spam"], "{when:?}");
        if has(&p, "byte_lr") {
            // The stack learned a weight for it from 0.
            let stack = p.model().stack().expect("a binary linear model has a stack");
            let weight = |name| stack.weight(crate::model::stack::Member::named(name).expect("a member"));
            assert_ne!(weight("byte_lr"), 0.0);
            assert_ne!(weight("compression"), 0.0);
        }
    }
}

/// With an explanation, a binary model's prediction says what each
/// member of its stack added: the shares, bias included, add up to the
/// label's margin, largest first.
#[test]
fn an_explanation_gives_each_members_share_of_the_margin() {
    let mut p = pipeline(PipelineConfig {
        explain: 3,
        members: AddedWhen::all(MemberWhen::Always),
        ..PipelineConfig::default()
    });
    for i in 0..40 {
        let (text, label) = match i % 2 {
            0 => (format!("win a cash prize now {i}"), "spam"),
            _ => (format!("lunch at noon tomorrow {i}"), "ham"),
        };
        p.handle(
            serde_json::json!({"text": text, "label": label}).to_string().as_bytes(),
            &id0,
            0,
        );
    }
    let Outcome::Predicted(pred) = p.handle(br#"{"id": "q", "text": "cash prize for lunch"}"#, &id0, 0) else {
        panic!("expected a prediction")
    };
    let shares = pred.members.expect("a binary model with a stack explains its members");
    let names: Vec<&str> = shares.iter().map(|(m, _)| m.as_str()).collect();
    // (The tests' length-only member adds nothing here: its stack weight
    // stays at 0, and a member that adds nothing is left out.)
    for m in ["linear", "byte_lr", "compression", "bias"] {
        assert!(names.contains(&m), "{names:?}");
    }
    assert!(shares.windows(2).all(|w| w[0].1 >= w[1].1), "{shares:?}");
    let label = &pred.labels[0];
    let margin = pred.margins.iter().find(|(c, _)| c == label).expect("a margin").1;
    let sum: f32 = shares.iter().map(|(_, s)| s).sum();
    assert!(
        (sum - margin).abs() < 1e-4,
        "{shares:?} add to {sum}, the margin is {margin}"
    );
}

/// A forgotten label takes back what the compression member counted for
/// it, and a relabel moves the counts to the other class: the counts are
/// as if the message had been learned under its last label alone.
#[test]
fn a_forget_takes_back_the_compression_members_counts() {
    let mut p = pipeline(PipelineConfig {
        members: AddedWhen::default().with("compression", MemberWhen::Always),
        ..PipelineConfig::default()
    });
    let send = |p: &mut Pipeline, v: serde_json::Value| p.handle(v.to_string().as_bytes(), &id0, 0);
    let counts = |p: &Pipeline| {
        let (slots, values) = p.model().added().state("compression").expect("always on");
        let mut c = Compression::new();
        assert!(c.put(&slots, &values));
        c
    };
    for i in 0..10 {
        let label = if i % 2 == 0 { "spam" } else { "ham" };
        send(
            &mut p,
            serde_json::json!({"id": format!("w{i}"), "text": format!("warm up {i}"), "label": label}),
        );
    }
    let before = counts(&p);
    send(
        &mut p,
        serde_json::json!({"id": "m", "text": "cheap pills here", "label": "spam"}),
    );
    let learned = counts(&p);
    assert_ne!(learned, before);
    let forget = send(&mut p, serde_json::json!({"id": "m", "forget": true}));
    assert!(matches!(forget, Outcome::Forgotten { .. }));
    // As before, to the rounding of the label's weight.
    let now = counts;
    assert!(now(&p).distance(&before) < 1e-5, "{}", now(&p).distance(&before));
    assert!(learned.distance(&before) > 0.5);
    // Relabelled: the spam counts go back, the ham ones come.
    send(
        &mut p,
        serde_json::json!({"id": "n", "text": "see you at lunch", "label": "spam"}),
    );
    let spam = now(&p);
    send(
        &mut p,
        serde_json::json!({"id": "n", "text": "see you at lunch", "label": "ham"}),
    );
    let ham = now(&p);
    // Each class's counts in all: the spam label added to class 1's
    // alone, and its relabel took that back and added to class 0's.
    let mass = |c: &Compression, class: usize| -> f32 { c.nonzero().1.iter().skip(class).step_by(2).sum() };
    let bytes = "see you at lunch".len() as f32 * 4.0;
    let s = p.model().labels().get("spam").expect("known");
    let added = |c: &Compression| [mass(c, s) - mass(&before, s), mass(c, 1 - s) - mass(&before, 1 - s)];
    let [to_spam, to_ham] = added(&spam);
    assert!(to_ham.abs() < 1e-3 && to_spam > 0.1 * bytes, "{to_spam} {to_ham}");
    // The relabel is believed by its weight (little, against a model
    // that learned the other label: docs/feedback.md), never nothing.
    let [to_spam, to_ham] = added(&ham);
    assert!(to_spam.abs() < 1e-3 && to_ham > 0.0, "{to_spam} {to_ham}");
}

/// Personal features (issue 49): a user's first labels teach the shared
/// part alone; then, where users disagree, a user's labels move that
/// user's scores more than another's; a message without a user is scored
/// by the shared part alone; the late label of a message for a user
/// learns that user's part (the user kept in the cache, and across a
/// checkpoint).
#[test]
fn a_users_labels_teach_their_personal_part() {
    let mut p = pipeline(PipelineConfig {
        explain: 3,
        ..PipelineConfig::default()
    });
    for i in 0..40 {
        let (text, label) = match i % 2 {
            0 => ("win a cash prize now", "spam"),
            _ => ("lunch at noon tomorrow", "ham"),
        };
        p.handle(
            serde_json::json!({"text": text, "label": label}).to_string().as_bytes(),
            &id0,
            0,
        );
    }
    let margin = |p: &mut Pipeline, user: Option<&str>| {
        let mut v = serde_json::json!({"id": "q", "text": "the weekly newsletter of the club"});
        if let Some(u) = user {
            v["user"] = u.into();
        }
        let pred = p.predictor_mut().predict_only(v.to_string().as_bytes(), &id0).unwrap();
        pred.margins.iter().find(|m| m.0 == "spam").unwrap().1
    };
    let (a0, b0, none0) = (
        margin(&mut p, Some("a")),
        margin(&mut p, Some("b")),
        margin(&mut p, None),
    );
    let first = super::example::PERSONAL_AFTER as usize;
    for i in 0..first + 10 {
        let id = format!("n-{i}");
        let msg = serde_json::json!({"id": id, "text": "the weekly newsletter of the club", "user": "a"});
        p.handle(msg.to_string().as_bytes(), &id0, 0);
        if i == first {
            // A user's first labels teach the shared part alone.
            let (a, b) = (margin(&mut p, Some("a")), margin(&mut p, Some("b")));
            assert!((a - a0 - (b - b0)).abs() < 1e-3, "a {a0} -> {a}, b {b0} -> {b}");
        }
        if i == 5 {
            let (back, _) =
                crate::checkpoint::restore(crate::checkpoint::capture(&p, &Default::default()), p.config().clone())
                    .unwrap();
            assert_eq!(back.cache(), p.cache());
            p = back;
        }
        let label = serde_json::json!({"id": id, "label": "spam"});
        p.handle(label.to_string().as_bytes(), &id0, 0);
        // c disagrees: the shared part cannot serve both, a's copies can.
        let c = serde_json::json!({"text": "the weekly newsletter of the club", "label": "ham", "user": "c"});
        p.handle(c.to_string().as_bytes(), &id0, 0);
    }
    let (a1, b1, none1) = (
        margin(&mut p, Some("a")),
        margin(&mut p, Some("b")),
        margin(&mut p, None),
    );
    assert!(a1 - a0 > (b1 - b0) + 0.5, "a {a0} -> {a1}, b {b0} -> {b1}");
    assert!((b1 - b0 - (none1 - none0)).abs() < 1e-3, "b moves as the shared part");
    // The explanation says which part decided, and the prediction (and a
    // review record) whose mail it is.
    let q = serde_json::json!({"text": "the weekly newsletter of the club", "user": "a"});
    let pred = p.predictor_mut().predict_only(q.to_string().as_bytes(), &id0).unwrap();
    let why = pred.explanation.as_ref().unwrap();
    assert!(why.iter().any(|c| c.feature.ends_with("(personal)")), "{why:?}");
    let mut json = Vec::new();
    pred.write_json(&mut json);
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["user"], "a");
    let review = Prediction {
        review: Some("the weekly newsletter of the club".into()),
        ..pred
    };
    json.clear();
    review.write_review_json(&mut json);
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["user"], "a");
    assert_eq!(v["text"], "the weekly newsletter of the club");
}

/// `eval`'s held-back examples keep their user: learned again in a later
/// pass, an example for user "a" moves a's personal part, not b's (the
/// work buffers' user of the last message handled does not leak into it).
#[test]
fn held_back_examples_keep_their_user() {
    /// Keeps the learned train-split examples, as `eval` does.
    #[derive(Default)]
    struct KeepTrain(Vec<HeldExample>);
    impl Driver for KeepTrain {
        fn keeps_train(&self) -> bool {
            true
        }
        fn learned(&mut self, example: HeldExample) {
            self.0.push(example);
        }
    }
    let mut p = pipeline(PipelineConfig::default());
    let (mut prep, mut batch, mut keep) = (p.preparer(), Prepared::default(), KeepTrain::default());
    let mut handle = |p: &mut Pipeline, v: serde_json::Value| {
        batch.clear();
        prep.prepare(v.to_string().as_bytes(), false, &mut batch);
        p.handle_entry(Entry::Prepared(&mut batch, 0), &id0, 0, &mut keep);
    };
    for (i, label) in ["spam", "ham"].iter().cycle().take(20).enumerate() {
        let v = serde_json::json!({"text": format!("newsletter of the club {}", i % 2), "label": label, "user": "a", "split": "train"});
        handle(&mut p, v);
    }
    handle(
        &mut p,
        serde_json::json!({"text": "last message", "label": "ham", "user": "b"}),
    );
    let held = keep.0;
    assert!(held.iter().all(|h| h.user == held[0].user && h.user.is_some()));
    let margin = |p: &mut Pipeline, user: &str| {
        let v = serde_json::json!({"text": "newsletter of the club 0", "user": user});
        let pred = p.predictor_mut().predict_only(v.to_string().as_bytes(), &id0).unwrap();
        pred.margins.iter().find(|m| m.0 == "spam").unwrap().1
    };
    let (a0, b0) = (margin(&mut p, "a"), margin(&mut p, "b"));
    for h in &held {
        p.relearn(h);
    }
    let (a1, b1) = (margin(&mut p, "a"), margin(&mut p, "b"));
    assert!((a1 - a0).abs() > (b1 - b0).abs(), "a {a0} -> {a1}, b {b0} -> {b1}");
}

/// Users' labeled messages are tallied by band of the user's labels
/// before them, inline labels as predicted and late labels as published
/// (their first label only: a repeat, a relabel or a message without a
/// user counts nothing); the label's user names the message's when the
/// message had none.
#[test]
fn users_labels_are_tallied_by_band() {
    let mut p = pipeline(PipelineConfig::default());
    let mut n = 0;
    let mut handle = |p: &mut Pipeline, v: serde_json::Value| {
        n += 1;
        p.handle(v.to_string().as_bytes(), &|| format!("m{n}"), n)
    };
    for i in 0..55 {
        let label = if i % 2 == 0 { "spam" } else { "ham" };
        handle(
            &mut p,
            serde_json::json!({"text": format!("note {i}"), "label": label, "user": "busy"}),
        );
    }
    let Outcome::Learned {
        correct: no_user_right, ..
    } = handle(&mut p, serde_json::json!({"text": "no user here", "label": "ham"}))
    else {
        panic!("a labeled message is learned")
    };
    handle(
        &mut p,
        serde_json::json!({"id": "late", "text": "free prize now", "user": "quiet"}),
    );
    handle(&mut p, serde_json::json!({"id": "late", "label": "spam"}));
    handle(&mut p, serde_json::json!({"id": "late", "label": "spam"}));
    handle(&mut p, serde_json::json!({"id": "late", "label": "ham"}));
    handle(&mut p, serde_json::json!({"id": "late2", "text": "free prize again"}));
    handle(
        &mut p,
        serde_json::json!({"id": "late2", "label": "spam", "user": "quiet"}),
    );
    let bands = p.user_bands().report();
    assert_eq!(
        bands.iter().map(|b| (b.examples, b.users)).collect::<Vec<_>>(),
        [(52, 2), (5, 1), (0, 0)]
    );
    assert_eq!(
        p.progressive().total().examples,
        56,
        "the tally is of users' messages only"
    );
    assert_eq!(p.published().total().examples, 2, "a late label counts once");
    // Right as the progressive and published metrics judged them.
    let right = |t: &crate::eval::Tally| (t.accuracy() * t.examples as f64).round() as u64;
    let users_right = right(p.progressive().total()) - u64::from(no_user_right) + right(p.published().total());
    assert_eq!(bands.iter().map(|b| b.correct).sum::<u64>(), users_right);
}

/// Forgetting one of a user's first labels, which taught the shared part
/// alone, takes back that step alone: the user's copies, never stepped,
/// are not stepped back (a's scores stay the shared part's, as b's).
#[test]
fn forgetting_a_first_label_leaves_the_copies() {
    let mut p = pipeline(PipelineConfig::default());
    for i in 0..30 {
        let label = if i % 2 == 0 { "spam" } else { "ham" };
        let v = serde_json::json!({"id": format!("w{i}"), "text": format!("warm up {i} prize"), "label": label});
        p.handle(v.to_string().as_bytes(), &id0, 0);
    }
    let v = serde_json::json!({"id": "m", "text": "the club newsletter prize", "label": "spam", "user": "a"});
    p.handle(v.to_string().as_bytes(), &id0, 0);
    let forget = serde_json::json!({"id": "m", "forget": true});
    assert!(matches!(
        p.handle(forget.to_string().as_bytes(), &id0, 0),
        Outcome::Forgotten { .. }
    ));
    let margin = |p: &mut Pipeline, user: &str| {
        let v = serde_json::json!({"text": "the club newsletter prize", "user": user});
        let pred = p.predictor_mut().predict_only(v.to_string().as_bytes(), &id0).unwrap();
        pred.margins.iter().find(|m| m.0 == "spam").unwrap().1
    };
    let (a, b) = (margin(&mut p, "a"), margin(&mut p, "b"));
    assert!((a - b).abs() < 1e-4, "a {a}, b {b}");
}

/// The proof that a member of the stack is one file and a line of the
/// registry (`model::member::length`, in the tests only): asked for by
/// name, it joins, learns, and a forget takes its lesson back; its
/// checkpoint and its model records are the other tests' (checkpoint and
/// replica tests run every registered member).
#[test]
fn a_member_written_as_one_file_joins_learns_and_forgets() {
    let mut p = pipeline(PipelineConfig {
        members: AddedWhen::default().with("length", MemberWhen::Always),
        ..PipelineConfig::default()
    });
    let send = |p: &mut Pipeline, v: serde_json::Value| p.handle(v.to_string().as_bytes(), &id0, 0);
    for i in 0..20 {
        let (text, label) = match i % 2 {
            0 => (format!("a long message about a cash prize to claim today {i}"), "spam"),
            _ => (format!("lunch {i}"), "ham"),
        };
        send(
            &mut p,
            serde_json::json!({"id": format!("w{i}"), "text": text, "label": label}),
        );
    }
    let state = |p: &Pipeline| p.model().added().state("length").expect("asked for").1;
    assert!(p.model().added().named("byte_lr").is_none(), "only what was asked for");
    let before = state(&p);
    assert!(before.iter().any(|&w| w != 0.0), "{before:?}");
    send(
        &mut p,
        serde_json::json!({"id": "m", "text": "a long long long message", "label": "spam"}),
    );
    assert_ne!(state(&p), before);
    send(&mut p, serde_json::json!({"id": "m", "forget": true}));
    for (a, b) in state(&p).iter().zip(&before) {
        assert!((a - b).abs() < 1e-5, "{:?} against {before:?}", state(&p));
    }
    let stack = p.model().stack().expect("a binary linear model has a stack");
    use crate::model::stack::Member;
    assert_eq!(Member::named("length").map(|m| m.index()), Some(Member::OWN + 2));
    assert_eq!(stack.weights().len(), crate::model::stack::MEMBERS + 1);
}
