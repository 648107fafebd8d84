//! The model's document counts (IDF): where they are kept, [`DocFreq`]'s
//! own table or the cells its weight rows carry (`weights::counts`, one
//! cache line a feature for both), and every read and write of them, so no
//! other code needs to know which.

use super::weights::{RowCounts, RowCountsMut};
use super::{Model, State};
use crate::features::{CountCells, CountCellsMut, DocFreq, SparseVec};

/// The cells the document counts are changed in.
enum Cells<'a> {
    Own(&'a mut [u32]),
    Rows(RowCountsMut<'a>),
}

impl CountCellsMut for Cells<'_> {
    #[inline(always)]
    fn update(&mut self, bucket: u32, f: impl FnOnce(u32) -> u32) {
        match self {
            Cells::Own(df) => df.update(bucket, f),
            Cells::Rows(rows) => rows.update(bucket, f),
        }
    }
}

impl Model {
    /// Document frequencies, when the features are IDF-weighted (their
    /// counts through [`Model::doc_count`]).
    pub fn doc_freq(&self) -> Option<&DocFreq> {
        self.doc_freq.as_ref()
    }

    /// Multiplies `x`'s values by their IDF weights (when the features are
    /// IDF-weighted), prefetching each feature's rows on the way.
    #[inline]
    pub fn weigh_idf(&self, x: &mut SparseVec) {
        let Some(d) = &self.doc_freq else { return };
        match self.row_counts() {
            // The count shares its line with the weights: fetching it
            // fetches them; the fusion's counts are elsewhere.
            Some(rows) => d.weigh_in(&rows, x, |b| {
                if let Some(f) = &self.fusion {
                    f.prefetch_row(b);
                }
            }),
            None => d.weigh_in(&d.df[..], x, |b| self.prefetch_row(b)),
        }
    }

    /// The document count of `bucket` (0 without IDF or out of range).
    pub fn doc_count(&self, bucket: u32) -> u32 {
        match (self.row_counts(), &self.doc_freq) {
            (Some(rows), _) => rows.count(bucket),
            (None, Some(d)) => d.df.count(bucket),
            (None, None) => 0,
        }
    }

    /// Buckets with a document count (0 without IDF).
    pub fn doc_buckets(&self) -> usize {
        match (self.row_counts(), &self.doc_freq) {
            (Some(rows), _) => rows.buckets(),
            (None, Some(d)) => d.df.buckets(),
            (None, None) => 0,
        }
    }

    /// Sets the document count of `bucket` (a replica's delta).
    pub(crate) fn set_doc_count(&mut self, bucket: u32, count: u32) {
        self.update_counts(|_, cells| cells.update(bucket, |_| count));
    }

    /// Sets the documents observed (a replica's delta).
    pub(crate) fn set_docs(&mut self, docs: u64) {
        if let Some(d) = &mut self.doc_freq {
            d.set_docs(docs);
        }
    }

    /// Counts a learned document's features (their buckets, without the
    /// bias) into the document frequencies.
    pub fn observe_doc(&mut self, buckets: &[u32]) {
        if self.doc_freq.is_some() {
            self.update_counts(|d, cells| d.observe_in(cells, buckets));
            self.mark(buckets.iter().copied());
        }
    }

    /// Takes a document counted by [`Model::observe_doc`] out of the
    /// document frequencies again (a message forgotten, or about to be
    /// learned again under another label).
    pub fn forget_doc(&mut self, buckets: &[u32]) {
        if self.doc_freq.is_some() {
            self.update_counts(|d, cells| d.forget_in(cells, buckets));
            self.mark(buckets.iter().copied());
        }
    }

    /// Runs `f` on the document frequencies and the cells their counts are
    /// in (nothing without IDF).
    fn update_counts(&mut self, f: impl FnOnce(&mut DocFreq, &mut Cells<'_>)) {
        let Some(d) = &mut self.doc_freq else { return };
        // The own table is moved out for the call (a pointer's move), so
        // the frequencies and their cells can be lent at once.
        let mut own = d.take_counts();
        let rows = match &mut self.state {
            State::Linear(w) => w.row_counts_mut(),
            State::NaiveBayes(_) => None,
        };
        let mut cells = match rows {
            Some(rows) => Cells::Rows(rows),
            None => Cells::Own(&mut own),
        };
        f(d, &mut cells);
        d.put_counts(own);
    }

    /// The counts in the weight rows, when they are there.
    fn row_counts(&self) -> Option<RowCounts<'_>> {
        match &self.state {
            State::Linear(w) => w.row_counts(),
            State::NaiveBayes(_) => None,
        }
    }

    /// Puts the document counts where they belong after the model is built
    /// or its rows change: into dense weight rows that can carry them, back
    /// into the frequencies' own table from rows made sparse.
    pub(super) fn settle_counts(&mut self) {
        let (Some(d), State::Linear(w)) = (&mut self.doc_freq, &mut self.state) else {
            return;
        };
        if let Some(df) = w.take_released_counts() {
            d.put_counts(df);
        }
        if w.can_hold_counts()
            && !d.df.is_empty()
            && let Err(df) = w.adopt_counts(d.take_counts())
        {
            d.put_counts(df);
        }
        // One home: the rows, or the table.
        debug_assert!(w.holds_counts() == d.df.is_empty());
    }

    /// Moves the document counts out of the weight rows (before these are
    /// re-laid out or replaced).
    pub(super) fn release_counts(&mut self) {
        if let (Some(d), State::Linear(w)) = (&mut self.doc_freq, &mut self.state)
            && let Some(df) = w.release_counts()
        {
            d.put_counts(df);
        }
    }
}
