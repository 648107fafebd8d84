//! Counting a document's repeated buckets into a sparse vector, on a
//! stamped open-addressing table that a long document does not have to
//! clear. Owns the table; the value of a count comes from [`ValueMode`].

use super::{SparseVec, ValueMode};

/// The table [`count_into`] counts a document's repeated buckets in. A
/// slot packs the document's stamp (which document wrote it), the bucket
/// and its position in the output; a slot with an older stamp is empty. So
/// a long document starts on the table as the last one left it instead of
/// clearing up to megabytes of it (SpamAssassin's longest messages have
/// 55,000 features: a 1 MiB table).
#[derive(Clone, Debug, Default)]
pub(super) struct CountTable {
    slots: Vec<u64>,
    /// The current document's stamp: 1 to `STAMPS - 1` (0: never written).
    stamp: u64,
}

/// Slot layout: stamp (12 bits) | bucket (30 bits: `bits` <= 30) | position (22 bits).
pub(super) const POSITION_BITS: u32 = 22;
const POSITION: u64 = (1 << POSITION_BITS) - 1;
const STAMP_SHIFT: u32 = 52;
const STAMPS: u64 = 1 << (64 - STAMP_SHIFT);
/// Tables up to this many slots (64 KiB) are cleared anyway: see [`CountTable::start`].
const SWEPT: usize = 8192;

impl CountTable {
    /// Readies at least `cap` slots for a new document: a new stamp; the
    /// whole table is cleared only when it grows or the stamps wrap (every
    /// 4,095 documents), the first `cap` slots also when they are few.
    fn start(&mut self, cap: usize) {
        if self.slots.len() < cap {
            self.slots.clear();
            self.slots.resize(cap, 0);
            self.stamp = 0;
        }
        self.stamp += 1;
        if self.stamp == STAMPS {
            self.slots.fill(0);
            self.stamp = 1;
        }
        // A small table is still cleared: that is cheap, and brings its
        // lines into the cache in one sweep, where probes into lines other
        // work evicted since the last document would miss one by one (the
        // daemon, which does that other work between messages, ran slower
        // on SMS without it).
        if cap <= SWEPT {
            self.slots[..cap].fill(0);
        }
    }
}

/// Counts bucket repeats into `out` (in order of first occurrence) through
/// the open-addressing `table`, and applies the value mode.
pub(super) fn count_into(table: &mut CountTable, buckets: &[u32], value: ValueMode, out: &mut SparseVec) {
    let n = buckets.len();
    // Work on the vectors as locals: their lengths and pointers stay in
    // registers instead of being reloaded through `out` after every store.
    let (mut idx, mut val) = (std::mem::take(&mut out.idx), std::mem::take(&mut out.val));
    idx.clear();
    val.clear();
    idx.reserve(n);
    val.reserve(n);
    if n > POSITION as usize {
        // Over 4 M features in one document: positions would not fit a slot.
        let mut seen = std::collections::HashMap::with_capacity(n / 2);
        for &b in buckets {
            match seen.entry(b) {
                std::collections::hash_map::Entry::Occupied(e) => val[*e.get()] += 1.0,
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(idx.len());
                    idx.push(b);
                    val.push(1.0);
                }
            }
        }
    } else {
        // At most half full, so every probe ends at an empty slot.
        let cap = (2 * n + 2).next_power_of_two().max(16);
        let shift = 64 - cap.trailing_zeros();
        let mask = cap - 1;
        table.start(cap);
        let slots = &mut table.slots[..cap];
        let stamp = table.stamp;
        let tag = stamp << STAMP_SHIFT;
        // Whether a bucket is new or a repeat is a coin toss to the branch
        // predictor (SpamAssassin: 38 % of buckets repeat), so both run the
        // same stores, their values picked by a mask: the bucket is written
        // at the end of `idx` (kept only when new), and one is added to its
        // value, where it was first seen or, new, at the end (from zero).
        idx.resize(n, 0);
        val.resize(n, 0.0);
        let mut len = 0usize;
        for &b in buckets {
            let key = tag | (b as u64) << POSITION_BITS;
            let mut pos = ((b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize;
            // Stop at the bucket's slot or an empty one (another
            // document's stamp): at most half full, so one is found.
            let (at, e, d) = loop {
                let e = slots[pos & mask];
                // Zero when the slot holds the bucket; under 2^52 (the
                // stamps agree) when it holds another of this document's.
                // One compare, almost always true, stops at either the
                // bucket or an empty slot, rather than a first branch on
                // whether the bucket was seen.
                let d = (e & !POSITION) ^ key;
                if d.wrapping_sub(1) >= (1 << STAMP_SHIFT) - 1 {
                    break (pos & mask, e, d);
                }
                pos += 1;
            };
            // All ones when the bucket was seen, else zero.
            let seen = u64::from(d == 0).wrapping_neg();
            let fresh = key | len as u64;
            slots[at] = (e & seen) | (fresh & !seen);
            idx[len] = b;
            val[((e & POSITION & seen) | (len as u64 & !seen)) as usize] += 1.0;
            len += usize::from(seen == 0);
        }
        idx.truncate(len);
        val.truncate(len);
    }
    let repeats = n - idx.len();
    match value {
        ValueMode::Binary => val.fill(1.0),
        ValueMode::Count => {}
        // Every count is 1: every value is ln 2.
        ValueMode::LogCount if repeats == 0 => val.fill(std::f32::consts::LN_2),
        ValueMode::LogCount => {
            // Counts are small integers: look the common ones up.
            const LN_1P: [f32; 9] = [
                0.0,
                std::f32::consts::LN_2,
                1.098_612_3,
                1.386_294_4,
                1.609_438,
                1.791_759_5,
                1.945_910_1,
                2.079_441_5,
                2.197_224_6,
            ];
            for v in &mut val {
                *v = if *v == 1.0 {
                    std::f32::consts::LN_2
                } else {
                    LN_1P.get(*v as usize).copied().unwrap_or_else(|| v.ln_1p())
                };
            }
        }
    }
    out.idx = idx;
    out.val = val;
}
