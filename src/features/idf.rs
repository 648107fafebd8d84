//! Document frequencies and IDF weights, learned from the stream (part of
//! the model's state), and the prefetch hint their scattered lookups use.

use super::SparseVec;

/// Document frequencies learned from the stream, for IDF weighting:
/// `idf(f) = ln((1 + N) / (1 + df(f))) + 1` (scikit-learn's smooth IDF),
/// with N the documents observed. Part of the model's learned state.
///
/// The counts per bucket sit in `df`, or (then `df` is empty) in cells the
/// model keeps beside its weights, one cache line for both
/// (`model::weights::counts`): the methods take the cells to use
/// ([`CountCells`]), and the model says which.
#[derive(Clone, Debug, PartialEq)]
pub struct DocFreq {
    /// Documents containing each bucket (empty while the model's weight
    /// rows carry the counts).
    pub(crate) df: Vec<u32>,
    /// Documents observed.
    pub(crate) docs: u64,
    /// `ln(1 + docs)`.
    ln_docs: f32,
}

/// Where a model's document counts are read: [`DocFreq`]'s own table
/// (`[u32]`) or cells beside the weights.
pub trait CountCells {
    /// The count of `bucket` (0 out of range).
    fn count(&self, bucket: u32) -> u32;
    /// Hints the CPU to fetch `bucket`'s count (see [`prefetch`]).
    fn prefetch(&self, bucket: u32);
    /// Buckets counted.
    fn buckets(&self) -> usize;
}

/// Where a model's document counts are changed.
pub trait CountCellsMut {
    /// Sets `bucket`'s count to `f` of it (nothing out of range).
    fn update(&mut self, bucket: u32, f: impl FnOnce(u32) -> u32);
}

impl CountCells for [u32] {
    #[inline(always)]
    fn count(&self, bucket: u32) -> u32 {
        self.get(bucket as usize).copied().unwrap_or(0)
    }
    #[inline(always)]
    fn prefetch(&self, bucket: u32) {
        prefetch(self, bucket as usize);
    }
    fn buckets(&self) -> usize {
        self.len()
    }
}

impl CountCellsMut for [u32] {
    #[inline(always)]
    fn update(&mut self, bucket: u32, f: impl FnOnce(u32) -> u32) {
        if let Some(d) = self.get_mut(bucket as usize) {
            *d = f(*d);
        }
    }
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

    /// Frequencies whose counts the model's weight rows carry (no table here).
    pub fn in_rows() -> Self {
        Self::with_counts(Vec::new(), 0)
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

    /// Multiplies every value of `x` by its bucket's IDF weight, its count
    /// read from `cells`, calling `also` with each bucket when its count is
    /// prefetched.
    pub(crate) fn weigh_in<C: CountCells + ?Sized>(&self, cells: &C, x: &mut SparseVec, also: impl Fn(u32)) {
        /// How many features ahead the counts are fetched: they are
        /// scattered over megabytes, a cache miss each (see [`prefetch`]).
        const AHEAD: usize = 32;
        let table = ln_1p_table();
        let (idx, val) = (&x.idx, &mut x.val);
        for (j, (&i, v)) in idx.iter().zip(val.iter_mut()).enumerate() {
            if let Some(&ahead) = idx.get(j + AHEAD) {
                cells.prefetch(ahead);
                also(ahead);
            }
            *v *= self.weight_of(cells.count(i), table);
        }
    }

    /// Counts one document, the buckets of its features, in `cells`.
    pub fn observe_in<C: CountCellsMut + ?Sized>(&mut self, cells: &mut C, buckets: &[u32]) {
        for &i in buckets {
            cells.update(i, |d| d.saturating_add(1));
        }
        self.set_docs(self.docs + 1);
    }

    /// Takes back [`DocFreq::observe_in`] of the same buckets (a document
    /// forgotten).
    pub fn forget_in<C: CountCellsMut + ?Sized>(&mut self, cells: &mut C, buckets: &[u32]) {
        for &i in buckets {
            cells.update(i, |d| d.saturating_sub(1));
        }
        self.set_docs(self.docs.saturating_sub(1));
    }

    /// Takes the counts out (for the model's weight rows to carry).
    pub(crate) fn take_counts(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.df)
    }

    /// Puts counts taken out back.
    pub(crate) fn put_counts(&mut self, df: Vec<u32>) {
        self.df = df;
    }
}
