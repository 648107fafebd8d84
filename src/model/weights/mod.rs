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

use crate::features::SparseVec;
use crate::hugepages::zeroed;

/// How many features ahead [`Weights::prefetch`] reaches.
const PREFETCH_AHEAD: usize = 12;

/// Below this scale, `s` is folded into `v` to keep precision.
const MIN_SCALE: f64 = 1e-5;

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
}

/// The raw parts of [`Weights`], for checkpoints.
#[derive(Clone, Debug, PartialEq)]
pub struct WeightsParts {
    pub buckets: usize,
    pub classes: usize,
    pub buf: Vec<f32>,
    pub scale: f64,
    pub bsum: f64,
    pub steps: u64,
    pub averaged: bool,
    pub adagrad: bool,
    pub mirrored: bool,
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
        }
    }

    fn slots(&self) -> usize {
        1 + self.averaged as usize + self.adagrad as usize
    }

    /// Floats per bucket row.
    fn stride(&self) -> usize {
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

    /// Adds a class with zero weights (its average and AdaGrad sums are zero too).
    pub fn add_class(&mut self) {
        if self.mirrored {
            // Two columns again, room for four classes: class 1's column
            // moves to column 0, is copied to column 1, and column 0 takes
            // class 0's sign.
            let slots = self.slots();
            self.buf = relayout(&self.buf, self.buckets, slots, 1, 4, 1);
            self.cap = 4;
            self.mirrored = false;
            for row in self.buf.chunks_exact_mut(slots * 4) {
                for s in 0..slots {
                    if row[s * 4] != 0.0 {
                        row[s * 4 + 1] = row[s * 4];
                    }
                }
                negate_class_0(row, 4, self.averaged);
            }
            self.classes += 1;
            return;
        }
        if self.classes == self.cap {
            // One column for the first class (a binary task's pair needs no more).
            let new_cap = (2 * self.cap).max(1);
            self.buf = relayout(&self.buf, self.buckets, self.slots(), self.cap, new_cap, self.classes);
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
        let slots = self.slots();
        if self.cap != 1 {
            self.buf = relayout(&self.buf, self.buckets, slots, self.cap, 1, 1);
            self.cap = 1;
        }
        for row in self.buf.chunks_exact_mut(slots) {
            negate_class_0(row, 1, self.averaged);
        }
        self.mirrored = true;
        self.classes = 2;
    }

    /// Scores of every class with the current weights, into `out`.
    #[inline]
    pub fn scores(&self, x: &SparseVec, out: &mut [f32]) {
        let k = self.classes;
        let stride = self.stride();
        out[..k].fill(0.0);
        if self.mirrored {
            let mut s1 = 0.0;
            for (j, (i, val)) in x.iter().enumerate() {
                self.prefetch(x, j + PREFETCH_AHEAD, stride);
                s1 += val * self.buf[i as usize * stride];
            }
            let s1 = s1 * self.scale as f32;
            out[0] = -s1;
            out[1] = s1;
            return;
        }
        if k == 2 {
            // Two columns, without the inner loop.
            let (mut s0, mut s1) = (0.0, 0.0);
            for (j, (i, val)) in x.iter().enumerate() {
                self.prefetch(x, j + PREFETCH_AHEAD, stride);
                let base = i as usize * stride;
                s0 += val * self.buf[base];
                s1 += val * self.buf[base + 1];
            }
            out[0] = s0;
            out[1] = s1;
        } else {
            for (j, (i, val)) in x.iter().enumerate() {
                self.prefetch(x, j + PREFETCH_AHEAD, stride);
                let base = i as usize * stride;
                let row = &self.buf[base..base + k];
                for (o, w) in out[..k].iter_mut().zip(row) {
                    *o += val * w;
                }
            }
        }
        let s = self.scale as f32;
        for o in &mut out[..k] {
            *o *= s;
        }
    }

    /// Scores of every class with the averaged weights (the current ones when
    /// not averaging or before the first step).
    #[inline]
    pub fn scores_averaged(&self, x: &SparseVec, out: &mut [f32]) {
        if !self.averaged || self.steps == 0 {
            return self.scores(x, out);
        }
        let k = self.classes;
        let stride = self.stride();
        out[..k].fill(0.0);
        let b = self.bsum as f32;
        let inv_t = (1.0 / self.steps as f64) as f32;
        if self.mirrored {
            let mut s1 = 0.0;
            for (j, (i, val)) in x.iter().enumerate() {
                self.prefetch(x, j + PREFETCH_AHEAD, stride);
                let base = i as usize * stride;
                s1 += val * (self.buf[base + 1] + b * self.buf[base]);
            }
            out[0] = -(s1 * inv_t);
            out[1] = s1 * inv_t;
            return;
        }
        for (j, (i, val)) in x.iter().enumerate() {
            self.prefetch(x, j + PREFETCH_AHEAD, stride);
            let base = i as usize * stride;
            let v = &self.buf[base..base + k];
            let a = &self.buf[base + self.cap..base + self.cap + k];
            for c in 0..k {
                out[c] += val * (a[c] + b * v[c]);
            }
        }
        for o in &mut out[..k] {
            *o *= inv_t;
        }
    }

    /// Hints the CPU to fetch `bucket`'s row.
    #[inline(always)]
    pub fn prefetch_row(&self, bucket: u32) {
        crate::features::prefetch(&self.buf, bucket as usize * self.stride());
    }

    /// Hints the CPU to fetch the row of the `j`-th feature of `x` ahead of
    /// use: rows are scattered at random over megabytes, so each one is a
    /// cache miss, and issuing them early overlaps their latencies.
    #[inline(always)]
    fn prefetch(&self, x: &SparseVec, j: usize, stride: usize) {
        if let Some(&i) = x.idx.get(j) {
            crate::features::prefetch(&self.buf, i as usize * stride);
        }
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
        let (i, _) = self.at(bucket, class);
        self.add_at(i, delta);
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
        let (i, _) = self.at(bucket, class);
        let gi = i + self.cap * (1 + self.averaged as usize);
        let sum = self.buf[gi] + g * g;
        self.buf[gi] = sum;
        let denom = beta + sum.sqrt();
        // A zero denominator means a zero gradient: no step (not 0/0).
        if denom > 0.0 {
            self.add_at(i, rate * g / denom);
        }
    }

    /// [`Weights::adagrad_add`] for every feature of `x` and every class
    /// with a non-zero `grad` (the step's gradient is `grad[c] * value`).
    pub fn adagrad_step(&mut self, x: &SparseVec, grad: &[f32], rate: f32, beta: f32) {
        // Class 0 of a mirrored pair moves with class 1: skip it up front.
        let first = self.mirrored as usize;
        for (f, val) in x.iter() {
            for (c, &g) in grad[..self.classes].iter().enumerate().skip(first) {
                if g != 0.0 {
                    self.adagrad_add(f, c, rate, beta, g * val);
                }
            }
        }
    }

    /// AROW's variance of (`bucket`, `class`): `1 / (1 + precision gained)`,
    /// kept in the same slot AdaGrad uses for its sums.
    #[inline]
    pub fn variance(&self, bucket: u32, class: usize) -> f32 {
        let gi = self.at(bucket, class).0 + self.cap * (1 + self.averaged as usize);
        1.0 / (1.0 + self.buf[gi])
    }

    /// An AROW step on (`bucket`, `class`): moves by `step * variance` and
    /// adds `precision` to the coordinate's precision.
    #[inline]
    pub fn arow_add(&mut self, bucket: u32, class: usize, step: f32, precision: f32) {
        if self.implied(class) {
            return;
        }
        let (i, _) = self.at(bucket, class);
        let gi = i + self.cap * (1 + self.averaged as usize);
        let variance = 1.0 / (1.0 + self.buf[gi]);
        self.buf[gi] += precision;
        self.add_at(i, step * variance);
    }

    /// The true weight of (`bucket`, `class`) now.
    #[inline]
    pub fn get(&self, bucket: u32, class: usize) -> f32 {
        let (i, sign) = self.at(bucket, class);
        (sign as f64 * self.buf[i] as f64 * self.scale) as f32
    }

    /// The averaged weight of (`bucket`, `class`).
    pub fn get_averaged(&self, bucket: u32, class: usize) -> f32 {
        if !self.averaged || self.steps == 0 {
            return self.get(bucket, class);
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

    /// The rows without spare room: `[bucket][slot][column]`, `slots *
    /// columns` floats per row (the checkpoint layout; one column for a
    /// mirrored pair).
    pub fn compact(&self) -> Vec<f32> {
        relayout(
            &self.buf,
            self.buckets,
            self.slots(),
            self.cap,
            self.columns(),
            self.columns(),
        )
    }

    /// Floats per row of [`Weights::compact`].
    pub fn compact_stride(&self) -> usize {
        self.slots() * self.columns()
    }

    pub fn to_parts(&self) -> WeightsParts {
        WeightsParts {
            buckets: self.buckets,
            classes: self.classes,
            buf: self.compact(),
            scale: self.scale,
            bsum: self.bsum,
            steps: self.steps,
            averaged: self.averaged,
            adagrad: self.adagrad,
            mirrored: self.mirrored,
        }
    }

    /// Rebuilds weights from checkpointed parts; `None` if the sizes disagree.
    pub fn from_parts(p: WeightsParts) -> Option<Self> {
        let slots = 1 + p.averaged as usize + p.adagrad as usize;
        if p.mirrored && p.classes != 2 {
            return None;
        }
        let columns = if p.mirrored { 1 } else { p.classes };
        let n = p.buckets.checked_mul(columns)?.checked_mul(slots)?;
        if p.buf.len() != n || p.scale.is_nan() || p.scale <= 0.0 {
            return None;
        }
        Some(Weights {
            buckets: p.buckets,
            classes: p.classes,
            cap: columns,
            buf: p.buf,
            scale: p.scale,
            inv_scale: (1.0 / p.scale) as f32,
            bsum_f32: p.bsum as f32,
            bsum: p.bsum,
            steps: p.steps,
            averaged: p.averaged,
            adagrad: p.adagrad,
            mirrored: p.mirrored,
        })
    }
}

/// Negates class 0's `v` and `A` in a row with `cap` floats per slot (its
/// sums of squares keep their sign): the step between a class and its
/// mirror. Zeros are left unwritten, so pages never touched stay unbacked.
fn negate_class_0(row: &mut [f32], cap: usize, averaged: bool) {
    for s in 0..1 + averaged as usize {
        let x = &mut row[s * cap];
        if *x != 0.0 {
            *x = -*x;
        }
    }
}

/// Copies `[bucket][slot][class]` rows with `from` floats per slot into rows
/// with `to` per slot, keeping the first `k` classes of each slot.
fn relayout(buf: &[f32], buckets: usize, slots: usize, from: usize, to: usize, k: usize) -> Vec<f32> {
    let mut out = zeroed(buckets * slots * to);
    if k > 0 && from > 0 {
        for (dst, src) in out.chunks_exact_mut(slots * to).zip(buf.chunks_exact(slots * from)) {
            // Rows never touched stay unwritten: the new buffer's pages are
            // only backed where there are weights to copy.
            if src.iter().all(|&x| x == 0.0) {
                continue;
            }
            for s in 0..slots {
                dst[s * to..s * to + k].copy_from_slice(&src[s * from..s * from + k]);
            }
        }
    }
    out
}

/// Re-lays a `[bucket][k]` buffer out as `[bucket][k + 1]` with a zero new
/// column (naive Bayes counts).
pub fn widen_buffer(old: &[f32], buckets: usize, k: usize) -> Vec<f32> {
    let mut out = zeroed(buckets * (k + 1));
    if k > 0 {
        for (dst, src) in out.chunks_exact_mut(k + 1).zip(old.chunks_exact(k)) {
            dst[..k].copy_from_slice(src);
        }
    }
    out
}

#[cfg(test)]
mod tests;
