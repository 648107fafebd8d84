//! [`Weights`] in pieces, for checkpoints written and read as streams: the
//! scalars alone ([`Weights::meta`]), then the rows (dense) or entries
//! (sparse) a few thousand at a time, in the layout of
//! [`Weights::to_parts`], so neither the writer nor the reader holds a
//! second copy of the weights.

use std::ops::Range;

use super::{MAX_SLOTS, SparseRows, Weights, WeightsParts};
use crate::hugepages::zeroed;

impl Weights {
    /// [`Weights::to_parts`] without the weights: no rows, and when
    /// sparse an empty entry list; with how many entries there are.
    pub fn meta(&self) -> (WeightsParts, usize) {
        let entries = self.sparse.as_ref().map_or(0, |s| s.iter().count());
        let parts = WeightsParts {
            buckets: self.buckets,
            classes: self.classes,
            buf: Vec::new(),
            entries: self.sparse.as_ref().map(|_| (Vec::new(), Vec::new())),
            scale: self.scale,
            bsum: self.bsum,
            steps: self.steps,
            averaged: self.averaged,
            adagrad: self.adagrad,
            mirrored: self.mirrored,
        };
        (parts, entries)
    }

    /// The buckets of the dense layout (0 when sparse).
    pub fn dense_rows(&self) -> usize {
        if self.sparse.is_some() { 0 } else { self.buckets }
    }

    /// Appends the non-zero rows of `range` (dense layout) in the compact
    /// form of [`Weights::compact`]: their bucket ids to `rows`, their
    /// [`Weights::compact_stride`] floats each to `values`.
    pub fn compact_rows(&self, range: Range<usize>, rows: &mut Vec<u32>, values: &mut Vec<f32>) {
        if self.sparse.is_some() || self.cap == 0 {
            return;
        }
        let (slots, cap, columns, stride) = (self.slots(), self.cap, self.columns(), self.stride());
        let end = range.end.min(self.buckets);
        for b in range.start..end {
            // The weights' cells: not the document count a row may end with.
            let row = &self.buf[b * stride..b * stride + slots * cap];
            if row.iter().all(|&x| x == 0.0) {
                continue;
            }
            rows.push(b as u32);
            for s in 0..slots {
                values.extend_from_slice(&row[s * cap..s * cap + columns]);
            }
        }
    }

    /// Calls `each` with up to `n` sparse entries at a time, as
    /// [`Weights::to_parts`] lists them: keys (bucket << 32 | class) and
    /// `slots` values each.
    pub fn entry_chunks<E, F>(&self, n: usize, mut each: F) -> Result<(), E>
    where
        F: FnMut(&[u64], &[f32]) -> Result<(), E>,
    {
        let Some(sp) = &self.sparse else {
            return Ok(());
        };
        let slots = self.slots();
        let (mut keys, mut values) = (Vec::with_capacity(n), Vec::with_capacity(n * slots));
        for (b, c, e) in sp.iter() {
            keys.push((b as u64) << 32 | c as u64);
            values.extend((0..slots).map(|s| sp.get(e, s)));
            if keys.len() == n {
                each(&keys, &values)?;
                keys.clear();
                values.clear();
            }
        }
        if keys.is_empty() { Ok(()) } else { each(&keys, &values) }
    }

    /// Puts compact rows (as [`Weights::compact_rows`] gives them) into
    /// weights rebuilt from [`Weights::meta`]; `None` if the lengths
    /// disagree or a row is out of range.
    pub fn put_compact_rows(&mut self, rows: &[u32], values: &[f32]) -> Option<()> {
        let stride = self.slots() * self.columns();
        if self.sparse.is_some() || self.cap != self.columns() || values.len() != rows.len().checked_mul(stride)? {
            return None;
        }
        let row = self.stride();
        for (&r, v) in rows.iter().zip(values.chunks_exact(stride)) {
            let r = r as usize;
            if r >= self.buckets {
                return None;
            }
            self.buf[r * row..r * row + stride].copy_from_slice(v);
        }
        Some(())
    }

    /// Room for `entries` sparse entries, before they are put.
    pub fn reserve_entries(&mut self, entries: usize) {
        if let Some(sp) = &mut self.sparse {
            sp.reserve_for(entries);
        }
    }

    /// Puts sparse entries (as [`Weights::entry_chunks`] gives them) after
    /// those put before, `last` being the last of them; `None` if they are
    /// out of order or range, or the weights are dense.
    pub fn put_entries(&mut self, keys: &[u64], values: &[f32], last: &mut Option<(u32, u32)>) -> Option<()> {
        let (slots, classes) = (self.slots(), self.classes);
        let sp = self.sparse.as_mut()?;
        if slots > MAX_SLOTS || values.len() != keys.len().checked_mul(slots)? {
            return None;
        }
        for (&k, v) in keys.iter().zip(values.chunks_exact(slots)) {
            if k as u32 as usize >= classes {
                return None;
            }
            sp.push_sorted((k >> 32) as u32, k as u32, v, last)?;
        }
        Some(())
    }

    /// Ends the entries put: past the budget, the weakest go.
    pub fn entries_put(&mut self) {
        if let Some(sp) = &mut self.sparse {
            sp.pushed();
        }
    }

    /// Whether the weights keep (averaged, adagrad, mirrored) as given.
    pub fn has_layout(&self, averaged: bool, adagrad: bool, mirrored: bool) -> bool {
        (self.averaged, self.adagrad, self.mirrored) == (averaged, adagrad, mirrored)
    }

    /// Whether compact rows of `stride` floats fit these weights (dense,
    /// in the compact layout, every row in range, `values` floats in all).
    pub fn rows_fit(&self, stride: usize, rows: &[u32], values: usize) -> bool {
        self.sparse.is_none()
            && self.cap == self.columns()
            && stride == self.slots() * self.columns()
            && rows.len().checked_mul(stride) == Some(values)
            && rows.iter().all(|&r| (r as usize) < self.buckets)
    }

    /// Whether sparse entries of `stride` floats fit these weights, their
    /// keys ascending.
    pub fn entries_fit(&self, stride: usize, keys: &[u64], values: usize, classes: usize) -> bool {
        self.sparse.is_some()
            && stride == self.slots()
            && keys.len().checked_mul(stride) == Some(values)
            && keys.windows(2).all(|p| p[0] < p[1])
            && keys
                .iter()
                .all(|&k| ((k >> 32) as usize) < self.buckets && (k as u32 as usize) < classes)
    }

    /// Sets sparse entries (checked by [`Weights::entries_fit`]) in place:
    /// found or added; all-zero values clear an entry that exists and add
    /// none. A replica's delta.
    pub fn set_entries(&mut self, keys: &[u64], values: &[f32]) {
        let slots = self.slots();
        let Some(sp) = self.sparse.as_mut() else { return };
        // Where each bucket's entries start (keys ascending: `entries_fit`),
        // so that its index and row can be fetched ahead of their turn.
        let mut starts: Vec<usize> = (0..keys.len())
            .filter(|&i| i == 0 || keys[i] >> 32 != keys[i - 1] >> 32)
            .collect();
        let buckets: Vec<u32> = starts.iter().map(|&i| (keys[i] >> 32) as u32).collect();
        starts.push(keys.len());
        for (j, w) in starts.windows(2).enumerate() {
            sp.prefetch_ahead(&buckets, j);
            // A bucket's entries in one merge and one walk along its row,
            // not a search each.
            let (i, n, bucket) = (w[0], w[1] - w[0], buckets[j]);
            let (run, vals) = (&keys[i..i + n], &values[i * slots..(i + n) * slots]);
            let nonzero = |j: &usize| vals[j * slots..(j + 1) * slots].iter().any(|&x| x != 0.0);
            let r = sp.ensure_row(bucket as usize, (0..n).filter(nonzero).map(|j| run[j] as u32));
            let mut e = r.start;
            for (&k, v) in run.iter().zip(vals.chunks_exact(slots)) {
                e = sp.seek(e, r.end, k as u32);
                if e < r.end && sp.class(e) == k as u32 {
                    for (s, &x) in v.iter().enumerate() {
                        sp.set(e, s, x);
                    }
                    e += 1;
                }
            }
        }
    }

    /// The highest `|v|` at or below which the budget dropped sparse
    /// entries since the last call (a delta carries it to replicas).
    pub fn take_pruned_at(&mut self) -> Option<f32> {
        self.sparse.as_mut().and_then(|s| s.take_pruned_at())
    }

    /// Replays a learner's pruning at `t`, then leaves each bucket of
    /// `rows` only the classes `keys` give it (both ascending, as a delta
    /// that prunes carries them; the replica checks it):
    /// the rows the delta then sets hold what the learner's do.
    pub fn mirror_pruning(&mut self, t: f32, rows: &[u32], keys: &[u64]) {
        let Some(sp) = self.sparse.as_mut() else { return };
        sp.prune_at_or_below(t);
        let (mut i, mut classes) = (0, Vec::new());
        for &b in rows {
            while keys.get(i).is_some_and(|&k| ((k >> 32) as u32) < b) {
                i += 1;
            }
            classes.clear();
            while let Some(&k) = keys.get(i).filter(|&&k| (k >> 32) as u32 == b) {
                classes.push(k as u32);
                i += 1;
            }
            sp.keep_classes(b as usize, &classes);
        }
    }

    /// Reclaims the sparse arena's garbage when it is large, and the
    /// memory past its end (a replica, after a delta).
    pub fn tidy(&mut self) {
        if let Some(sp) = self.sparse.as_mut() {
            sp.tidy();
        }
    }

    /// Sets the scalars (a replica's delta); false when the scale is not
    /// a positive number.
    pub fn set_scalars(&mut self, scale: f64, bsum: f64, steps: u64) -> bool {
        if !(scale.is_finite() && scale > 0.0) {
            return false;
        }
        self.scale = scale;
        self.inv_scale = (1.0 / scale) as f32;
        self.bsum = bsum;
        self.bsum_f32 = bsum as f32;
        self.steps = steps;
        true
    }
}

impl Weights {
    /// Floats per row (dense) or entry (sparse) in the scoring layout: the
    /// compact one without AdaGrad's sums (what a replica's image holds).
    pub fn scoring_stride(&self) -> usize {
        let slots = self.slots() - self.adagrad as usize;
        match self.sparse {
            Some(_) => slots,
            None => slots * self.columns(),
        }
    }

    /// A copy in the scoring layout, AdaGrad's sums left out: it scores as
    /// these weights do (the same floats), in a third to a half less
    /// memory, and must not learn. For copies that only predict
    /// (the HTTP endpoint's copies of the model).
    pub fn scoring_copy(&self) -> Weights {
        if !self.adagrad {
            return self.clone();
        }
        let (slots, stride, count) = (self.slots(), self.stride(), self.counts as usize);
        let keep = (slots - 1) * self.cap;
        let mut buf = Vec::new();
        if self.sparse.is_none() && keep > 0 {
            buf = zeroed(self.buckets * (keep + count));
            for (dst, src) in buf.chunks_exact_mut(keep + count).zip(self.buf.chunks_exact(stride)) {
                // Rows never learned stay unwritten: their pages are only
                // backed where there are weights to copy.
                if src[..keep].iter().any(|&x| x != 0.0) {
                    dst[..keep].copy_from_slice(&src[..keep]);
                }
                // The document count, when the row carries one.
                if count == 1 && src[stride - 1].to_bits() != 0 {
                    dst[keep] = src[stride - 1];
                }
            }
        }
        Weights {
            buckets: self.buckets,
            classes: self.classes,
            cap: self.cap,
            buf,
            scale: self.scale,
            inv_scale: self.inv_scale,
            bsum_f32: self.bsum_f32,
            bsum: self.bsum,
            steps: self.steps,
            averaged: self.averaged,
            adagrad: false,
            mirrored: self.mirrored,
            sparse: self.sparse.as_ref().map(SparseRows::without_last_slot),
            counts: self.counts,
            released: None,
            budget: self.budget,
        }
    }

    /// Whether the weights are in the sparse layout.
    pub fn is_sparse(&self) -> bool {
        self.sparse.is_some()
    }

    /// How many sparse entries the budget has dropped so far.
    pub fn pruned(&self) -> u64 {
        self.sparse.as_ref().map_or(0, |s| s.pruned())
    }

    /// The global scale of the stored values (a rescale sets it back to 1).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// `B`, the scalar part of the averaged weights' running sum.
    pub fn bsum(&self) -> f64 {
        self.bsum
    }

    /// Flags of the layout: (averaged, adagrad, mirrored).
    pub fn layout(&self) -> (bool, bool, bool) {
        (self.averaged, self.adagrad, self.mirrored)
    }

    /// Appends bucket `b`'s dense row in the scoring layout
    /// ([`Weights::scoring_stride`] floats).
    pub fn scoring_row(&self, b: usize, values: &mut Vec<f32>) {
        let (slots, cap, columns, stride) = (self.slots(), self.cap, self.columns(), self.stride());
        let keep = slots - self.adagrad as usize;
        let row = &self.buf[b * stride..b * stride + slots * cap];
        for s in 0..keep {
            values.extend_from_slice(&row[s * cap..s * cap + columns]);
        }
    }

    /// Hints the CPU to fetch what [`Weights::scoring_entries`] will read
    /// of `buckets[i + 4]` and `buckets[i + 8]` (a walk over many rows
    /// of a large model waits on memory otherwise).
    pub fn prefetch_entries(&self, buckets: &[u32], i: usize) {
        if let Some(sp) = &self.sparse {
            sp.prefetch_ahead(buckets, i);
        }
    }

    /// Appends bucket `b`'s sparse entries: keys (bucket << 32 | class)
    /// and their values in the scoring layout.
    pub fn scoring_entries(&self, b: usize, keys: &mut Vec<u64>, values: &mut Vec<f32>) {
        let Some(sp) = &self.sparse else { return };
        let keep = self.slots() - self.adagrad as usize;
        for e in sp.range(b) {
            keys.push((b as u64) << 32 | u64::from(sp.class(e)));
            values.extend((0..keep).map(|s| sp.get(e, s)));
        }
    }
}
