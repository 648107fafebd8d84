//! Sparse rows: the weight layout for many classes.
//!
//! A dense row holds a float for every class in every bucket, so memory is
//! buckets x classes and every step reads every class. With many classes
//! almost all of those floats stay zero: on Reuters-21578 (115 labels, one
//! binary learner each) 8 % of the (bucket, class) pairs of the defaults'
//! model are non-zero, 9 classes a used bucket on average. Here each bucket
//! keeps only its non-zero classes, sorted by class id, in one arena, and
//! a bucket's entries are contiguous. The arena is two arrays indexed
//! alike: the hot one holds each entry's class and `v` side by side (all
//! that scoring reads: on 1,000 classes scoring streams megabytes per
//! message and is bound by memory bandwidth), the cold one its other slots
//! (`A` when averaging, AdaGrad's or AROW's sums), read only by the few
//! classes a step moves. (One array per slot was 1.6x slower on 20
//! Newsgroups: three cache misses a row instead of one.)
//!
//! A row has room for the next power of two of its length; a full row moves
//! to the arena's end with twice the room (the old place becomes garbage).
//! The arena is allocated at the budget's size (`max_entries`; the OS backs
//! pages only when written, so RSS follows what is used) and never moves:
//! when it is full, `compact` slides the rows down over the garbage in
//! place, and when the live entries alone fill it, drops the entries of
//! smallest magnitude first (counted in [`SparseRows::pruned`]), as a
//! hashed model loses what collides.

use std::ops::Range;

mod mirror;

use mirror::Bookkeeping;

/// Most floats an entry holds: `v`, `A` and the sums.
pub const MAX_SLOTS: usize = 3;

/// Most arena entries: offsets are `u32`.
const MAX_ARENA: usize = (u32::MAX / 4) as usize;

/// Fewer classes than this never fill rows (see [`SparseRows::fill_row`]).
const FILL_MIN_CLASSES: usize = 32;

/// A full arena whose garbage is under this fraction of the budget (1/32)
/// is pruned rather than compacted: near the budget each compaction
/// freed less, came sooner and cost a pass over the whole arena (20
/// Newsgroups: 20 passes of ~150 ms before 3 prunes, a quarter of `eval`;
/// docs/many-classes.md).
const RECLAIM_AT_LEAST: usize = 32;

/// One bucket's place in the arena.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Head {
    off: u32,
    len: u32,
}

/// Room of a row of `len` entries.
fn room(len: u32) -> u32 {
    if len == 0 { 0 } else { len.next_power_of_two() }
}

/// Per-bucket sorted (class, slots) lists in one arena.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseRows {
    heads: Vec<Head>,
    /// Floats per entry (`v` and the cold ones).
    slots: usize,
    /// The arena's hot half: per entry, the class id, then `v`'s bits.
    data: Vec<u32>,
    /// The arena's cold half: per entry, `slots - 1` floats.
    cold: Vec<f32>,
    /// Most entries the arena may hold (the budget).
    max_entries: usize,
    /// Entries dropped to stay within the budget.
    pruned: u64,
    /// The highest `|v|` at or below which entries were dropped since
    /// [`SparseRows::take_pruned_at`] (what a replica replays).
    pruned_at: Option<f32>,
    /// The arena's length when [`SparseRows::tidy`] last counted its
    /// garbage.
    tidied_at: Bookkeeping,
}

impl SparseRows {
    pub fn new(buckets: usize, slots: usize, max_entries: usize) -> Self {
        let max_entries = max_entries.clamp(1, MAX_ARENA);
        SparseRows {
            heads: vec![Head::default(); buckets],
            slots,
            data: Vec::with_capacity(max_entries * 2),
            cold: Vec::with_capacity(max_entries * (slots - 1)),
            max_entries,
            pruned: 0,
            pruned_at: None,
            tidied_at: Bookkeeping::default(),
        }
    }

    /// A copy without the last of each entry's slots (AdaGrad's sums, kept
    /// last): what scoring reads, for a copy that only predicts.
    pub fn without_last_slot(&self) -> SparseRows {
        let (from, to) = (self.cold_stride(), self.cold_stride().saturating_sub(1));
        let cold = match to {
            0 => Vec::new(),
            _ => self.cold.chunks_exact(from).flat_map(|c| &c[..to]).copied().collect(),
        };
        SparseRows {
            heads: self.heads.clone(),
            slots: self.slots - 1,
            data: self.data.clone(),
            cold,
            max_entries: self.max_entries,
            pruned: self.pruned,
            pruned_at: self.pruned_at,
            tidied_at: self.tidied_at,
        }
    }

    /// Bytes of an entry with `slots` floats.
    pub fn entry_bytes(slots: usize) -> usize {
        4 * (1 + slots)
    }

    /// Bytes of the bucket index.
    pub fn index_bytes(buckets: usize) -> usize {
        buckets * std::mem::size_of::<Head>()
    }

    /// Cold floats per entry.
    fn cold_stride(&self) -> usize {
        self.slots - 1
    }

    /// Arena entries (live and garbage).
    fn len(&self) -> usize {
        self.data.len() / 2
    }

    /// Sets the arena's length to `n` entries (new ones zero).
    fn resize(&mut self, n: usize) {
        self.data.resize(2 * n, 0);
        let cs = self.cold_stride();
        self.cold.resize(cs * n, 0.0);
    }

    /// Entries dropped to stay within the budget so far.
    pub fn pruned(&self) -> u64 {
        self.pruned
    }

    /// Live entries (classes with a weight, summed over buckets).
    pub fn entries(&self) -> usize {
        self.heads.iter().map(|h| h.len as usize).sum()
    }

    /// Bytes in use: the index and the arena's written part (its
    /// allocation is the budget's, backed by the OS only where written).
    pub fn bytes(&self) -> usize {
        Self::index_bytes(self.heads.len()) + self.len() * Self::entry_bytes(self.slots)
    }

    /// Changes the budget; prunes at once when the arena is over it.
    pub fn set_max_entries(&mut self, max_entries: usize) {
        self.max_entries = max_entries.clamp(1, MAX_ARENA);
        if self.len() > self.max_entries {
            self.compact(false);
        }
        if self.len() > self.max_entries {
            self.compact(true);
        }
        let max = self.max_entries.max(self.len());
        fit(&mut self.data, 2 * max);
        let cs = self.cold_stride();
        fit(&mut self.cold, cs * max);
    }

    /// The arena range of `bucket`'s entries.
    #[inline(always)]
    pub fn range(&self, bucket: usize) -> Range<usize> {
        let h = self.heads[bucket];
        h.off as usize..(h.off + h.len) as usize
    }

    /// The class of entry `e`.
    #[inline(always)]
    pub fn class(&self, e: usize) -> u32 {
        self.data[2 * e]
    }

    /// Slot `s` of entry `e`.
    #[inline(always)]
    pub fn get(&self, e: usize, s: usize) -> f32 {
        match s {
            0 => f32::from_bits(self.data[2 * e + 1]),
            _ => self.cold[e * self.cold_stride() + s - 1],
        }
    }

    #[inline(always)]
    pub fn set(&mut self, e: usize, s: usize, x: f32) {
        match s {
            0 => self.data[2 * e + 1] = x.to_bits(),
            _ => {
                let i = e * self.cold_stride() + s - 1;
                self.cold[i] = x;
            }
        }
    }

    /// The arena index of (`bucket`, `class`), if it has an entry.
    #[inline]
    pub fn find(&self, bucket: usize, class: u32) -> Option<usize> {
        let r = self.range(bucket);
        let e = self.seek(r.start, r.end, class);
        (e < r.end && self.class(e) == class).then_some(e)
    }

    /// The first arena index in `from..end` (a sorted run) whose class is
    /// not below `class`: a short linear probe, then binary search, so a
    /// walk over a row with few classes to find costs their logarithms,
    /// and one with many costs the row.
    #[inline]
    pub fn seek(&self, mut from: usize, end: usize, class: u32) -> usize {
        for _ in 0..4 {
            if from >= end || self.class(from) >= class {
                return from;
            }
            from += 1;
        }
        let (mut lo, mut hi) = (from, end);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.class(mid) < class {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Hints the CPU to fetch `bucket`'s index entry.
    #[inline(always)]
    pub fn prefetch(&self, bucket: usize) {
        crate::features::prefetch(&self.heads, bucket);
    }

    /// Hints the CPU to fetch the first entries of `bucket`'s row.
    #[inline(always)]
    fn prefetch_row(&self, bucket: usize) {
        let h = self.heads[bucket];
        crate::features::prefetch(&self.data, h.off as usize * 2);
    }

    /// For a walk over the rows of `buckets`, at `i`: hints the CPU to
    /// fetch the index of `buckets[i + 8]` and the row of `buckets[i + 4]`
    /// (the rows of a large model are scattered: each a wait on memory).
    pub fn prefetch_ahead(&self, buckets: &[u32], i: usize) {
        if let Some(&b) = buckets.get(i + 8) {
            self.prefetch(b as usize);
        }
        if let Some(&b) = buckets.get(i + 4) {
            self.prefetch_row(b as usize);
        }
    }

    /// The arena index of (`bucket`, `class`), adding a zero entry when it
    /// has none (which may move rows: indices from before are stale).
    pub fn entry(&mut self, bucket: usize, class: u32) -> usize {
        let r = self.ensure_row(bucket, std::iter::once(class));
        // The row now holds `class`.
        self.find(bucket, class).unwrap_or(r.start)
    }

    /// Makes sure `bucket` has an entry for every class of `classes`
    /// (ascending), adding zero entries in one merge; returns the row's
    /// arena range (other rows' indices from before may be stale).
    pub fn ensure_row(&mut self, bucket: usize, classes: impl DoubleEndedIterator<Item = u32> + Clone) -> Range<usize> {
        let r = self.range(bucket);
        let (mut e, mut missing) = (r.start, 0);
        for c in classes.clone() {
            e = self.seek(e, r.end, c);
            if e < r.end && self.class(e) == c {
                e += 1;
            } else {
                missing += 1;
            }
        }
        if missing == 0 {
            return r;
        }
        let len = r.len();
        if len + missing > room(len as u32) as usize {
            self.grow_row(bucket, len + missing);
            // Growing may have compacted (and pruned) the row: count again.
            if self.heads[bucket].len as usize != len {
                return self.ensure_row(bucket, classes);
            }
        }
        // Merge from the back: the row's entries slide right past the new ones.
        let off = self.heads[bucket].off as usize;
        let (mut w, mut i) = (off + len + missing, len);
        for c in classes.rev() {
            while i > 0 && self.class(off + i - 1) > c {
                (w, i) = (w - 1, i - 1);
                self.move_entry(off + i, w);
            }
            w -= 1;
            if i > 0 && self.class(off + i - 1) == c {
                i -= 1;
                self.move_entry(off + i, w);
            } else {
                let cs = self.cold_stride();
                (self.data[2 * w], self.data[2 * w + 1]) = (c, 0);
                self.cold[w * cs..(w + 1) * cs].fill(0.0);
            }
        }
        self.heads[bucket].len = (len + missing) as u32;
        off..off + len + missing
    }

    /// Gives `bucket` an entry for every class below `k` when it already
    /// holds more than half of them: a full row is scored by a plain
    /// vector loop, without the scatter by class id (the common n-grams of
    /// a many-class stream carry weights for most classes; their rows are
    /// most of what scoring reads). Returns the row's range.
    pub fn fill_row(&mut self, bucket: usize, k: usize) -> Range<usize> {
        let r = self.range(bucket);
        // Not when the arena is three quarters full: the zeros filled in
        // would be the first weights pruned, and the row filled again.
        let room_left = self.len() + k <= self.max_entries / 4 * 3;
        if k < FILL_MIN_CLASSES || r.len() == k || 2 * r.len() <= k || !room_left {
            return r;
        }
        self.ensure_row(bucket, 0..k as u32)
    }

    #[inline(always)]
    fn move_entry(&mut self, from: usize, to: usize) {
        if from != to {
            self.data.copy_within(2 * from..2 * from + 2, 2 * to);
            let cs = self.cold_stride();
            self.cold.copy_within(from * cs..(from + 1) * cs, to * cs);
        }
    }

    /// Moves `bucket`'s row to the arena's end with room for `need` entries
    /// (the caller sets the row's length to `need` next; until then the
    /// room is more than its length says).
    fn grow_row(&mut self, bucket: usize, need: usize) {
        let want = room(need as u32) as usize;
        self.reserve(want);
        // Reserving may have compacted the arena: read the head again.
        let h = self.heads[bucket];
        let (off, len, new_off, cs) = (h.off as usize, h.len as usize, self.len(), self.cold_stride());
        self.data.extend_from_within(2 * off..2 * (off + len));
        self.cold.extend_from_within(cs * off..cs * (off + len));
        self.resize(new_off + want);
        self.heads[bucket].off = new_off as u32;
    }

    /// Makes room for `n` more arena entries within the budget: reclaims
    /// garbage or, when that would leave less than a
    /// [`RECLAIM_AT_LEAST`]th of the budget free, prunes. The arena's
    /// allocation is the budget's from the start, so it never moves.
    fn reserve(&mut self, n: usize) {
        if self.len() + n <= self.max_entries {
            return;
        }
        let worth = self.max_entries / RECLAIM_AT_LEAST;
        self.compact(self.compacted_len() + n + worth > self.max_entries);
    }

    /// The arena's length once compacted (a pass over the buckets only).
    fn compacted_len(&self) -> usize {
        self.heads.iter().map(|h| room(h.len) as usize).sum()
    }

    /// Moves every row down over the garbage, in arena order, in place;
    /// with `prune`, first drops the smallest entries (by `|v|`) so that
    /// half the budget's entries are left.
    fn compact(&mut self, prune: bool) {
        let started = std::time::Instant::now();
        let threshold = if prune { self.prune_threshold() } else { -1.0 };
        let dropped = self.compact_below(threshold);
        tracing::debug!(prune, ms = started.elapsed().as_millis() as u64, "arena compacted");
        if dropped > 0 {
            tracing::warn!(
                dropped,
                kept = self.entries(),
                ms = started.elapsed().as_millis() as u64,
                "the model memory budget is full: dropped the smallest weights (raise --model-memory to keep more)"
            );
        }
    }

    /// Moves every row down over the garbage, in arena order, in place,
    /// dropping the entries whose `|v|` is at or below `threshold` (none
    /// when it is negative); how many it dropped.
    fn compact_below(&mut self, threshold: f32) -> u64 {
        let mut order: Vec<(u32, u32)> = (self.heads.iter().enumerate())
            .filter(|(_, h)| h.len > 0)
            .map(|(b, h)| (h.off, b as u32))
            .collect();
        order.sort_unstable();
        // Empty rows point nowhere in particular: at the start, which the
        // arena never shrinks past.
        for h in self.heads.iter_mut().filter(|h| h.len == 0) {
            h.off = 0;
        }
        let (mut cursor, mut dropped) = (0usize, 0u64);
        for (off, b) in order {
            let (off, len) = (off as usize, self.heads[b as usize].len as usize);
            let start = cursor;
            // The cursor never passes the read position: a row's new room
            // is at most its old one, and rows go in arena order.
            cursor = self.keep_over(off..off + len, cursor, threshold);
            dropped += (len - (cursor - start)) as u64;
            let n = (cursor - start) as u32;
            cursor = start + room(n) as usize;
            self.heads[b as usize] = Head {
                off: start as u32,
                len: n,
            };
        }
        self.resize(cursor);
        self.pruned += dropped;
        if dropped > 0 {
            self.pruned_at = Some(self.pruned_at.map_or(threshold, |t| t.max(threshold)));
        }
        dropped
    }

    /// Moves the entries of `from` whose `|v|` is over `t` (all of them
    /// when `t` is negative: the row in one move) down to `to` on, in
    /// order, which is at or before `from`; returns where the next goes.
    fn keep_over(&mut self, from: Range<usize>, mut to: usize, t: f32) -> usize {
        let cs = self.cold_stride();
        if t < 0.0 {
            self.data.copy_within(2 * from.start..2 * from.end, 2 * to);
            self.cold.copy_within(cs * from.start..cs * from.end, cs * to);
            return to + from.len();
        }
        for e in from {
            let hot = 2 * e;
            if f32::from_bits(self.data[hot + 1]).abs() <= t {
                continue;
            }
            if e != to {
                (self.data[2 * to], self.data[2 * to + 1]) = (self.data[hot], self.data[hot + 1]);
                for s in 0..cs {
                    self.cold[cs * to + s] = self.cold[cs * e + s];
                }
            }
            to += 1;
        }
        to
    }

    /// The `|v|` at or below which entries are dropped so that about half
    /// the budget's entries are kept (from a sample of the entries): after
    /// compaction a row's room is under twice its length, so that leaves
    /// room to grow.
    fn prune_threshold(&self) -> f32 {
        let (live, keep) = (self.entries(), self.max_entries / 2);
        if live <= keep {
            return -1.0;
        }
        let step = (live / 65_536).max(1);
        let sample: Vec<f32> = self
            .iter()
            .step_by(step)
            .map(|(_, _, e)| self.get(e, 0).abs())
            .collect();
        if sample.is_empty() {
            return -1.0;
        }
        let n = sample.len();
        let drop = (((live - keep) as f64 / live as f64 * n as f64) as usize).min(n - 1);
        let mut sample = sample;
        let (_, t, _) = sample.select_nth_unstable_by(drop, f32::total_cmp);
        *t
    }

    /// Folds the lazy scale into every entry: `A += b v` (when averaging,
    /// `b` given), then `v *= s`. Garbage is changed too, harmlessly.
    pub fn rescale(&mut self, s: f32, b: Option<f32>) {
        for e in 0..self.len() {
            let v = self.get(e, 0);
            if let Some(b) = b {
                self.set(e, 1, self.get(e, 1) + b * v);
            }
            self.set(e, 0, v * s);
        }
    }

    /// Every live entry: (bucket, class, arena index), buckets ascending.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32, usize)> + '_ {
        self.heads.iter().enumerate().flat_map(move |(b, h)| {
            (h.off as usize..(h.off + h.len) as usize).map(move |e| (b as u32, self.class(e), e))
        })
    }

    /// Builds rows from (bucket, class, values) triples, buckets ascending
    /// and classes ascending within a bucket; `None` if they are not. Only
    /// the first `slots` values of each are read.
    pub fn from_entries(
        buckets: usize,
        slots: usize,
        max_entries: usize,
        entries: impl IntoIterator<Item = (u32, u32, [f32; MAX_SLOTS])>,
    ) -> Option<Self> {
        let mut rows = SparseRows::new(buckets, slots, max_entries);
        let mut last: Option<(u32, u32)> = None;
        for (b, c, vals) in entries {
            rows.push_sorted(b, c, &vals[..slots.min(MAX_SLOTS)], &mut last)?;
        }
        rows.pushed();
        Some(rows)
    }

    /// Appends entry (`b`, `c`) with `vals` (its `slots` values) after
    /// `last`, the entry pushed before it; `None` if it does not come
    /// after it or is out of range. [`SparseRows::pushed`] ends a run.
    pub fn push_sorted(&mut self, b: u32, c: u32, vals: &[f32], last: &mut Option<(u32, u32)>) -> Option<()> {
        if b as usize >= self.heads.len()
            || self.slots > MAX_SLOTS
            || vals.len() != self.slots
            || last.is_some_and(|l| l >= (b, c))
        {
            return None;
        }
        *last = Some((b, c));
        let h = self.heads[b as usize];
        if h.len == 0 {
            self.heads[b as usize].off = self.len() as u32;
        }
        if h.len == room(h.len) {
            // Rows come in order: this one is at the arena's end.
            let grow = (room(h.len + 1) - room(h.len)) as usize;
            self.resize(self.len() + grow);
        }
        let at = (self.heads[b as usize].off + h.len) as usize;
        self.data[2 * at] = c;
        for (s, &v) in vals.iter().enumerate() {
            self.set(at, s, v);
        }
        self.heads[b as usize].len += 1;
        Some(())
    }

    /// Ends a run of [`SparseRows::push_sorted`]: past the budget, the
    /// weakest entries go.
    pub fn pushed(&mut self) {
        if self.len() > self.max_entries {
            self.compact(true);
        }
    }

    /// Room for `entries` more entries (rows grow to under twice their
    /// length) before they are pushed, so the arena is not grown by
    /// doubling copies.
    pub fn reserve_for(&mut self, entries: usize) {
        let n = entries.saturating_mul(2).saturating_add(1).min(MAX_ARENA);
        self.data.reserve(n * 2);
        self.cold.reserve(n * (self.slots - 1));
        self.max_entries = self.max_entries.max(n);
    }

    /// Adds, for every feature of `x`, `value * v` of each entry of its
    /// bucket to `out[class]`; with `avg = Some(b)`, `value * (A + b v)`
    /// (the averaged weights' running sum, slot 1). `out` has a place for
    /// every class and no more (a row as long is full: see `fill_row`).
    #[inline]
    pub fn accumulate(&self, x: &crate::features::SparseVec, avg: Option<f32>, out: &mut [f32]) {
        for (j, (i, val)) in x.iter().enumerate() {
            if let Some(&next) = x.idx.get(j + 8) {
                self.prefetch(next as usize);
            }
            if let Some(&next) = x.idx.get(j + 4) {
                self.prefetch_row(next as usize);
            }
            let r = self.range(i as usize);
            let row = &self.data[2 * r.start..2 * r.end];
            if r.len() == out.len() && avg.is_none() {
                // A full row: class c is its c-th entry.
                for (o, e) in out.iter_mut().zip(row.chunks_exact(2)) {
                    *o += val * f32::from_bits(e[1]);
                }
                continue;
            }
            match avg {
                None => {
                    for e in row.chunks_exact(2) {
                        out[e[0] as usize] += val * f32::from_bits(e[1]);
                    }
                }
                Some(b) => {
                    // Averaging keeps `A` first among the cold slots.
                    let cs = self.cold_stride();
                    let a = self.cold[cs * r.start..cs * r.end].iter().step_by(cs.max(1));
                    for (e, &a) in row.chunks_exact(2).zip(a) {
                        out[e[0] as usize] += val * (a + b * f32::from_bits(e[1]));
                    }
                }
            }
        }
    }
}

/// Sets `v`'s allocation to room for `max` items (or its length).
fn fit<T>(v: &mut Vec<T>, max: usize) {
    let max = max.max(v.len());
    if v.capacity() > max {
        v.shrink_to(max);
    } else {
        v.reserve_exact(max - v.len());
    }
}

#[cfg(test)]
mod tests;
