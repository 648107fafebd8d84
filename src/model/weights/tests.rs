//! Tests of the parent module.

use super::*;
use proptest::prelude::*;

fn sv(pairs: &[(u32, f32)]) -> SparseVec {
    SparseVec {
        idx: pairs.iter().map(|p| p.0).collect(),
        val: pairs.iter().map(|p| p.1).collect(),
        head: Vec::new(),
        bytes: Vec::new(),
        personal: 0,
    }
}

/// One random step: a decay and some sparse updates.
#[derive(Clone, Debug)]
struct Step {
    decay: f64,
    updates: Vec<(u32, usize, f32)>,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let update = (0u32..8, 0usize..3, -2.0f32..2.0);
    let step = (prop_oneof![Just(0.0), 0.0f64..0.3], prop::collection::vec(update, 0..4))
        .prop_map(|(decay, updates)| Step { decay, updates });
    prop::collection::vec(step, 1..60)
}

proptest! {
    /// The lazy average equals the plain mean of the weights after every step.
    #[test]
    fn lazy_average_equals_naive_average(steps in steps()) {
        let (buckets, classes) = (8, 3);
        let mut lazy = Weights::new(buckets, classes, true, false);
        let mut naive = vec![0.0f64; buckets * classes];
        let mut sum = vec![0.0f64; buckets * classes];
        for step in &steps {
            lazy.begin_step(step.decay);
            for w in &mut naive { *w *= 1.0 - step.decay; }
            for &(b, c, d) in &step.updates {
                lazy.add(b, c, d);
                naive[b as usize * classes + c] += d as f64;
            }
            lazy.end_step();
            for (s, w) in sum.iter_mut().zip(&naive) { *s += w; }
        }
        let t = steps.len() as f64;
        for b in 0..buckets as u32 {
            for c in 0..classes {
                let i = b as usize * classes + c;
                let want = sum[i] / t;
                let got = lazy.get_averaged(b, c) as f64;
                prop_assert!((got - want).abs() <= 1e-4 * (1.0 + want.abs()), "avg {b},{c}: {got} vs {want}");
                let now = lazy.get(b, c) as f64;
                prop_assert!((now - naive[i]).abs() <= 1e-4 * (1.0 + naive[i].abs()), "now {b},{c}: {now} vs {}", naive[i]);
            }
        }
        // Scoring with the average is the dot product with the averaged weights.
        let x = sv(&[(1, 0.5), (3, -2.0), (7, 1.0)]);
        let mut out = [0.0f32; 3];
        lazy.scores_averaged(&x, &mut out);
        for c in 0..classes {
            let want: f64 = x.iter().map(|(b, v)| v as f64 * sum[b as usize * classes + c] / t).sum();
            prop_assert!((out[c] as f64 - want).abs() <= 1e-3 * (1.0 + want.abs()));
        }
    }
}

#[test]
fn strong_decay_rescales_without_losing_the_average() {
    let mut w = Weights::new(4, 1, true, false);
    for _ in 0..200 {
        w.begin_step(0.2);
        w.add(2, 0, 1.0);
        w.end_step();
    }
    // The fixed point of w <- 0.8 w + 1 is 5.
    assert!((w.get(2, 0) - 5.0).abs() < 1e-3);
    let avg = w.get_averaged(2, 0);
    assert!(avg > 4.5 && avg < 5.0, "average {avg}");
}

#[test]
fn adding_a_class_keeps_existing_weights() {
    let mut w = Weights::new(4, 2, true, true);
    w.begin_step(0.0);
    w.add(1, 0, 1.0);
    w.add(3, 1, -2.0);
    w.adagrad_add(2, 1, 1.0, 1.0, 3.0);
    w.end_step();
    w.add_class();
    assert_eq!(w.classes(), 3);
    assert_eq!(w.get(1, 0), 1.0);
    assert_eq!(w.get(3, 1), -2.0);
    assert_eq!(w.get(3, 2), 0.0);
    assert_eq!(w.get_averaged(3, 1), -2.0);
    // rate * g / (1 + sqrt(g^2)) = 3 / 4, and the sum of squares moved along.
    assert_eq!(w.get(2, 1), 0.75);
    w.adagrad_add(2, 1, 1.0, 1.0, 4.0);
    assert_eq!(w.get(2, 1), 0.75 + 4.0 / (1.0 + 5.0));
}

proptest! {
    /// Two classes moved by opposite steps, kept as a mirrored pair, are
    /// the same weights as kept in two columns: current and averaged
    /// weights, sums of squares, scores; and after a third class splits
    /// the pair, both go on alike.
    #[test]
    fn mirrored_pair_equals_two_columns(steps in steps(), averaged in any::<bool>(), third in 0usize..5) {
        let mut mirror = Weights::new(8, 1, averaged, true);
        let mut two = Weights::new(8, 1, averaged, true);
        mirror.add_class_mirrored();
        two.add_class();
        prop_assert!(mirror.mirrored() && !two.mirrored());
        let x = sv(&[(1, 0.5), (3, -2.0), (7, 1.0)]);
        for (t, step) in steps.iter().enumerate() {
            if t == third {
                mirror.add_class();
                two.add_class();
                prop_assert!(!mirror.mirrored());
            }
            for w in [&mut mirror, &mut two] {
                w.begin_step(step.decay);
                for &(b, c, d) in &step.updates {
                    match (w.classes(), c % 2) {
                        // Opposite steps on the pair, as its gradients are.
                        (2, _) => {
                            w.adagrad_add(b, 1, 0.5, 0.01, d);
                            w.adagrad_add(b, 0, 0.5, 0.01, -d);
                            w.add(b, 0, -d);
                            w.add(b, 1, d);
                        }
                        (_, _) => w.adagrad_add(b, c, 0.5, 0.01, d),
                    }
                }
                w.end_step();
            }
        }
        let close = |a: f32, b: f32| (a - b).abs() <= 1e-5 * (1.0 + b.abs());
        for b in 0..8u32 {
            for c in 0..two.classes() {
                prop_assert!(close(mirror.get(b, c), two.get(b, c)), "w {b},{c}: {} vs {}", mirror.get(b, c), two.get(b, c));
                prop_assert!(close(mirror.get_averaged(b, c), two.get_averaged(b, c)), "avg {b},{c}");
                prop_assert!(close(mirror.variance(b, c), two.variance(b, c)), "sums {b},{c}");
            }
        }
        let (mut sm, mut st) = ([0.0f32; 3], [0.0f32; 3]);
        mirror.scores_averaged(&x, &mut sm);
        two.scores_averaged(&x, &mut st);
        for c in 0..two.classes() {
            prop_assert!((sm[c] - st[c]).abs() <= 1e-4 * (1.0 + st[c].abs()), "score {c}: {} vs {}", sm[c], st[c]);
        }
        // The checkpoint layout (one column while mirrored) restores the same weights.
        let parts = mirror.to_parts();
        prop_assert_eq!(parts.buf.len(), 8 * mirror.compact_stride());
        let back = Weights::from_parts(parts).unwrap();
        prop_assert_eq!(back.mirrored(), mirror.mirrored());
        for b in 0..8u32 {
            for c in 0..two.classes() {
                prop_assert_eq!(back.get_averaged(b, c), mirror.get_averaged(b, c));
                prop_assert_eq!(back.variance(b, c), mirror.variance(b, c));
            }
        }
    }
}

/// The row-at-a-time AdaGrad step is the per-coordinate one, bit for
/// bit, with and without averaging, under decay, with a zero gradient.
#[test]
fn adagrad_step_equals_adagrad_add() {
    for averaged in [false, true] {
        let mut a = Weights::new(64, 3, averaged, true);
        let mut b = a.clone();
        for t in 0..50u32 {
            let x = SparseVec {
                idx: vec![t % 64, (t * 7 + 3) % 64, (t * 13 + 5) % 64],
                val: vec![0.5, 1.25, 0.1],
                head: Vec::new(),
                bytes: Vec::new(),
                personal: 0,
            };
            let grad = [0.3 - (t % 5) as f32 * 0.2, 0.0, -0.7 + (t % 3) as f32 * 0.5];
            a.begin_step(1e-3);
            b.begin_step(1e-3);
            let active: Vec<(usize, f32)> = grad
                .iter()
                .enumerate()
                .filter(|g| *g.1 != 0.0)
                .map(|(c, &g)| (c, g))
                .collect();
            a.adagrad_step(&x, &active, 0.5, 0.01);
            for (f, val) in x.iter() {
                for (c, &g) in grad.iter().enumerate() {
                    if g != 0.0 {
                        b.adagrad_add(f, c, 0.5, 0.01, g * val);
                    }
                }
            }
            a.end_step();
            b.end_step();
        }
        assert_eq!(a, b);
    }
}

/// A model of 40 classes (past [`DENSE_MAX_CLASSES`], and enough for rows
/// to fill): sparse once a budget is set.
fn forty(averaged: bool) -> (Weights, Weights) {
    let dense = Weights::new(8, 40, averaged, true);
    let mut sparse = dense.clone();
    sparse.set_budget(DEFAULT_BUDGET);
    (dense, sparse)
}

proptest! {
    /// The sparse layout holds the same weights as dense rows under every
    /// kind of step (plain, AdaGrad, row-at-a-time AdaGrad, AROW, decay
    /// with its rescales), whether it went sparse at the start or midway,
    /// and restores them from its checkpoint parts.
    #[test]
    fn sparse_rows_equal_dense_rows(steps in steps(), averaged in any::<bool>(), switch in 0usize..8) {
        let (mut dense, mut sparse) = forty(averaged);
        if switch > 0 {
            sparse = dense.clone();
        }
        for (t, step) in steps.iter().enumerate() {
            if t == switch {
                sparse.set_budget(DEFAULT_BUDGET);
                prop_assert!(sparse.sparse().is_some());
            }
            for w in [&mut dense, &mut sparse] {
                w.begin_step(step.decay);
                for &(b, c, d) in &step.updates {
                    let c = c * 7 % 40;
                    match (b + c as u32) % 4 {
                        0 => w.add(b, c, d),
                        1 => w.adagrad_add(b, c, 0.5, 0.01, d),
                        2 => w.arow_add(b, c, d, d * d),
                        _ => {
                            let x = sv(&[(b, 1.0), ((b + 3) % 8, -0.5)]);
                            w.adagrad_step(&x, &[(1, d), (c.clamp(2, 38), -d), (39, 0.25)], 0.5, 0.01);
                        }
                    }
                }
                w.end_step();
            }
        }
        if switch >= steps.len() {
            // Moved to sparse rows after the last step.
            sparse.set_budget(DEFAULT_BUDGET);
        }
        prop_assert!(sparse.sparse().is_some() && dense.sparse().is_none());
        let close = |a: f32, b: f32| (a - b).abs() <= 1e-5 * (1.0 + b.abs());
        let back = Weights::from_parts(sparse.to_parts()).unwrap();
        for b in 0..8u32 {
            for c in 0..40 {
                prop_assert!(close(sparse.get(b, c), dense.get(b, c)), "w {b},{c}: {} vs {}", sparse.get(b, c), dense.get(b, c));
                prop_assert!(close(sparse.get_averaged(b, c), dense.get_averaged(b, c)), "avg {b},{c}");
                prop_assert!(close(sparse.variance(b, c), dense.variance(b, c)), "sums {b},{c}");
                prop_assert_eq!(back.get_averaged(b, c), sparse.get_averaged(b, c));
                prop_assert_eq!(back.variance(b, c), sparse.variance(b, c));
            }
        }
        let x = sv(&[(1, 0.5), (3, -2.0), (7, 1.0)]);
        let (mut sd, mut ss) = ([0.0f32; 40], [0.0f32; 40]);
        for avg in [false, true] {
            if avg {
                dense.scores_averaged(&x, &mut sd);
                sparse.scores_averaged(&x, &mut ss);
            } else {
                dense.scores(&x, &mut sd);
                sparse.scores(&x, &mut ss);
            }
            for c in 0..40 {
                prop_assert!((sd[c] - ss[c]).abs() <= 1e-4 * (1.0 + sd[c].abs()), "score {c} (avg {avg}): {} vs {}", sd[c], ss[c]);
            }
        }
    }
}

/// A budget smaller than what is learned: the arena stays within it, the
/// smallest weights go first and are counted, the largest stay.
#[test]
fn a_full_budget_drops_the_smallest_weights() {
    let buckets = 1024;
    let mut w = Weights::new(buckets, 200, false, true);
    let budget = SparseRows::index_bytes(buckets) + 4000 * SparseRows::entry_bytes(2);
    w.set_budget(budget);
    for t in 0..40_000u32 {
        let (b, c) = (t.wrapping_mul(2_654_435_761) % buckets as u32, (t % 200) as usize);
        // Class 7's weights are the largest.
        let g = if c == 7 { 50.0 } else { 1.0 + (t % 13) as f32 * 0.01 };
        w.begin_step(0.0);
        w.add(b, c, g);
        w.end_step();
        assert!(
            w.bytes() <= budget,
            "{} bytes over a budget of {budget} at step {t}",
            w.bytes()
        );
        if t % 97 == 0 {
            // Every row, pruned to nothing or not, still reads (a row
            // emptied by one compaction once pointed past the next one's end).
            let all = SparseVec {
                idx: (0..buckets as u32).collect(),
                val: vec![1.0; buckets],
                head: Vec::new(),
                bytes: Vec::new(),
                personal: 0,
            };
            w.scores(&all, &mut [0.0; 200]);
        }
    }
    let sp = w.sparse().unwrap();
    assert!(sp.pruned() > 0);
    // Class 7's last weights (learned after any pruning) are all kept.
    for t in 40_000 - 2_000..40_000u32 {
        if t % 200 == 7 {
            let b = t.wrapping_mul(2_654_435_761) % buckets as u32;
            assert!(w.get(b, 7) >= 50.0, "bucket {b}");
        }
    }
}

/// A dense model whose classes outgrow its budget moves to sparse rows
/// with the same weights; a mirrored pair stays dense.
#[test]
fn classes_past_the_dense_bound_move_to_sparse_rows() {
    let mut w = Weights::new(16, 1, false, true);
    w.set_budget(DEFAULT_BUDGET);
    w.add_class_mirrored();
    w.adagrad_add(3, 1, 0.5, 0.01, 1.0);
    assert!(w.sparse().is_none() && w.mirrored());
    let before = w.get(3, 0);
    for k in 3..=DENSE_MAX_CLASSES {
        w.add_class();
        assert!(w.sparse().is_none(), "dense at {k} classes");
    }
    w.add_class();
    assert!(w.sparse().is_some());
    assert_eq!(w.get(3, 0), before);
    assert_eq!(w.get(3, 1), -before);
    assert_eq!(w.sparse().unwrap().entries(), 2);
}

/// A row that holds more than half of many classes fills up, and scores
/// by the plain loop what the scattered one gave.
#[test]
fn rows_fill_and_score_the_same() {
    let (mut dense, mut sparse) = forty(false);
    let x = sv(&[(3, 1.0), (5, 0.5)]);
    for t in 0..30usize {
        for w in [&mut dense, &mut sparse] {
            w.begin_step(0.0);
            w.adagrad_step(&x, &[(t, 1.0), (39, -0.5)], 0.5, 0.01);
            w.end_step();
        }
    }
    let sp = sparse.sparse().unwrap();
    assert_eq!(sp.range(3).len(), 40, "bucket 3 holds 31 of 40 classes: filled");
    let (mut sd, mut ss) = ([0.0f32; 40], [0.0f32; 40]);
    dense.scores(&x, &mut sd);
    sparse.scores(&x, &mut ss);
    assert_eq!(sd, ss);
    // A new class makes the row short of full again: the scattered loop.
    dense.add_class();
    sparse.add_class();
    let (mut sd, mut ss) = ([0.0f32; 41], [0.0f32; 41]);
    dense.scores(&x, &mut sd);
    sparse.scores(&x, &mut ss);
    assert_eq!(sd, ss);
}
