//! What a replica needs to mirror its learner's sparse rows exactly: the
//! learner's pruning, noted as it happens and replayed from the threshold
//! a delta carries, and a row cut back to the classes the learner's
//! holds (pruning may have dropped some of a row learning then changed).
//! And an arena that follows the model a replica holds, not the budget.

use super::SparseRows;

/// A count kept to save work, not part of what the rows hold: equal to
/// any other.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Bookkeeping(pub(super) usize);

impl PartialEq for Bookkeeping {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl SparseRows {
    /// The highest `|v|` at or below which entries were dropped since the
    /// last call (`None`: none were), and a clean slate.
    pub fn take_pruned_at(&mut self) -> Option<f32> {
        self.pruned_at.take()
    }

    /// Drops every entry whose `|v|` is at or below `t` (a learner's
    /// pruning replayed; nothing for a negative or NaN `t`); how many.
    pub fn prune_at_or_below(&mut self, t: f32) -> u64 {
        if t.is_nan() || t < 0.0 {
            return 0;
        }
        let dropped = self.compact_below(t);
        // Replayed, not the replica's own: nothing to pass on.
        self.pruned_at = None;
        dropped
    }

    /// Reclaims the arena's garbage (the old places of rows that grew)
    /// once it is over a fifth of the arena, and hands the pages past the
    /// compacted end back to the OS. Without it the garbage waits until
    /// the arena reaches the budget, so a replica applying deltas would
    /// hold the budget's whole arena whatever its model's size. The
    /// garbage is counted (a pass over every bucket) only once the arena
    /// has grown by a sixteenth since the last count, so that a delta's
    /// cost follows its rows, not the model's.
    pub fn tidy(&mut self) {
        let len = self.len();
        if len <= self.tidied_at.0 + self.tidied_at.0 / 16 {
            return;
        }
        self.tidied_at.0 = len;
        let need = self.compacted_len();
        if len <= need + need / 4 {
            return;
        }
        self.compact_below(-1.0);
        self.tidied_at.0 = self.len();
        crate::hugepages::release_spare(&mut self.data);
        crate::hugepages::release_spare(&mut self.cold);
    }

    /// Leaves `bucket` only its entries of `classes` (ascending), in
    /// place (the row keeps its room).
    pub fn keep_classes(&mut self, bucket: usize, classes: &[u32]) {
        let r = self.range(bucket);
        let (mut w, mut i) = (r.start, 0);
        for e in r {
            let c = self.class(e);
            while classes.get(i).is_some_and(|&k| k < c) {
                i += 1;
            }
            if classes.get(i) == Some(&c) {
                self.move_entry(e, w);
                w += 1;
            }
        }
        self.heads[bucket].len = (w - self.heads[bucket].off as usize) as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::SparseRows;

    fn row(r: &SparseRows, b: usize) -> Vec<(u32, f32)> {
        r.range(b).map(|e| (r.class(e), r.get(e, 0))).collect()
    }

    /// A learner's pruning, replayed on a copy taken before it, leaves the
    /// same rows; the threshold is taken once.
    #[test]
    fn pruning_replayed_from_its_threshold_matches() {
        let mut learner = SparseRows::new(8, 1, 1000);
        for b in 0..8 {
            for c in 0..6 {
                let e = learner.entry(b, c);
                learner.set(e, 0, ((b * 7 + c as usize * 13) % 17) as f32 - 8.0);
            }
        }
        let mut replica = learner.clone();
        assert_eq!(learner.take_pruned_at(), None);
        learner.set_max_entries(30);
        let t = learner.take_pruned_at().expect("the budget pruned");
        assert_eq!(learner.take_pruned_at(), None, "taken once");
        assert!(replica.prune_at_or_below(t) > 0);
        for b in 0..8 {
            assert_eq!(row(&replica, b), row(&learner, b), "bucket {b}");
        }
        assert_eq!(replica.take_pruned_at(), None, "a replay is not passed on");
        assert_eq!(replica.prune_at_or_below(-1.0), 0);
    }

    /// Rows that grew leave garbage; tidying slides it away once it is a
    /// fifth of the arena, and the rows read as before.
    #[test]
    fn tidying_reclaims_the_garbage_of_grown_rows() {
        let mut r = SparseRows::new(64, 2, 1 << 20);
        for c in 0..16 {
            for b in 0..64 {
                let e = r.entry(b, c);
                r.set(e, 0, (b * 100 + c as usize) as f32);
                r.set(e, 1, c as f32);
            }
        }
        let before: Vec<_> = (0..64).map(|b| row(&r, b)).collect();
        let grown = r.len();
        r.tidy();
        assert!(r.len() < grown, "{} entries, {grown} before", r.len());
        assert_eq!(r.len(), 64 * 16, "rows of 16 fill their room");
        assert_eq!((0..64).map(|b| row(&r, b)).collect::<Vec<_>>(), before);
        let e = r.find(5, 3).unwrap();
        assert_eq!(r.get(e, 1), 3.0);
        r.tidy();
        assert_eq!(r.len(), 64 * 16, "no garbage: nothing to do");
    }

    #[test]
    fn a_row_keeps_only_the_classes_given() {
        let mut r = SparseRows::new(2, 1, 100);
        for c in [1, 3, 5, 7] {
            let e = r.entry(0, c);
            r.set(e, 0, c as f32);
        }
        r.keep_classes(0, &[0, 3, 4, 7, 9]);
        assert_eq!(row(&r, 0), vec![(3, 3.0), (7, 7.0)]);
        // The row grows again from there.
        let e = r.entry(0, 5);
        r.set(e, 0, 0.5);
        assert_eq!(row(&r, 0), vec![(3, 3.0), (5, 0.5), (7, 7.0)]);
        r.keep_classes(0, &[]);
        assert!(row(&r, 0).is_empty());
        r.keep_classes(1, &[2]);
        assert!(row(&r, 1).is_empty());
    }
}
