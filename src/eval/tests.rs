//! Tests of the parent module.

use super::*;

#[test]
fn auc_matches_pair_counting() {
    let pairs = [
        (0.9, true),
        (0.8, false),
        (0.7, true),
        (0.7, false),
        (0.1, false),
        (0.95, true),
    ];
    // Brute force over positive-negative pairs, ties half.
    let mut wins = 0.0;
    let mut n = 0.0;
    for &(sp, p) in &pairs {
        for &(sn, q) in &pairs {
            if p && !q {
                n += 1.0;
                wins += if sp > sn {
                    1.0
                } else if sp == sn {
                    0.5
                } else {
                    0.0
                };
            }
        }
    }
    assert!((roc_auc(&pairs).unwrap() - wins / n).abs() < 1e-12);
    assert_eq!(roc_auc(&[(0.5, true)]), None);
}

#[test]
fn single_label_counts_and_window() {
    let mut m = Progressive::new(2, None);
    m.record(&["ham"], &[] as &[&str], Some(0.0));
    m.record(&["spam"], &["ham"], Some(0.2));
    m.record(&["spam"], &["spam"], Some(0.9));
    m.record(&["ham"], &["ham"], Some(0.1));
    let r = m.report();
    assert_eq!(r.examples, 4);
    assert_eq!(r.accuracy, 0.5);
    assert_eq!(r.positive_label.as_deref(), Some("spam"));
    // spam: tp 1, fn 1, fp 0; ham: tp 1, fp 1, fn 1 (the unpredicted one).
    let spam = &r.per_class.iter().find(|c| c.0 == "spam").unwrap().1;
    assert_eq!((spam.precision, spam.recall), (1.0, 0.5));
    let conf = r.confusion.unwrap();
    assert_eq!(conf.matrix, vec![vec![1, 0, 1], vec![1, 1, 0]]);
    assert_eq!(r.window.examples, 2);
    assert_eq!(r.window.accuracy, 1.0);
    // Scores: spam 0.2, 0.9; ham 0.0, 0.1: perfectly ranked.
    assert_eq!(r.roc_auc, Some(1.0));
    assert_eq!(m.window_roc_auc(), Some(1.0));
}

#[test]
fn multilabel_micro_and_subset_accuracy() {
    let mut m = Progressive::new(10, None);
    m.record(&["grain", "wheat"], &["grain"], None);
    m.record(&["crude"], &["crude"], None);
    m.record(&[] as &[&str], &["corn"], None);
    let r = m.report();
    assert!(r.confusion.is_none() && r.roc_auc.is_none());
    // tp 2, fp 1, fn 1 -> micro F1 = 4 / 6.
    assert!((r.micro_f1 - 4.0 / 6.0).abs() < 1e-12);
    assert!((r.accuracy - 1.0 / 3.0).abs() < 1e-12);
}

proptest::proptest! {
    /// The single-label shortcut of `Tally::count` counts exactly what
    /// the general way does, adding and taking away (the window).
    #[test]
    fn single_label_shortcut_counts_like_the_general_way(
        steps in proptest::collection::vec((0u32..4, proptest::option::of(0u32..4), proptest::prelude::any::<bool>()), 1..60),
    ) {
        let (mut fast, mut general) = (Tally::default(), Tally::default());
        fast.grow(4);
        general.grow(4);
        for (g, p, add) in steps {
            let o = Counted { gold: vec![g], predicted: p.into_iter().collect(), score: None };
            let sign = if add { 1 } else { -1 };
            fast.count(&o, true, sign);
            general.count_general(&o, true, sign);
        }
        proptest::prop_assert_eq!(fast, general);
    }
}
