//! Document frequencies and IDF weights, learned from the stream (part of
//! the model's state), and the prefetch hint their scattered lookups use.

use super::SparseVec;

/// Document frequencies learned from the stream, for IDF weighting:
/// `idf(f) = ln((1 + N) / (1 + df(f))) + 1` (scikit-learn's smooth IDF),
/// with N the documents observed. Part of the model's learned state.
#[derive(Clone, Debug, PartialEq)]
pub struct DocFreq {
    /// Documents containing each bucket.
    pub(crate) df: Vec<u32>,
    /// Documents observed.
    pub(crate) docs: u64,
    /// `ln(1 + docs)`.
    ln_docs: f32,
}

/// Hints the CPU to fetch `v[i]` (no effect when `i` is out of bounds):
/// for lookups scattered over megabytes, a cache miss each, issued early so
/// their latencies overlap. Into L2 (`T1`), not L1: with the IDF counts
/// fetched 32 features ahead rather than 16 into L1, `classifyd run` over
/// SMS x 8 took 6-24 % less CPU and `eval` of SpamAssassin with the
/// defaults 4-12 % less (three rounds of 7-9 alternated runs; docs/speed-history.md).
#[inline(always)]
pub(crate) fn prefetch<T>(v: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if i < v.len() {
        // SAFETY: prefetching is a hint with no memory effects (it never
        // faults), and the address is inside `v` anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                v.as_ptr().wrapping_add(i) as *const i8
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, i);
}

/// `ln(1 + d)` for the document frequencies most buckets have, looked up
/// instead of computed (the same f32 expression, so the same values).
const LN_1P_TABLE: usize = 8192;

fn ln_1p_table() -> &'static [f32] {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| (0..LN_1P_TABLE).map(|d| (1.0 + d as f32).ln()).collect())
}

impl DocFreq {
    pub fn new(buckets: usize) -> Self {
        DocFreq {
            df: crate::hugepages::zeroed(buckets),
            docs: 0,
            ln_docs: 0.0,
        }
    }

    /// Rebuilds the state after a restore.
    pub(crate) fn with_counts(df: Vec<u32>, docs: u64) -> Self {
        DocFreq {
            df,
            docs,
            ln_docs: (1.0 + docs as f32).ln(),
        }
    }

    /// Sets the documents observed (a replica's delta).
    pub(crate) fn set_docs(&mut self, docs: u64) {
        self.docs = docs;
        self.ln_docs = (1.0 + docs as f32).ln();
    }

    /// The IDF weight of a bucket with document frequency `df`, `table`
    /// from [`ln_1p_table`].
    #[inline(always)]
    fn weight_of(&self, df: u32, table: &[f32]) -> f32 {
        let ln_df = match table.get(df as usize) {
            Some(&l) => l,
            None => (1.0 + df as f32).ln(),
        };
        self.ln_docs - ln_df + 1.0
    }

    /// Multiplies every value of `x` by its bucket's IDF weight, calling
    /// `also` with each bucket when its count is prefetched.
    pub fn weigh(&self, x: &mut SparseVec, also: impl Fn(u32)) {
        /// How many features ahead the counts are fetched: they are
        /// scattered over megabytes, a cache miss each (see [`prefetch`]).
        const AHEAD: usize = 32;
        let table = ln_1p_table();
        let (idx, val) = (&x.idx, &mut x.val);
        for (j, (&i, v)) in idx.iter().zip(val.iter_mut()).enumerate() {
            if let Some(&ahead) = idx.get(j + AHEAD) {
                prefetch(&self.df, ahead as usize);
                also(ahead);
            }
            *v *= self.weight_of(self.df[i as usize], table);
        }
    }

    /// Counts one document: the buckets of its features.
    pub fn observe(&mut self, buckets: &[u32]) {
        for &i in buckets {
            let d = &mut self.df[i as usize];
            *d = d.saturating_add(1);
        }
        self.docs += 1;
        self.ln_docs = (1.0 + self.docs as f32).ln();
    }

    /// Takes back [`DocFreq::observe`] of the same buckets (a document
    /// forgotten).
    pub fn forget(&mut self, buckets: &[u32]) {
        for &i in buckets {
            if let Some(d) = self.df.get_mut(i as usize) {
                *d = d.saturating_sub(1);
            }
        }
        self.docs = self.docs.saturating_sub(1);
        self.ln_docs = (1.0 + self.docs as f32).ln();
    }
}
