//! Scoring with [`Weights`]: every class's score of a document, with the
//! current or the averaged weights, in each layout (a mirrored pair, dense
//! rows, sparse rows), and the prefetching that hides the rows' latency.

use super::{PREFETCH_AHEAD, Weights};
use crate::features::SparseVec;

impl Weights {
    /// Scores of every class with the current weights, into `out`.
    #[inline]
    pub fn scores(&self, x: &SparseVec, out: &mut [f32]) {
        let k = self.classes;
        let stride = self.stride();
        out[..k].fill(0.0);
        if let Some(sp) = &self.sparse {
            sp.accumulate(x, None, &mut out[..k]);
        } else if self.mirrored {
            let mut s1 = 0.0;
            for (j, (i, val)) in x.iter().enumerate() {
                self.prefetch(x, j + PREFETCH_AHEAD, stride);
                s1 += val * self.buf[i as usize * stride];
            }
            let s1 = s1 * self.scale as f32;
            out[0] = -s1;
            out[1] = s1;
            return;
        } else if k == 2 {
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
        } else if k > 0 {
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
        if let Some(sp) = &self.sparse {
            sp.accumulate(x, Some(b), &mut out[..k]);
        } else if self.mirrored {
            let mut s1 = 0.0;
            for (j, (i, val)) in x.iter().enumerate() {
                self.prefetch(x, j + PREFETCH_AHEAD, stride);
                let base = i as usize * stride;
                s1 += val * (self.buf[base + 1] + b * self.buf[base]);
            }
            out[0] = -(s1 * inv_t);
            out[1] = s1 * inv_t;
            return;
        } else if k > 0 {
            for (j, (i, val)) in x.iter().enumerate() {
                self.prefetch(x, j + PREFETCH_AHEAD, stride);
                let base = i as usize * stride;
                let v = &self.buf[base..base + k];
                let a = &self.buf[base + self.cap..base + self.cap + k];
                for c in 0..k {
                    out[c] += val * (a[c] + b * v[c]);
                }
            }
        }
        for o in &mut out[..k] {
            *o *= inv_t;
        }
    }

    /// Hints the CPU to fetch `bucket`'s row.
    #[inline(always)]
    pub fn prefetch_row(&self, bucket: u32) {
        match &self.sparse {
            Some(sp) => sp.prefetch(bucket as usize),
            None => crate::features::prefetch(&self.buf, bucket as usize * self.stride()),
        }
    }

    /// Hints the CPU to fetch the row of the `j`-th feature of `x` ahead of
    /// use: rows are scattered at random over megabytes, so each one is a
    /// cache miss, and issuing them early overlaps their latencies.
    #[inline(always)]
    fn prefetch(&self, x: &SparseVec, j: usize, stride: usize) {
        if let Some(&i) = x.idx.get(j)
            && stride > 0
        {
            crate::features::prefetch(&self.buf, i as usize * stride);
        }
    }
}
