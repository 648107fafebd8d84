//! The sparse arena's budget: compaction, pruning and what survives them.

use super::{RECLAIM_AT_LEAST, SparseRows};
use crate::features::SparseVec;

/// Rows pruned to nothing by one compaction still read after the next
/// one shrinks the arena below where they were (they once pointed past
/// its end).
#[test]
fn emptied_rows_survive_later_compactions() {
    let mut r = SparseRows::new(4, 2, 1000);
    for c in 0..8 {
        let e = r.entry(0, c);
        r.set(e, 0, (c + 1) as f32);
    }
    for c in 0..4 {
        let e = r.entry(1, c);
        r.set(e, 0, 0.001);
    }
    r.set_max_entries(10);
    assert_eq!(r.range(1).len(), 0, "bucket 1's tiny weights pruned first");
    assert!(r.pruned() >= 4);
    r.set_max_entries(4);
    let x = SparseVec {
        idx: vec![0, 1, 2, 3],
        val: vec![1.0; 4],
        head: Vec::new(),
        bytes: Vec::new(),
        personal: 0,
    };
    let mut out = [0.0; 8];
    r.accumulate(&x, None, &mut out);
    assert_eq!(out[7], 8.0, "the largest weight is kept");
    assert!(r.entries() <= 4, "{} entries", r.entries());
}

/// A full arena compacts its garbage while that frees a worthwhile share
/// of the budget, and prunes (without a compaction first) once it would
/// not.
#[test]
fn a_full_arena_compacts_while_it_pays_then_prunes() {
    let max = 64 * RECLAIM_AT_LEAST;
    let mut r = SparseRows::new(4096, 1, max);
    // A row of one entry that grows to two leaves one entry of garbage.
    let grown = |r: &mut SparseRows, b: usize| {
        for c in 0..2 {
            let e = r.entry(b, c);
            r.set(e, 0, 1.0 + b as f32);
        }
    };
    let mut b = 0;
    while r.len() + 2 <= max {
        grown(&mut r, b);
        b += 1;
    }
    grown(&mut r, b);
    assert_eq!(r.pruned(), 0, "half the arena was garbage: reclaimed");
    assert_eq!(r.entries(), 2 * (b + 1));
    // Little garbage (ten entries, under a 32nd), then full to the brim
    // with rows made whole at once.
    for _ in 0..10 {
        b += 1;
        grown(&mut r, b);
    }
    while r.len() + 2 <= max {
        b += 1;
        r.ensure_row(b, 0..2);
    }
    assert_eq!(r.pruned(), 0);
    r.ensure_row(b + 1, 0..2);
    assert!(r.pruned() > 0, "ten entries of garbage are not worth a compaction");
    assert!(r.entries() <= max / 2 + 2, "{} entries kept", r.entries());
}
