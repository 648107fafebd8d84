//! The compression member: a byte context model per class over the
//! first [`COMPRESSION_BYTES`] bytes of a message, the adaptive
//! compression models of Bratko et al. 2006 ("Spam filtering using
//! statistical data compression models"), which TREC 2007's best runs
//! fused with an online LR over byte 4-grams.
//!
//! Each class predicts every byte from the three before it: PPM-style
//! blending of an order-3 estimate with an order-1 one, whose own prior is
//! uniform,
//!
//! `p1(b | a)   = (n(a b)   + A / 256) / (n(a)   + A)`
//! `p3(b | xyz) = (n(xyz b) + B p1)    / (n(xyz) + B)`
//!
//! (counts of that class; [`ORDER1_PRIOR`] `A`, [`BLEND`] `B`). Its
//! log-odds of class 1 is the mean log-likelihood ratio of the head's
//! bytes under the two classes' models, `mean_i ln p3_1(b_i) / p3_0(b_i)`,
//! times [`SCALE`] (a mean ranked a little better than a sum over
//! `sqrt(n)` and made fewer errors: docs/accuracy.md; the stack learns
//! how far to trust it). Learning a label adds the label's weight to its
//! class's four counts at every byte; a lesson taken back subtracts the
//! same, so a forget or relabel leaves the counts as they were (to the
//! rounding of fractional weights). A context whose count of a class
//! reached [`COUNT_LIMIT`] learns no more of that class (its ratios kept;
//! a lesson taken back there takes off what it never added, one label's
//! worth in four million).
//!
//! The order-1 counts are indexed directly (256 contexts, 65,536 pairs,
//! 0.5 MB); the order-3 ones live in a hashed table of
//! `2^`[`COMPRESSION_BITS`] slots, in lines of [`LINE`]: a context hashes
//! to a line, whose first slot holds its own counts and whose other
//! fifteen the counts of the bytes that follow it (hashed by the window),
//! collisions left to share a slot. Every slot holds two `f32` counts,
//! one per class. A byte's line is fetched [`AHEAD`] bytes before it is
//! read: a cache miss a byte, scoring and learning, which is why it reads
//! only the head, and why it is on by default for raw e-mail only
//! (`--compression`).
//!
//! Binary single-label tasks only, like the byte LR.

use super::{Added, Entry, Reads};
use crate::features::{SparseVec, prefetch};

/// Its line of the stack's registry (`super`): added at the
/// first raw e-mail unless `--compression` says otherwise.
pub const ENTRY: Entry = Entry {
    name: "compression",
    make: || Box::new(Compression::new()),
    on_email: true,
};

/// log2 of the hashed slots: 2^19 slots of two counts, 4 MB (2^20 ranked
/// a little better, 2^18 worse; docs/accuracy.md).
pub const COMPRESSION_BITS: u32 = 19;
/// Bytes of a message's head it reads: 1,200 keep `eval` on raw e-mail
/// within 0.9x of its time without the member (1,500 and 3,000 rank a
/// little better, at 0.89x and less; docs/accuracy.md).
pub const COMPRESSION_BYTES: usize = 1200;
/// `A`: the order-1 estimate's prior weight, spread evenly over the 256
/// bytes.
const ORDER1_PRIOR: f32 = 1.0;
/// `B`: how much the order-1 estimate weighs in the order-3 one.
const BLEND: f32 = 2.0;
/// Its log-odds per byte of the head is scaled by this: a mean ratio of
/// 0.2 nats a byte is a log-odds of 1, where the stack's other members
/// speak (5 ranked as 10 and better than 1 and 20, docs/accuracy.md).
const SCALE: f32 = 5.0;
/// A context's count of a class stops here: its counts and its bytes'
/// stay as they are (their ratios kept), where `f32` still adds a unit
/// exactly (2^24) and a ratio of probabilities stays within [`BATCH`]'s
/// bound. A busy filter reaches it for its commonest contexts after some
/// 20,000 messages of a class: by then their distribution is known.
const COUNT_LIMIT: f32 = (1 << 22) as f32;
/// How many bytes ahead a byte's slots are fetched (a cache miss each).
const AHEAD: usize = 8;

/// Slots of the order-1 counts, indexed directly: 256 contexts, then
/// 65,536 pairs. The hashed order-3 slots follow them.
const ORDER1_SLOTS: usize = 256 + (1 << 16);
/// All its slots.
const SLOTS: usize = ORDER1_SLOTS + (1 << COMPRESSION_BITS);
/// How many bytes' ratios are multiplied before their product's log is
/// taken: with counts under [`COUNT_LIMIT`] a byte's probability under a
/// class is over `2^-51`, so a ratio is within `2^±51` and sixteen stay
/// inside an `f64` (`2^±1022`).
const BATCH: usize = 16;

/// The four slots a byte's counts live in: order-1 context, order-1
/// pair, order-3 context, order-3 window.
type Slots = [usize; 4];

/// The slots of an order-3 context's line: its own counts, then fifteen
/// shared by the bytes that follow it (hashed by the window), so a byte's
/// order-3 counts cost one fetch of 128 bytes, not two anywhere.
const LINE: usize = 16;

/// The hashed slot of `key` of kind `kind`: Fibonacci hashing of the
/// tagged key, past the order-1 slots.
#[inline]
fn hashed(kind: u64, key: u32) -> usize {
    let h = (kind << 32 | u64::from(key)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - COMPRESSION_BITS);
    ORDER1_SLOTS + h as usize
}

/// The order-3 slots of the 4-byte window `w` (its last byte in the low
/// byte; bytes before the message are 0).
#[inline]
fn order3(w: u32) -> [usize; 2] {
    let context = hashed(3, w >> 8) & !(LINE - 1);
    let byte = (u64::from(w).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) as usize % (LINE - 1);
    [context, context + 1 + byte]
}

/// The slots of the byte that ends the window `w`.
#[inline]
fn slots(w: u32) -> Slots {
    let prev = (w >> 8 & 0xFF) as usize;
    let [c3, p3] = order3(w);
    [prev, 256 + (w & 0xFFFF) as usize, c3, p3]
}

/// The bytes a model reads of `bytes`: its head.
fn head(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.len().min(COMPRESSION_BYTES)]
}

/// What a walk over a message's head does at each byte, with the table
/// it reads.
trait Visit {
    /// The counts.
    fn table(&self) -> &[f32];
    /// Uses the byte's slots.
    fn visit(&mut self, s: Slots);
}

/// Visits the slots of every byte of `bytes`'s head in order, having
/// fetched the hashed ones [`AHEAD`] bytes before they are used.
#[inline]
fn walk(bytes: &[u8], v: &mut impl Visit) {
    let bytes = head(bytes);
    let fetch = |table: &[f32], w: u32| {
        // The context's line of slots: two cache lines of 64 bytes.
        let [context, _] = order3(w);
        prefetch(table, 2 * context);
        prefetch(table, 2 * context + LINE);
    };
    let mut ahead = 0u32;
    for &b in bytes.iter().take(AHEAD) {
        ahead = ahead << 8 | u32::from(b);
        fetch(v.table(), ahead);
    }
    let mut w = 0u32;
    for (i, &b) in bytes.iter().enumerate() {
        if let Some(&next) = bytes.get(i + AHEAD) {
            ahead = ahead << 8 | u32::from(next);
            fetch(v.table(), ahead);
        }
        w = w << 8 | u32::from(b);
        v.visit(slots(w));
    }
}

/// Scoring: the log-likelihood ratio so far, and the product of the
/// ratios not yet in it.
struct Score<'a> {
    n: &'a [f32],
    sum: f64,
    product: f64,
    batched: usize,
}

impl Score<'_> {
    /// Adds the batch's log-ratio to the sum.
    fn flush(&mut self) {
        self.sum += self.product.ln();
        (self.product, self.batched) = (1.0, 0);
    }
}

impl Visit for Score<'_> {
    fn table(&self) -> &[f32] {
        self.n
    }

    #[inline]
    fn visit(&mut self, [c1, p1, c3, p3]: Slots) {
        let (n, prior, blend) = (self.n, ORDER1_PRIOR, BLEND);
        // p3 of class c as a fraction: (n(xyz b) (n(a) + A) + B (n(a b) +
        // A / 256)) / ((n(a) + A) (n(xyz) + B)).
        let fraction = |c: usize| {
            let order1 = n[2 * c1 + c] + prior;
            let top = n[2 * p3 + c] * order1 + blend * (n[2 * p1 + c] + prior / 256.0);
            (top, order1 * (n[2 * c3 + c] + blend))
        };
        let ((t0, d0), (t1, d1)) = (fraction(0), fraction(1));
        // Each side under 2^90 (counts under 2^22): within f32.
        self.product *= f64::from((t1 * d0) / (d1 * t0));
        self.batched += 1;
        if self.batched == BATCH {
            self.flush();
        }
    }
}

/// Learning: what each byte adds to its class's counts.
struct Add<'a> {
    counts: &'a mut [f32],
    changed: Option<&'a mut Vec<u64>>,
    class: usize,
    by: f32,
}

impl Visit for Add<'_> {
    fn table(&self) -> &[f32] {
        self.counts
    }

    #[inline]
    fn visit(&mut self, [c1, p1, c3, p3]: Slots) {
        for (context, byte) in [(c1, p1), (c3, p3)] {
            let n = self.counts[2 * context + self.class];
            if self.by > 0.0 && n + self.by > COUNT_LIMIT {
                continue;
            }
            for slot in [context, byte] {
                let n = &mut self.counts[2 * slot + self.class];
                *n = (*n + self.by).max(0.0);
                if let Some(bits) = &mut self.changed {
                    bits[slot / 64] |= 1 << (slot % 64);
                }
            }
        }
    }
}

/// The per-class counts, and which slots learning changed since a
/// publisher last asked.
#[derive(Clone, PartialEq)]
pub struct Compression {
    /// Two counts per slot: class 0, then class 1.
    pub(crate) counts: Vec<f32>,
    /// A bit per slot changed since the changes were last taken (a
    /// learner that publishes), see [`Compression::take_changes`].
    changed: Option<Vec<u64>>,
}

/// Its size and mass, not its millions of counts.
impl std::fmt::Debug for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (slots, counts) = self.nonzero();
        let mass: f64 = counts.iter().map(|&c| f64::from(c)).sum();
        write!(f, "Compression {{ {} slots counted, mass {mass} }}", slots.len())
    }
}

impl Default for Compression {
    fn default() -> Self {
        Self::new()
    }
}

impl Compression {
    /// Empty counts over all its slots.
    pub fn new() -> Self {
        Compression {
            counts: vec![0.0; 2 * SLOTS],
            changed: None,
        }
    }

    /// Its log-odds of class 1 for a message whose bytes are `bytes`: the
    /// log-likelihood ratio of its head over the square root of its
    /// length (0 for no bytes).
    pub fn margin(&self, bytes: &[u8]) -> f32 {
        let mut score = Score {
            n: &self.counts,
            sum: 0.0,
            product: 1.0,
            batched: 0,
        };
        walk(bytes, &mut score);
        score.flush();
        let sum = score.sum;
        let len = head(bytes).len();
        if len == 0 {
            0.0
        } else {
            SCALE * (sum as f32) / len as f32
        }
    }

    /// Adds `weight` to class `class`'s counts at every byte of `bytes`'s
    /// head (class 0 or 1; a weight that is not finite and positive adds
    /// nothing).
    pub fn learn(&mut self, bytes: &[u8], class: usize, weight: f32) {
        if class < 2 && weight.is_finite() && weight > 0.0 {
            self.add(bytes, class, weight);
        }
    }

    /// Takes back [`Compression::learn`] of the same arguments: the
    /// counts are as before it (to rounding; never below 0).
    pub fn unlearn(&mut self, bytes: &[u8], class: usize, weight: f32) {
        if class < 2 && weight.is_finite() && weight > 0.0 {
            self.add(bytes, class, -weight);
        }
    }

    /// Adds `by` to class `class`'s four counts at every byte.
    fn add(&mut self, bytes: &[u8], class: usize, by: f32) {
        let mut add = Add {
            counts: &mut self.counts,
            changed: self.changed.as_mut(),
            class,
            by,
        };
        walk(bytes, &mut add);
    }

    /// From now on, notes the slots learning changes.
    pub fn track_changes(&mut self) {
        if self.changed.is_none() {
            self.changed = Some(vec![0; SLOTS.div_ceil(64)]);
        }
    }

    /// The slots changed since the last call (ascending), and a clean
    /// slate; `None` when changes are not tracked.
    pub fn take_changes(&mut self) -> Option<Vec<u32>> {
        let bits = self.changed.as_mut()?;
        Some(crate::model::drain_bits(bits))
    }

    /// A copy without the change tracking (copies that only score).
    pub fn scoring_copy(&self) -> Self {
        Compression {
            counts: self.counts.clone(),
            changed: None,
        }
    }

    /// The slots `slots`' counts, flattened (two per slot, class 0
    /// first): what a delta carries of the slots it changed.
    pub fn counts_of(&self, slots: &[u32]) -> Vec<f32> {
        slots
            .iter()
            .flat_map(|&s| {
                let s = s as usize;
                [self.counts[2 * s], self.counts[2 * s + 1]]
            })
            .collect()
    }

    /// Its slots with a count, ascending, and their counts (two each, as
    /// [`Compression::counts_of`]): what a checkpoint or a full version
    /// holds.
    pub fn nonzero(&self) -> (Vec<u32>, Vec<f32>) {
        let slots: Vec<u32> = (0..self.counts.len() / 2)
            .filter(|&s| self.counts[2 * s] != 0.0 || self.counts[2 * s + 1] != 0.0)
            .map(|s| s as u32)
            .collect();
        let counts = self.counts_of(&slots);
        (slots, counts)
    }

    /// Whether [`Compression::put`] would take `slots` and `counts`: two
    /// counts a slot, every slot in range, every count finite and not
    /// negative.
    pub fn fits(&self, slots: &[u32], counts: &[f32]) -> bool {
        counts.len() == 2 * slots.len()
            && slots.iter().all(|&s| (s as usize) < self.counts.len() / 2)
            && counts.iter().all(|c| c.is_finite() && *c >= 0.0)
    }

    /// Sets the slots `slots` to `counts` (two each); false (nothing set)
    /// when they do not fit ([`Compression::fits`]).
    pub fn put(&mut self, slots: &[u32], counts: &[f32]) -> bool {
        let fits = self.fits(slots, counts);
        if fits {
            for (&s, pair) in slots.iter().zip(counts.chunks_exact(2)) {
                self.counts[2 * s as usize..2 * s as usize + 2].copy_from_slice(pair);
            }
        }
        fits
    }

    /// The largest difference between a count of its and `other`'s.
    pub fn distance(&self, other: &Compression) -> f32 {
        self.counts
            .iter()
            .zip(&other.counts)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max)
    }

    /// Bytes of its counts.
    pub fn bytes(&self) -> usize {
        self.counts.len() * 4
    }
}

/// A member of the stack: it scores and learns the head's bytes, two
/// counts per slot (class 0, class 1).
impl Added for Compression {
    fn name(&self) -> &'static str {
        ENTRY.name
    }

    fn reads(&self) -> Reads {
        Reads::Bytes(COMPRESSION_BYTES)
    }

    fn margin(&self, x: &SparseVec) -> Option<f32> {
        Some(Compression::margin(self, &x.bytes))
    }

    fn learn(&mut self, x: &SparseVec, gold: usize, _: Option<f32>, weight: f32) -> f32 {
        Compression::learn(self, &x.bytes, gold, weight);
        0.0
    }

    fn unlearn(&mut self, x: &SparseVec, gold: Option<usize>, weight: f32, _: f32) {
        if let Some(gold) = gold {
            Compression::unlearn(self, &x.bytes, gold, weight);
        }
    }

    fn track_changes(&mut self) {
        Compression::track_changes(self);
    }

    fn take_changes(&mut self) -> Option<Vec<u32>> {
        Compression::take_changes(self)
    }

    fn scoring_copy(&self) -> Box<dyn Added> {
        Box::new(Compression::scoring_copy(self))
    }

    fn boxed_clone(&self) -> Box<dyn Added> {
        Box::new(self.clone())
    }

    fn bytes(&self) -> usize {
        Compression::bytes(self)
    }

    fn width(&self) -> usize {
        2
    }

    fn nonzero(&self) -> (Vec<u32>, Vec<f32>) {
        Compression::nonzero(self)
    }

    fn values_of(&self, slots: &[u32]) -> Vec<f32> {
        self.counts_of(slots)
    }

    fn fits(&self, slots: &[u32], values: &[f32]) -> bool {
        Compression::fits(self, slots, values)
    }

    fn put(&mut self, slots: &[u32], values: &[f32]) -> bool {
        Compression::put(self, slots, values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_that_saw_the_bytes_claims_them_and_a_lesson_is_taken_back() {
        let mut m = Compression::new();
        m.track_changes();
        let spam = b"buy cheap pills now, buy cheap pills now";
        let ham = b"the meeting moved to thursday afternoon";
        assert_eq!(m.margin(spam), 0.0);
        m.learn(spam, 1, 1.0);
        m.learn(ham, 0, 1.0);
        assert!(m.margin(b"buy cheap pills") > 1.0, "{}", m.margin(b"buy cheap pills"));
        assert!(m.margin(b"the meeting moved") < -1.0);
        let before = m.clone();
        m.learn(b"cheap thursday", 1, 0.5);
        m.unlearn(b"cheap thursday", 1, 0.5);
        assert_eq!(m.counts, before.counts);
        // Every slot of both lessons and the taken-back one was noted.
        let changed = m.take_changes().unwrap_or_default();
        assert!(changed.len() > 4 * 30 && changed.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(m.take_changes(), Some(vec![]));
        let (s, c) = m.nonzero();
        let mut copy = Compression::new();
        assert!(copy.put(&s, &c));
        assert_eq!(copy, m.scoring_copy());
        assert!(!copy.put(&[SLOTS as u32], &[1.0, 0.0]) && !copy.put(&[1], &[-1.0, 0.0]));
        // A context at the limit learns no more of the class: its counts
        // and its bytes' stay, the others still learn.
        let mut full = Compression::new();
        let [c1, p1, c3, p3] = slots(u32::from_be_bytes(*b"abcd"));
        assert!(full.put(&[c3 as u32], &[0.0, COUNT_LIMIT]));
        full.learn(b"abcd", 1, 1.0);
        assert_eq!(full.counts_of(&[c3 as u32, p3 as u32]), [0.0, COUNT_LIMIT, 0.0, 0.0]);
        assert_eq!(full.counts_of(&[c1 as u32, p1 as u32]), [0.0, 1.0, 0.0, 1.0]);
        // Nothing learned for an empty message; a bad weight adds nothing.
        assert_eq!(m.margin(b""), 0.0);
        m.learn(spam, 1, f32::NAN);
        assert_eq!(m.counts, copy.counts);
    }
}
