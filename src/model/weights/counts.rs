//! The model's document counts (IDF) carried in the weight rows.
//!
//! Scoring and learning a feature reads its weight row, and IDF weighting
//! reads its document count, each at a random place in tables of
//! megabytes: a cache miss each. So each dense row takes its bucket's count
//! as one more cell after the weights (the count's bits in an f32): a
//! mirrored pair's row (the spam filter's: `v` and AdaGrad's sum) becomes
//! three floats, and a feature costs one miss instead of two.
//!
//! A new linear model's rows carry the counts from the start
//! ([`Weights::carry_counts`]), and every re-layout for more classes keeps
//! them. Sparse rows do not: the counts step out when the rows become
//! sparse, and the model takes them back into its own table
//! ([`Weights::take_released_counts`]). A restored model's counts move in
//! once ([`Weights::adopt_counts`]). Checkpoints and the model topic see
//! the same counts either way: the model reads them through [`CountCells`].

use super::Weights;
use super::dense::relayout;
use crate::features::{CountCells, CountCellsMut, prefetch};
use crate::hugepages::zeroed;

/// The largest count a row's cell holds: the bits of the largest finite
/// f32, so a cell is never a NaN pattern (which would make equal rows
/// compare unequal). Two billion documents with one bucket; the IDF of such
/// a bucket is 1 whatever its exact count.
pub const MAX_ROW_COUNT: u32 = 0x7F7F_FFFF;

impl Weights {
    /// Gives each dense row a document count at its end, all zero (a new
    /// model's); nothing when the rows cannot hold them. Rows without room
    /// for a class get room for one, so the first class needs no re-layout
    /// (a pass over every row).
    pub fn carry_counts(&mut self) {
        if !self.can_hold_counts() {
            return;
        }
        if self.cap == 0 {
            self.cap = 1;
            self.buf = zeroed(self.buckets * (self.slots() + 1));
        } else {
            self.buf = self.with_tail(0, 1);
        }
        self.counts = true;
    }

    /// Whether the rows carry the document counts.
    pub fn holds_counts(&self) -> bool {
        self.counts
    }

    /// Whether the rows can take document counts: dense, and without them.
    pub fn can_hold_counts(&self) -> bool {
        self.sparse.is_none() && !self.counts
    }

    /// Moves `df` (a count per bucket) into the rows, when they can hold
    /// it ([`Weights::can_hold_counts`]) and it has a count per bucket;
    /// otherwise hands it back.
    pub fn adopt_counts(&mut self, df: Vec<u32>) -> Result<(), Vec<u32>> {
        if !self.can_hold_counts() || df.len() != self.buckets {
            return Err(df);
        }
        let cells = self.weight_cells();
        let mut buf = self.with_tail(0, 1);
        for (b, &d) in df.iter().enumerate() {
            // Counts never written stay unwritten: pages are only backed
            // where there is something to copy.
            if d != 0 {
                buf[b * (cells + 1) + cells] = f32::from_bits(d.min(MAX_ROW_COUNT));
            }
        }
        self.buf = buf;
        self.counts = true;
        Ok(())
    }

    /// Takes the document counts out of the rows, or `None` when they hold
    /// none.
    pub fn release_counts(&mut self) -> Option<Vec<u32>> {
        if !self.counts {
            return None;
        }
        let df = self.counts_in_rows();
        self.buf = self.with_tail(1, 0);
        self.counts = false;
        Some(df)
    }

    /// The rows re-laid out from `from` cells after the weights to `to`
    /// (0 or 1: without or with the count), the count kept when both have it.
    fn with_tail(&self, from: usize, to: usize) -> Vec<f32> {
        relayout(
            &self.buf,
            self.buckets,
            self.slots(),
            (self.cap, from),
            (self.cap, to),
            self.cap,
        )
    }

    /// The counts the rows carry, a copy (the rows must carry them).
    pub(super) fn counts_in_rows(&self) -> Vec<u32> {
        let (cells, stride) = (self.weight_cells(), self.stride());
        (0..self.buckets)
            .map(|b| self.buf[b * stride + cells].to_bits())
            .collect()
    }

    /// The counts the rows gave up when they became sparse, for the model
    /// to keep in its own table.
    pub fn take_released_counts(&mut self) -> Option<Vec<u32>> {
        self.released.take()
    }

    /// The counts in the rows, to read.
    pub fn row_counts(&self) -> Option<RowCounts<'_>> {
        self.counts.then(|| RowCounts {
            cells: &self.buf,
            stride: self.stride(),
            at: self.weight_cells(),
        })
    }

    /// The counts in the rows, to change.
    pub fn row_counts_mut(&mut self) -> Option<RowCountsMut<'_>> {
        let (stride, at) = (self.stride(), self.weight_cells());
        self.counts.then(|| RowCountsMut {
            cells: &mut self.buf,
            stride,
            at,
        })
    }
}

/// Document counts read from the weight rows.
#[derive(Clone, Copy, Debug)]
pub struct RowCounts<'a> {
    cells: &'a [f32],
    /// Floats per row.
    stride: usize,
    /// The count's place in a row.
    at: usize,
}

impl CountCells for RowCounts<'_> {
    #[inline(always)]
    fn count(&self, bucket: u32) -> u32 {
        self.cells
            .get(bucket as usize * self.stride + self.at)
            .map_or(0, |c| c.to_bits())
    }

    #[inline(always)]
    fn prefetch(&self, bucket: u32) {
        prefetch(self.cells, bucket as usize * self.stride);
    }

    fn buckets(&self) -> usize {
        self.cells.len() / self.stride.max(1)
    }
}

/// Document counts changed in the weight rows.
#[derive(Debug)]
pub struct RowCountsMut<'a> {
    cells: &'a mut [f32],
    stride: usize,
    at: usize,
}

impl CountCellsMut for RowCountsMut<'_> {
    #[inline(always)]
    fn update(&mut self, bucket: u32, f: impl FnOnce(u32) -> u32) {
        if let Some(c) = self.cells.get_mut(bucket as usize * self.stride + self.at) {
            *c = f32::from_bits(f(c.to_bits()).min(MAX_ROW_COUNT));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::{CountCells, CountCellsMut, SparseVec};
    use proptest::prelude::*;

    const BUCKETS: usize = 16;

    /// A count for each bucket, some zero, some small (denormal bits),
    /// one past the cells' cap.
    fn counts() -> Vec<u32> {
        (0..BUCKETS as u32)
            .map(|b| match b % 4 {
                0 => 0,
                1 => b,
                2 => 1 << 20,
                _ => u32::MAX,
            })
            .collect()
    }

    fn expected(b: usize) -> u32 {
        counts()[b].min(MAX_ROW_COUNT)
    }

    fn read(w: &Weights) -> Vec<u32> {
        let rows = w.row_counts().expect("the rows hold the counts");
        (0..BUCKETS as u32).map(|b| rows.count(b)).collect()
    }

    fn write(w: &mut Weights) {
        let mut rows = w.row_counts_mut().expect("the rows hold the counts");
        for (b, &c) in counts().iter().enumerate() {
            rows.update(b as u32, |_| c);
        }
    }

    /// One AdaGrad step of both weights on the same features.
    fn step(ws: [&mut Weights; 2], t: u32) {
        let x = SparseVec {
            idx: vec![t % 16, (t * 7 + 3) % 16, 5],
            val: vec![0.5, -1.0, 0.25],
            head: Vec::new(),
            bytes: Vec::new(),
            personal: 0,
        };
        for w in ws {
            let active: Vec<(usize, f32)> = (0..w.classes()).map(|c| (c, c as f32 - 0.7)).collect();
            w.begin_step(0.01);
            w.adagrad_step(&x, &active, 0.3, 0.01);
            w.end_step();
        }
    }

    proptest! {
        /// Counts in the rows survive every re-layout (the first class, the
        /// mirrored pair, its split by a third class, more columns), and the
        /// weights beside them learn, score and checkpoint exactly as
        /// weights without counts do; rows made sparse give them back.
        #[test]
        fn counts_ride_through_every_relayout(averaged in any::<bool>(), classes in 2usize..20) {
            let mut with = Weights::new(BUCKETS, 0, averaged, true);
            with.carry_counts();
            let mut without = Weights::new(BUCKETS, 0, averaged, true);
            write(&mut with);
            for k in 1..=classes {
                for w in [&mut with, &mut without] {
                    w.set_budget(BUCKETS * 4 * 3 * 20);
                    if k == 2 { w.add_class_mirrored() } else { w.add_class() }
                }
                step([&mut with, &mut without], k as u32);
                prop_assert_eq!(with.is_sparse(), without.is_sparse());
                if with.is_sparse() {
                    prop_assert!(!with.holds_counts());
                    let back = with.take_released_counts().expect("released once");
                    prop_assert_eq!(back, (0..BUCKETS).map(expected).collect::<Vec<_>>());
                    prop_assert!(with.take_released_counts().is_none());
                    break;
                }
                prop_assert_eq!(read(&with), (0..BUCKETS).map(expected).collect::<Vec<_>>());
                let parts = with.to_parts();
                prop_assert_eq!(&parts.buf, &without.to_parts().buf, "the checkpoint layout has no counts");
                prop_assert_eq!(parts.scale, without.to_parts().scale);
                let copy = with.scoring_copy();
                prop_assert_eq!(read(&copy), read(&with));
                for b in 0..BUCKETS as u32 {
                    for c in 0..k {
                        prop_assert_eq!(with.get_averaged(b, c).to_bits(), without.get_averaged(b, c).to_bits());
                        prop_assert_eq!(copy.get_averaged(b, c).to_bits(), without.get_averaged(b, c).to_bits());
                    }
                }
            }
        }
    }

    /// Counts adopted by learned rows, then released, come back as they
    /// were, and the weights are untouched by the round trip.
    #[test]
    fn adopted_counts_release_as_they_were() {
        let mut w = Weights::new(BUCKETS, 0, false, true);
        let mut plain = Weights::new(BUCKETS, 0, false, true);
        for k in 0..2 {
            w.add_class();
            plain.add_class();
            step([&mut w, &mut plain], k);
        }
        let df: Vec<u32> = (0..BUCKETS).map(expected).collect();
        assert_eq!(
            w.adopt_counts(vec![1; 3]),
            Err(vec![1; 3]),
            "a count per bucket, or none"
        );
        assert_eq!(w.adopt_counts(df.clone()), Ok(()));
        assert_eq!(w.adopt_counts(df.clone()), Err(df.clone()), "one home");
        assert_eq!(read(&w), df);
        assert_eq!(w.release_counts(), Some(df));
        assert_eq!(w.release_counts(), None);
        assert_eq!(w, plain);
    }
}
