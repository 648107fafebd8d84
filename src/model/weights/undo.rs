//! Steps taken back: the opposite of an AdaGrad, AROW or plain step on one
//! coordinate, for a label that is replaced or forgotten (see
//! `model::lesson`). A coordinate the memory budget has dropped since is
//! left as it is: nothing of the step is left there to take back.

use super::Weights;

impl Weights {
    /// The entry of (`bucket`, `class`) as an index into the dense buffer
    /// or the sparse arena, without adding one; `None` for class 0 of a
    /// mirrored pair (class 1's step carried it) or a dropped entry.
    fn existing(&self, bucket: u32, class: usize) -> Option<usize> {
        if self.implied(class) || bucket as usize >= self.buckets() {
            return None;
        }
        match &self.sparse {
            Some(sp) => sp.find(bucket as usize, class as u32),
            None => Some(self.at(bucket, class).0),
        }
    }

    /// Slot `s` of entry `e` (dense: slot `s` of the buffer).
    fn slot(&self, e: usize, s: usize) -> f32 {
        match &self.sparse {
            Some(sp) => sp.get(e, s),
            None => self.buf[e + self.cap * s],
        }
    }

    fn set_slot(&mut self, e: usize, s: usize, v: f32) {
        match &mut self.sparse {
            Some(sp) => sp.set(e, s, v),
            None => self.buf[e + self.cap * s] = v,
        }
    }

    /// Adds `delta` to the true weight of entry `e` in this step.
    fn add_entry(&mut self, e: usize, delta: f32) {
        let lazy = self.lazy();
        match &mut self.sparse {
            Some(sp) => lazy.add(sp, e, delta),
            None => self.add_at(e, delta),
        }
    }

    /// Takes back an AdaGrad step of gradient `g` (times the feature's
    /// value) at `rate` on (`bucket`, `class`): the step is taken again,
    /// negated, at the coordinate's sum now, and `g^2` leaves the sum. A
    /// sum is order-free, so it is then what it would be had the step
    /// never been taken; the weight is, where no later step touched the
    /// coordinate (a word of that message alone), and otherwise within
    /// the shrink of the rate since.
    pub fn adagrad_undo(&mut self, bucket: u32, class: usize, rate: f32, beta: f32, g: f32) {
        let Some(e) = self.existing(bucket, class) else {
            return;
        };
        let s = self.sums_slot();
        let sum = self.slot(e, s);
        let denom = beta + sum.sqrt();
        if denom > 0.0 {
            self.add_entry(e, -rate * g / denom);
        }
        self.set_slot(e, s, (sum - g * g).max(0.0));
    }

    /// Takes back an AROW step ([`Weights::arow_add`]) of `step` that
    /// added `precision`: the precision before it, and the move it made at
    /// that precision's variance.
    pub fn arow_undo(&mut self, bucket: u32, class: usize, step: f32, precision: f32) {
        let Some(e) = self.existing(bucket, class) else {
            return;
        };
        let s = self.sums_slot();
        let before = (self.slot(e, s) - precision).max(0.0);
        self.set_slot(e, s, before);
        self.add_entry(e, -step / (1.0 + before));
    }

    /// Takes back a plain step of `delta` on (`bucket`, `class`).
    pub fn undo_add(&mut self, bucket: u32, class: usize, delta: f32) {
        if let Some(e) = self.existing(bucket, class) {
            self.add_entry(e, -delta);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::SparseVec;

    fn x(entries: &[(u32, f32)]) -> SparseVec {
        let mut x = SparseVec::default();
        for &(i, v) in entries {
            x.idx.push(i);
            x.val.push(v);
        }
        x
    }

    /// An AdaGrad step taken back leaves the sums as they were and, where
    /// no other step touched a coordinate, its weight too; on a shared
    /// coordinate the weight is back within the rate's shrink.
    #[test]
    fn an_adagrad_step_taken_back_leaves_the_coordinates_as_they_were() {
        for sparse in [false, true] {
            let mut w = Weights::new(64, 3, false, true);
            if sparse {
                w.set_budget(2500);
            }
            assert_eq!(w.sparse().is_some(), sparse);
            let other = x(&[(1, 1.0), (2, 0.5)]);
            w.adagrad_step(&other, &[(0, 0.7), (2, -0.7)], 0.5, 0.01);
            let before: Vec<f32> = (0..4)
                .flat_map(|b| (0..3).map(move |c| (b, c)))
                .map(|(b, c)| w.get(b, c))
                .collect();
            let mine = x(&[(2, 1.0), (3, 2.0)]);
            let active = [(1, 0.4), (2, -0.4)];
            w.adagrad_step(&mine, &active, 0.5, 0.01);
            for (f, v) in mine.iter() {
                for &(c, g) in &active {
                    w.adagrad_undo(f, c, 0.5, 0.01, g * v);
                }
            }
            let after: Vec<f32> = (0..4)
                .flat_map(|b| (0..3).map(move |c| (b, c)))
                .map(|(b, c)| w.get(b, c))
                .collect();
            for (i, (a, b)) in before.iter().zip(&after).enumerate() {
                // Bucket 3 is this message's alone: exact; bucket 2 shared.
                let tol = if i / 3 == 3 { 1e-6 } else { 0.1 };
                assert!((a - b).abs() <= tol, "sparse {sparse}, {i}: {a} then {b}");
            }
            assert_eq!(w.get(3, 1), 0.0, "sparse {sparse}");
            // A step on the coordinate now is as large as the first one was.
            let first = w.get(3, 2);
            w.adagrad_add(3, 2, 0.5, 0.01, -0.8);
            assert!((w.get(3, 2) - first + 0.5 * 0.8 / (0.01 + 0.8)).abs() < 1e-5);
        }
    }

    #[test]
    fn a_mirrored_pair_takes_its_step_back_through_class_1() {
        let mut w = Weights::new(8, 0, false, true);
        w.add_class_mirrored();
        w.add_class_mirrored();
        w.adagrad_step(&x(&[(4, 1.0)]), &[(1, 0.9)], 0.5, 0.01);
        assert!(w.get(4, 0) < 0.0 && w.get(4, 1) > 0.0);
        w.adagrad_undo(4, 0, 0.5, 0.01, -0.9);
        w.adagrad_undo(4, 1, 0.5, 0.01, 0.9);
        assert_eq!((w.get(4, 0).abs(), w.get(4, 1)), (0.0, 0.0));
    }
}
