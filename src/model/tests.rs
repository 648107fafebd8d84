//! Tests of the parent module.

use super::*;
use crate::features::Featurizer;

fn train(learner: Learner, data: &[(&str, &str)], passes: usize) -> (Model, Featurizer) {
    train_with(Hyper::defaults(learner), data, passes)
}

fn train_with(hyper: Hyper, data: &[(&str, &str)], passes: usize) -> (Model, Featurizer) {
    let cfg = FeatureConfig {
        bits: 16,
        char_ngrams: None,
        ..FeatureConfig::default()
    };
    let mut model = Model::new(hyper, cfg);
    let mut f = Featurizer::new(cfg);
    let mut x = SparseVec::default();
    for _ in 0..passes {
        for (text, label) in data {
            f.featurize(text, &mut x);
            model.ensure_task(Task::SingleLabel);
            let id = model.intern(label).unwrap();
            model.learn(&x, &[id]).unwrap();
        }
    }
    (model, f)
}

const DATA: &[(&str, &str)] = &[
    ("win cash now free prize", "spam"),
    ("are we meeting for lunch", "ham"),
    ("free entry win a prize call now", "spam"),
    ("see you at home tonight", "ham"),
    ("claim your free cash prize", "spam"),
    ("lunch tomorrow at noon?", "ham"),
    ("match report: arsenal win at home", "sport"),
    ("the league match ended in a draw", "sport"),
];

#[test]
fn every_learner_fits_a_small_separable_set() {
    for learner in [
        Learner::Perceptron,
        Learner::Logistic,
        Learner::Hinge,
        Learner::NaiveBayes,
    ] {
        let (model, mut f) = train(learner, DATA, 10);
        let mut x = SparseVec::default();
        let mut out = Scored::default();
        for (text, label) in DATA {
            f.featurize(text, &mut x);
            model.predict(&x, &mut out);
            assert_eq!(model.labels().name(out.labels[0]), *label, "{learner} on {text:?}");
        }
        if learner.probabilistic() {
            let sum: f32 = out.scores.iter().sum();
            assert!((sum - 1.0).abs() < 1e-4, "{learner} probabilities sum to {sum}");
        }
    }
}

/// Two classes of a single-label task are kept as a mirrored pair, for
/// every linear learner and schedule, and fit as they do in two columns
/// (the third class of `every_learner_fits_a_small_separable_set`
/// splits the pair mid-stream); label sets keep a column per label.
#[test]
fn binary_models_keep_a_mirrored_pair() {
    let cfg = FeatureConfig {
        bits: 16,
        char_ngrams: None,
        ..FeatureConfig::default()
    };
    let binary = &DATA[..6];
    for (learner, schedule) in [
        (Learner::Perceptron, Schedule::Constant),
        (Learner::Logistic, Schedule::AdaGrad),
        (Learner::Logistic, Schedule::InvScaling),
        (Learner::Hinge, Schedule::AdaGrad),
        (Learner::Hinge, Schedule::Arow),
    ] {
        let hyper = Hyper {
            schedule,
            ..Hyper::defaults(learner)
        };
        let (model, mut f) = train_with(hyper, binary, 10);
        let mut x = SparseVec::default();
        let State::Linear(w) = model.state() else {
            panic!("linear")
        };
        assert!(w.mirrored(), "{learner} {schedule}");
        let mut out = Scored::default();
        for (text, label) in binary {
            f.featurize(text, &mut x);
            model.predict(&x, &mut out);
            assert_eq!(model.labels().name(out.labels[0]), *label, "{learner} {schedule}");
            assert_eq!(out.raw[0], -out.raw[1]);
        }
    }
    let mut model = Model::new(Hyper::defaults(Learner::Logistic), cfg);
    model.ensure_task(Task::MultiLabel);
    model.intern("a").unwrap();
    model.intern("b").unwrap();
    let State::Linear(w) = model.state() else {
        panic!("linear")
    };
    assert!(!w.mirrored(), "one-vs-rest labels move independently");
}

#[test]
fn arow_and_the_other_schedules_fit_too() {
    for (learner, schedule) in [
        (Learner::Hinge, Schedule::Arow),
        (Learner::Logistic, Schedule::Constant),
        (Learner::Logistic, Schedule::InvScaling),
    ] {
        let hyper = Hyper {
            schedule,
            ..Hyper::defaults(learner)
        };
        hyper.validate().unwrap();
        let (model, mut f) = train_with(hyper, DATA, 10);
        let mut x = SparseVec::default();
        let mut out = Scored::default();
        for (text, label) in DATA {
            f.featurize(text, &mut x);
            model.predict(&x, &mut out);
            assert_eq!(model.labels().name(out.labels[0]), *label, "{learner} {schedule}");
        }
    }
    let bad = Hyper {
        schedule: Schedule::Arow,
        ..Hyper::defaults(Learner::Logistic)
    };
    assert!(bad.validate().is_err(), "AROW is for the hinge loss");
}

#[test]
fn single_label_model_refuses_label_sets() {
    let mut model = Model::new(
        Hyper::defaults(Learner::Logistic),
        FeatureConfig {
            bits: 8,
            ..Default::default()
        },
    );
    model.ensure_task(Task::SingleLabel);
    let a = model.intern("a").unwrap();
    let b = model.intern("b").unwrap();
    assert_eq!(
        model.learn(&SparseVec::default(), &[a, b]),
        Err(ModelError::NotSingleLabel(2))
    );
}

#[test]
fn multilabel_predicts_sets() {
    let cfg = FeatureConfig {
        bits: 16,
        char_ngrams: None,
        ..FeatureConfig::default()
    };
    for learner in [
        Learner::Perceptron,
        Learner::Logistic,
        Learner::Hinge,
        Learner::NaiveBayes,
    ] {
        let mut model = Model::new(Hyper::defaults(learner), cfg);
        model.ensure_task(Task::MultiLabel);
        let mut f = Featurizer::new(cfg);
        let mut x = SparseVec::default();
        let data: &[(&str, &[&str])] = &[
            ("wheat grain harvest", &["grain", "wheat"]),
            ("corn grain exports", &["grain", "corn"]),
            ("crude oil prices", &["crude"]),
            ("wheat exports fall", &["grain", "wheat"]),
            ("oil output cut", &["crude"]),
        ];
        for _ in 0..20 {
            for (text, labels) in data {
                f.featurize(text, &mut x);
                let ids: Vec<usize> = labels.iter().map(|l| model.intern(l).unwrap()).collect();
                model.learn(&x, &ids).unwrap();
            }
        }
        let mut out = Scored::default();
        f.featurize("wheat grain harvest", &mut x);
        model.predict(&x, &mut out);
        let mut got: Vec<&str> = out.labels.iter().map(|&c| model.labels().name(c)).collect();
        got.sort();
        assert_eq!(got, ["grain", "wheat"], "{learner}");
    }
}

#[test]
fn positive_score_orders_by_margin() {
    let m = Model::new(Hyper::defaults(Learner::Logistic), FeatureConfig::default());
    let scored = |raw: Vec<f32>| Scored {
        scores: raw.clone(),
        raw,
        labels: vec![1],
        ..Scored::default()
    };
    let s = scored(vec![1.0, 3.0]);
    assert_eq!(m.positive_score(&s, 1), 2.0);
    assert_eq!(m.positive_score(&s, 0), -2.0);
    // Probabilities that both round to 1 still rank by their margins.
    let (a, b) = (scored(vec![-30.0, 30.0]), scored(vec![-40.0, 40.0]));
    assert!(m.positive_score(&b, 1) > m.positive_score(&a, 1));
}

#[test]
fn one_class_known_is_the_evidence_of_its_examples_not_a_certainty() {
    let mut f = Featurizer::new(FeatureConfig::default());
    let mut m = Model::new(Hyper::defaults(Learner::Logistic), FeatureConfig::default());
    let mut x = SparseVec::default();
    f.featurize("cheap pills now", &mut x);
    let mut out = Scored::default();
    let spam = m.intern("spam").unwrap();
    let mut margins = Vec::new();
    let mut last = 0.0;
    for n in 1..=3 {
        m.learn(&x, &[spam]).unwrap();
        m.predict(&x, &mut out);
        m.margins(&out, &mut margins);
        // Laplace's rule of succession: (n + 1) / (n + 2), log-odds ln(n + 1).
        let p = (n as f32 + 1.0) / (n as f32 + 2.0);
        assert!((out.scores[0] - p).abs() < 1e-6, "{} {p}", out.scores[0]);
        assert!((margins[0] - (n as f32 + 1.0).ln()).abs() < 1e-6);
        assert!(margins[0] > last);
        last = margins[0];
    }
}

#[test]
fn a_scoring_copy_scores_the_same_in_less_memory() {
    let bytes = |m: &Model| match m.state() {
        State::Linear(w) => (w.bytes(), w.is_sparse()),
        State::NaiveBayes(_) => (0, false),
    };
    for learner in [Learner::Logistic, Learner::Hinge, Learner::Perceptron] {
        for average in [false, true] {
            // Dense, then the same model's weights moved to sparse rows.
            for memory in [weights::DEFAULT_BUDGET, 1 << 20] {
                let hyper = Hyper {
                    average,
                    ..Hyper::defaults(learner)
                };
                let (mut model, mut f) = train_with(hyper, DATA, 3);
                model.set_limits(Limits {
                    memory,
                    ..Limits::default()
                });
                let copy = model.scoring_copy();
                let ((kept, sparse), (copied, copy_sparse)) = (bytes(&model), bytes(&copy));
                let case = format!("{learner}, average {average}, sparse {sparse}");
                assert_eq!(sparse, memory < weights::DEFAULT_BUDGET, "{case}");
                assert_eq!(copy_sparse, sparse, "{case}");
                let adagrad = model.hyper().schedule == Schedule::AdaGrad;
                assert_eq!(copied < kept, adagrad, "{case}: {copied} bytes against {kept}");
                let (mut x, mut a, mut b) = (SparseVec::default(), Scored::default(), Scored::default());
                for (text, _) in DATA.iter().chain(&[("free lunch at the match", "")]) {
                    f.featurize(text, &mut x);
                    model.predict(&x, &mut a);
                    copy.predict(&x, &mut b);
                    assert_eq!((&a.raw, &a.labels), (&b.raw, &b.labels), "{case} on {text:?}");
                    assert!(a.raw.iter().any(|&r| r != 0.0), "{case}: no weights left for {text:?}");
                }
            }
        }
    }
}
