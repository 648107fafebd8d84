//! Weights shared by every linear learner: one flat buffer laid out
//! `[bucket][class]`, so scoring a feature for all classes reads one cache
//! line; a global scale for lazy L2 weight decay; and lazy averaging.
//!
//! # The representation
//!
//! The true weights after step t are `w_t = s_t * v_t`: `s` is a scalar
//! (decay multiplies it, never touching `v`) and `v` changes only where a
//! step's gradient is non-zero. The running sum of all weights so far is kept
//! as `S_t = A_t + B_t * v_t`, with `A` a vector and `B` a scalar. A step
//! first decays (`s_{t+1} = s_t (1 - decay)`), then changes `v` by a sparse
//! `delta`, then `S_{t+1} = S_t + w_{t+1}`, which works out to
//!
//! ```text
//! A_{t+1} = A_t - B_t * delta      (sparse, like delta)
//! B_{t+1} = B_t + s_{t+1}          (a scalar)
//! ```
//!
//! and the average after T steps is `S_T / T`. Without decay (`s = 1`),
//! `B_t = t` and this is Daumé's trick: `mean = v - (sum_t (t-1) g_t) / T`.
//! `tests::lazy_average_equals_naive_average` checks it against the naive sum.
//!
//! # Two classes, one column
//!
//! A single-label task with two classes (spam or not: the common case) moves
//! its two weight vectors by opposite steps: the softmax, hinge and
//! perceptron gradients of class 0 are minus those of class 1, and the
//! AdaGrad and AROW sums of both grow by the same squares. So the pair is
//! kept as one column, class 1's, and class 0 is its mirror (`v0 = -v1`,
//! `A0 = -A1`, equal sums): half the memory, half the work per feature.
//! Updates addressed to class 0 of a mirrored pair are dropped, since class
//! 1's update carries the pair. A third class splits the pair into two
//! columns again. `tests::mirrored_pair_equals_two_columns` checks the two
//! representations against each other.
//!
//! # Few classes dense, many classes sparse
//!
//! Dense rows cost buckets x classes floats per slot whatever is learned:
//! at 2^20 buckets, 118 Reuters labels took 1.9 GB and 1,000 topics 12.5
//! GB. A model has a memory budget (`--model-memory`); the rows stay dense
//! while the dense table, with the copy its next doubling needs, fits in
//! half of it and the classes are at most [`DENSE_MAX_CLASSES`], and move
//! to [`SparseRows`] (only the non-zero classes of each bucket, within the
//! budget) past that. The measurements behind the line are in
//! docs/many-classes.md.

mod counts;
mod dense;
mod parts;
mod pieces;
mod scoring;
mod sparse;
mod undo;

pub use counts::{MAX_ROW_COUNT, RowCounts, RowCountsMut};
pub use dense::widen_buffer;
pub use parts::WeightsParts;
pub use sparse::{MAX_SLOTS, SparseRows};

use crate::features::SparseVec;
use crate::hugepages::zeroed;
use dense::{negate_class_0, relayout};

/// How many features ahead [`Weights::prefetch`] reaches.
const PREFETCH_AHEAD: usize = 12;

/// Below this scale, `s` is folded into `v` to keep precision.
const MIN_SCALE: f64 = 1e-5;

/// The default model memory budget (`--model-memory`).
pub const DEFAULT_BUDGET: usize = 256 << 20;

/// Most classes kept in dense rows (see the module's doc).
pub const DENSE_MAX_CLASSES: usize = 16;

/// Lazily decayed and lazily averaged weights.
///
/// One flat buffer, row per bucket; a row holds `v` for every class, then
/// (when averaging) `A` for every class, then (with AdaGrad) the sums of
/// squared gradients for every class. Everything one feature touches in a
/// step is in one row, so a sparse step costs one cache miss per feature.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    /// Number of buckets (a power of two).
    buckets: usize,
    /// Number of classes.
    classes: usize,
    /// Room for classes in each slot of a row (grows by doubling, so adding
    /// classes one by one re-lays the buffer out only log2(K) times).
    cap: usize,
    /// The rows: `[bucket][slot][class]`, `cap` floats per slot.
    buf: Vec<f32>,
    /// `s`: the global scale of `v`.
    scale: f64,
    /// `1 / s` and `B` as f32, cached for the per-feature update.
    inv_scale: f32,
    bsum_f32: f32,
    /// `B`: the scalar part of the running sum.
    bsum: f64,
    /// `T`: steps taken.
    steps: u64,
    /// Whether the `A` slot is kept.
    averaged: bool,
    /// Whether the AdaGrad slot is kept.
    adagrad: bool,
    /// Two classes kept as one column (class 1's; class 0 is its negation).
    mirrored: bool,
    /// The sparse layout (then `buf` is empty and `cap` 0).
    sparse: Option<SparseRows>,
    /// Whether each dense row ends with a document count (the model's IDF
    /// counts, an f32's bits), so one feature touches one cache line: see
    /// `counts.rs`.
    counts: bool,
    /// Counts taken out of the rows when they became sparse, until the
    /// model takes them back ([`Weights::take_released_counts`]).
    released: Option<Vec<u32>>,
    /// The memory budget in bytes.
    budget: usize,
}

impl Weights {
    pub fn new(buckets: usize, classes: usize, averaged: bool, adagrad: bool) -> Self {
        let slots = 1 + averaged as usize + adagrad as usize;
        Weights {
            buckets,
            classes,
            cap: classes,
            buf: zeroed(buckets * classes * slots),
            scale: 1.0,
            inv_scale: 1.0,
            bsum_f32: 0.0,
            bsum: 0.0,
            steps: 0,
            averaged,
            adagrad,
            mirrored: false,
            sparse: None,
            counts: false,
            released: None,
            budget: DEFAULT_BUDGET,
        }
    }

    /// Sets the memory budget (bytes): a dense table over it becomes
    /// sparse, a sparse one is pruned to it.
    pub fn set_budget(&mut self, bytes: usize) {
        self.budget = bytes;
        if bytes == usize::MAX {
            // Unbounded (a model only read): kept as it is.
            return;
        }
        let max = self.max_entries();
        if let Some(s) = &mut self.sparse {
            s.set_max_entries(max);
        } else if !self.mirrored && !self.dense_fits(self.cap, 0) {
            self.make_sparse();
        }
    }

    /// Entries the budget holds in the sparse layout.
    fn max_entries(&self) -> usize {
        self.budget.saturating_sub(SparseRows::index_bytes(self.buckets)) / SparseRows::entry_bytes(self.slots())
    }

    /// Whether dense rows with room for `cap` classes, beside a copy with
    /// room for `old` (a doubling's), fit in half the budget.
    fn dense_fits(&self, cap: usize, old: usize) -> bool {
        let bytes = |c: usize| self.buckets.saturating_mul(c).saturating_mul(self.slots() * 4);
        cap <= DENSE_MAX_CLASSES && bytes(cap).saturating_add(bytes(old)) <= self.budget / 2
    }

    /// Moves the dense rows into the sparse layout (not a mirrored pair).
    fn make_sparse(&mut self) {
        debug_assert!(!self.mirrored);
        // Sparse rows carry no counts: they wait for the model to take them
        // (read out of the rows in place: no copy of the rows without them).
        if self.counts {
            self.released = Some(self.counts_in_rows());
            self.counts = false;
        }
        let (slots, cap, k) = (self.slots(), self.cap, self.classes);
        let stride = (slots * cap + self.released.is_some() as usize).max(1);
        let entries = self.buf.chunks_exact(stride).enumerate().flat_map(|(b, row)| {
            (0..k).filter_map(move |c| {
                let mut vals = [0.0; MAX_SLOTS];
                for (s, v) in vals[..slots].iter_mut().enumerate() {
                    *v = row[s * cap + c];
                }
                vals.iter().any(|&x| x != 0.0).then_some((b as u32, c as u32, vals))
            })
        });
        let max = self.max_entries();
        // The entries come in (bucket, class) order from a well-formed
        // buffer, so `from_entries` takes them.
        let rows = match cap {
            0 => None,
            _ => SparseRows::from_entries(self.buckets, slots, max, entries),
        };
        self.sparse = Some(rows.unwrap_or_else(|| SparseRows::new(self.buckets, slots, max)));
        self.buf = Vec::new();
        self.cap = 0;
    }

    /// The sparse rows, when the model has many classes.
    pub fn sparse(&self) -> Option<&SparseRows> {
        self.sparse.as_ref()
    }

    /// Weights held: sparse entries, or dense floats (what a full
    /// version's size follows).
    pub fn held(&self) -> usize {
        match &self.sparse {
            Some(s) => s.entries(),
            None => self.buf.len(),
        }
    }

    /// Bytes the weights hold.
    pub fn bytes(&self) -> usize {
        match &self.sparse {
            Some(s) => s.bytes(),
            None => self.buf.len() * 4,
        }
    }

    fn slots(&self) -> usize {
        1 + self.averaged as usize + self.adagrad as usize
    }

    /// Floats per bucket row: the weights' cells, and the document count.
    fn stride(&self) -> usize {
        self.weight_cells() + self.counts as usize
    }

    /// The weights' floats at the start of each row.
    fn weight_cells(&self) -> usize {
        self.slots() * self.cap
    }

    pub fn classes(&self) -> usize {
        self.classes
    }

    pub fn buckets(&self) -> usize {
        self.buckets
    }

    pub fn steps(&self) -> u64 {
        self.steps
    }

    pub fn averaged(&self) -> bool {
        self.averaged
    }

    /// Whether two classes are kept as one column (see the module's doc).
    pub fn mirrored(&self) -> bool {
        self.mirrored
    }

    /// Columns stored per slot: the classes, or one for a mirrored pair.
    fn columns(&self) -> usize {
        if self.mirrored { 1 } else { self.classes }
    }

    /// Adds a class with zero weights (its average and AdaGrad sums are
    /// zero too).
    pub fn add_class(&mut self) {
        if self.sparse.is_some() {
            self.classes += 1;
            return;
        }
        if self.mirrored {
            // Two columns again, room for four classes: class 1's column
            // moves to column 0, is copied to column 1, and column 0 takes
            // class 0's sign.
            let (slots, tail) = (self.slots(), self.counts as usize);
            self.buf = relayout(&self.buf, self.buckets, slots, (1, tail), (4, tail), 1);
            self.cap = 4;
            self.mirrored = false;
            for row in self.buf.chunks_exact_mut(slots * 4 + tail) {
                for s in 0..slots {
                    if row[s * 4] != 0.0 {
                        row[s * 4 + 1] = row[s * 4];
                    }
                }
                negate_class_0(row, 4, self.averaged);
            }
            self.classes += 1;
            if !self.dense_fits(4, 0) {
                self.make_sparse();
            }
            return;
        }
        if self.classes == self.cap {
            // One column for the first class (a binary task's pair needs no more).
            let new_cap = (2 * self.cap).max(1);
            if !self.dense_fits(new_cap, self.cap) {
                self.make_sparse();
                self.classes += 1;
                return;
            }
            let tail = self.counts as usize;
            let (from, to) = ((self.cap, tail), (new_cap, tail));
            self.buf = relayout(&self.buf, self.buckets, self.slots(), from, to, self.classes);
            self.cap = new_cap;
        }
        self.classes += 1;
    }

    /// Adds the second class of a single-label task, whose two classes then
    /// move as a mirrored pair; with any other number of classes, the same
    /// as [`Weights::add_class`].
    pub fn add_class_mirrored(&mut self) {
        if self.classes != 1 {
            return self.add_class();
        }
        // Class 0's column becomes the pair's, negated: class 1 = -class 0.
        // (With one class nothing has been learned, so this is all zeros in
        // practice; zeros are left unwritten, and their pages untouched.)
        let (slots, tail) = (self.slots(), self.counts as usize);
        if self.cap != 1 {
            self.buf = relayout(&self.buf, self.buckets, slots, (self.cap, tail), (1, tail), 1);
            self.cap = 1;
        }
        for row in self.buf.chunks_exact_mut(slots + tail) {
            negate_class_0(row, 1, self.averaged);
        }
        self.mirrored = true;
        self.classes = 2;
    }

    /// Starts a step: multiplies all weights by `1 - decay` (lazily).
    #[inline]
    pub fn begin_step(&mut self, decay: f64) {
        if decay > 0.0 {
            self.scale *= 1.0 - decay.min(0.999_999);
            if self.scale < MIN_SCALE {
                self.rescale();
            }
            self.inv_scale = (1.0 / self.scale) as f32;
        }
    }

    /// The index of (`bucket`, `class`)'s weight in `buf`, and the sign
    /// the stored value has (-1 for class 0 of a mirrored pair).
    #[inline(always)]
    fn at(&self, bucket: u32, class: usize) -> (usize, f32) {
        let row = bucket as usize * self.stride();
        match (self.mirrored, class) {
            (true, 0) => (row, -1.0),
            (true, _) => (row, 1.0),
            _ => (row + class, 1.0),
        }
    }

    /// Whether an update to `class` is dropped: class 0 of a mirrored pair
    /// moves with class 1 (see the module's doc).
    #[inline(always)]
    fn implied(&self, class: usize) -> bool {
        self.mirrored && class == 0
    }

    /// Adds `delta` to the true weight of (`bucket`, `class`) in this step
    /// (dropped for class 0 of a mirrored pair: class 1's update carries it).
    #[inline]
    pub fn add(&mut self, bucket: u32, class: usize, delta: f32) {
        if self.implied(class) {
            return;
        }
        let lazy = self.lazy();
        if let Some(sp) = &mut self.sparse {
            let e = sp.entry(bucket as usize, class as u32);
            lazy.add(sp, e, delta);
            return;
        }
        let (i, _) = self.at(bucket, class);
        self.add_at(i, delta);
    }

    /// The slot of AdaGrad's sums (AROW's precisions).
    fn sums_slot(&self) -> usize {
        1 + self.averaged as usize
    }

    /// What a step on a sparse entry needs of the scalars.
    #[inline(always)]
    fn lazy(&self) -> Lazy {
        Lazy {
            sums: self.sums_slot(),
            inv_scale: self.inv_scale,
            bsum: self.averaged.then_some(self.bsum_f32),
        }
    }

    #[inline]
    fn add_at(&mut self, i: usize, delta: f32) {
        // A multiply by the cached 1/s and B: no division on the hot path.
        let dv = delta * self.inv_scale;
        self.buf[i] += dv;
        if self.averaged {
            self.buf[i + self.cap] -= self.bsum_f32 * dv;
        }
    }

    /// An AdaGrad step on (`bucket`, `class`) for gradient `g`: adds `g^2` to
    /// the coordinate's sum and moves by `rate * g / (beta + sqrt(sum))`.
    #[inline]
    pub fn adagrad_add(&mut self, bucket: u32, class: usize, rate: f32, beta: f32, g: f32) {
        debug_assert!(self.adagrad);
        if self.implied(class) {
            return;
        }
        let lazy = self.lazy();
        if let Some(sp) = &mut self.sparse {
            let e = sp.entry(bucket as usize, class as u32);
            lazy.adagrad(sp, e, rate, beta, g);
            return;
        }
        self.adagrad_add_dense(bucket, class, rate, beta, g);
    }

    /// [`Weights::adagrad_add`] on dense rows, class 0 of a mirrored pair
    /// already left out: the spam filter's hot loop, without a branch on
    /// the layout per feature.
    #[inline(always)]
    fn adagrad_add_dense(&mut self, bucket: u32, class: usize, rate: f32, beta: f32, g: f32) {
        let (i, _) = self.at(bucket, class);
        let gi = i + self.cap * self.sums_slot();
        let sum = self.buf[gi] + g * g;
        self.buf[gi] = sum;
        let denom = beta + sum.sqrt();
        // A zero denominator means a zero gradient: no step (not 0/0).
        if denom > 0.0 {
            self.add_at(i, rate * g / denom);
        }
    }

    /// [`Weights::adagrad_add`] for every feature of `x` and every
    /// (class, gradient) of `active` (the step's gradient is `g * value`):
    /// the classes that move, so a step costs features x moving classes,
    /// not features x classes. `active` is in ascending class order.
    pub fn adagrad_step(&mut self, x: &SparseVec, active: &[(usize, f32)], rate: f32, beta: f32) {
        let (lazy, k) = (self.lazy(), self.classes);
        if let Some(sp) = &mut self.sparse {
            // Each feature's row gets its missing classes in one merge, then
            // both sorted lists are walked together: no search per class.
            for (f, val) in x.iter() {
                let mut r = sp.range(f as usize);
                if r.len() != k {
                    sp.ensure_row(f as usize, active.iter().map(|&(c, _)| c as u32));
                    r = sp.fill_row(f as usize, k);
                }
                // In a full row class c is the c-th entry.
                let full = r.len() == k;
                let mut e = r.start;
                for &(c, g) in active {
                    e = if full { r.start + c } else { sp.seek(e, r.end, c as u32) };
                    lazy.adagrad(sp, e, rate, beta, g * val);
                }
            }
            return;
        }
        // Class 0 of a mirrored pair moves with class 1: left out up front.
        let first = (self.mirrored && active.first().is_some_and(|a| a.0 == 0)) as usize;
        for (f, val) in x.iter() {
            for &(c, g) in &active[first..] {
                self.adagrad_add_dense(f, c, rate, beta, g * val);
            }
        }
    }

    /// AROW's variance of (`bucket`, `class`): `1 / (1 + precision gained)`,
    /// kept in the same slot AdaGrad uses for its sums.
    #[inline]
    pub fn variance(&self, bucket: u32, class: usize) -> f32 {
        if let Some(sp) = &self.sparse {
            let p = sp
                .find(bucket as usize, class as u32)
                .map_or(0.0, |e| sp.get(e, self.sums_slot()));
            return 1.0 / (1.0 + p);
        }
        let gi = self.at(bucket, class).0 + self.cap * self.sums_slot();
        1.0 / (1.0 + self.buf[gi])
    }

    /// An AROW step on (`bucket`, `class`): moves by `step * variance` and
    /// adds `precision` to the coordinate's precision.
    #[inline]
    pub fn arow_add(&mut self, bucket: u32, class: usize, step: f32, precision: f32) {
        if self.implied(class) {
            return;
        }
        let lazy = self.lazy();
        if let Some(sp) = &mut self.sparse {
            let e = sp.entry(bucket as usize, class as u32);
            let p = sp.get(e, lazy.sums);
            sp.set(e, lazy.sums, p + precision);
            lazy.add(sp, e, step * (1.0 / (1.0 + p)));
            return;
        }
        let (i, _) = self.at(bucket, class);
        let gi = i + self.cap * self.sums_slot();
        let variance = 1.0 / (1.0 + self.buf[gi]);
        self.buf[gi] += precision;
        self.add_at(i, step * variance);
    }

    /// The true weight of (`bucket`, `class`) now.
    #[inline]
    pub fn get(&self, bucket: u32, class: usize) -> f32 {
        if let Some(sp) = &self.sparse {
            let v = sp.find(bucket as usize, class as u32).map_or(0.0, |e| sp.get(e, 0));
            return (v as f64 * self.scale) as f32;
        }
        let (i, sign) = self.at(bucket, class);
        (sign as f64 * self.buf[i] as f64 * self.scale) as f32
    }

    /// The averaged weight of (`bucket`, `class`).
    pub fn get_averaged(&self, bucket: u32, class: usize) -> f32 {
        if !self.averaged || self.steps == 0 {
            return self.get(bucket, class);
        }
        if let Some(sp) = &self.sparse {
            let Some(e) = sp.find(bucket as usize, class as u32) else {
                return 0.0;
            };
            return ((sp.get(e, 1) as f64 + self.bsum * sp.get(e, 0) as f64) / self.steps as f64) as f32;
        }
        let (i, sign) = self.at(bucket, class);
        (sign as f64 * (self.buf[i + self.cap] as f64 + self.bsum * self.buf[i] as f64) / self.steps as f64) as f32
    }

    /// Ends a step: the weights now in force join the running sum.
    #[inline]
    pub fn end_step(&mut self) {
        self.bsum += self.scale;
        self.bsum_f32 = self.bsum as f32;
        self.steps += 1;
    }

    /// Folds the scale into `v` and the running sum into `A` (a dense pass,
    /// rare): afterwards `s = 1` and `B = 0`, so neither drifts toward the
    /// limits of floating point however long the stream.
    fn rescale(&mut self) {
        let s = self.scale as f32;
        let b = self.bsum as f32;
        let (k, cap, stride) = (self.columns(), self.cap, self.stride());
        let averaged = self.averaged;
        if let Some(sp) = &mut self.sparse {
            sp.rescale(s, averaged.then_some(b));
        }
        if stride > 0 {
            for row in self.buf.chunks_exact_mut(stride) {
                for c in 0..k {
                    if averaged {
                        row[cap + c] += b * row[c];
                    }
                    row[c] *= s;
                }
            }
        }
        self.bsum = 0.0;
        self.bsum_f32 = 0.0;
        self.scale = 1.0;
        self.inv_scale = 1.0;
    }
}

/// The scalars a step on a sparse entry reads (see [`Weights::lazy`]).
#[derive(Clone, Copy)]
struct Lazy {
    /// The slot of AdaGrad's sums (AROW's precisions).
    sums: usize,
    /// `1 / s`.
    inv_scale: f32,
    /// `B`, when averaging.
    bsum: Option<f32>,
}

impl Lazy {
    /// Adds `delta` to entry `e`'s true weight: `v += delta / s` and, when
    /// averaging, `A -= B delta / s` (the dense rows' `add_at`).
    #[inline(always)]
    fn add(self, sp: &mut SparseRows, e: usize, delta: f32) {
        let dv = delta * self.inv_scale;
        sp.set(e, 0, sp.get(e, 0) + dv);
        if let Some(b) = self.bsum {
            sp.set(e, 1, sp.get(e, 1) - b * dv);
        }
    }

    /// An AdaGrad step on entry `e` (the dense rows' `adagrad_add_dense`).
    #[inline(always)]
    fn adagrad(self, sp: &mut SparseRows, e: usize, rate: f32, beta: f32, g: f32) {
        let sum = sp.get(e, self.sums) + g * g;
        sp.set(e, self.sums, sum);
        let denom = beta + sum.sqrt();
        // A zero denominator means a zero gradient: no step (not 0/0).
        if denom > 0.0 {
            self.add(sp, e, rate * g / denom);
        }
    }
}

#[cfg(test)]
mod tests;
