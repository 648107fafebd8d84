//! Multinomial naive Bayes with online counts and Laplace (add-alpha)
//! smoothing: the classic spam-filter baseline. Single-label tasks score
//! `log P(k) + sum_f x_f log P(f|k)`; multi-label tasks keep, per label, the
//! counts of documents with the label and compare them with all documents
//! (one-vs-rest log odds).

use crate::features::SparseVec;

use super::weights::widen_buffer;

/// Online counts. Layout of `counts`: `[bucket][class]`, like the weights.
#[derive(Clone, Debug, PartialEq)]
pub struct NaiveBayes {
    pub(crate) buckets: usize,
    pub(crate) classes: usize,
    /// Summed feature values per bucket and class.
    pub(crate) counts: Vec<f32>,
    /// Summed feature values per bucket over all documents (multi-label only).
    pub(crate) totals: Vec<f32>,
    /// Summed feature values per class.
    pub(crate) class_mass: Vec<f64>,
    /// Documents per class.
    pub(crate) class_docs: Vec<u64>,
    /// Documents seen.
    pub(crate) docs: u64,
    /// Summed feature values over all documents.
    pub(crate) mass: f64,
    /// Buckets that have any count: the vocabulary size in the smoothing.
    pub(crate) vocabulary: u64,
}

impl NaiveBayes {
    pub fn new(buckets: usize, multilabel: bool) -> Self {
        NaiveBayes {
            buckets,
            classes: 0,
            counts: Vec::new(),
            totals: if multilabel { vec![0.0; buckets] } else { Vec::new() },
            class_mass: Vec::new(),
            class_docs: Vec::new(),
            docs: 0,
            mass: 0.0,
            vocabulary: 0,
        }
    }

    pub fn add_class(&mut self) {
        self.counts = widen_buffer(&self.counts, self.buckets, self.classes);
        self.classes += 1;
        self.class_mass.push(0.0);
        self.class_docs.push(0);
    }

    fn multilabel(&self) -> bool {
        !self.totals.is_empty()
    }

    /// Log-scores (single-label) or log-odds per label (multi-label) into `out`.
    pub fn scores(&self, x: &SparseVec, alpha: f32, out: &mut [f32]) {
        self.scores_entries(x.iter(), alpha, out);
    }

    /// [`NaiveBayes::scores`] of a document given as (bucket, value) entries.
    pub fn scores_entries(&self, x: impl Iterator<Item = (u32, f32)> + Clone, alpha: f32, out: &mut [f32]) {
        let k = self.classes;
        let xsum = x.clone().map(|(_, v)| v).sum::<f32>();
        let alpha = alpha as f64;
        let v = (self.vocabulary.max(1)) as f64;
        if !self.multilabel() {
            for (c, o) in out[..k].iter_mut().enumerate() {
                let prior = ((self.class_docs[c] as f64 + 1.0) / (self.docs as f64 + k as f64)).ln();
                *o = prior as f32 - (xsum as f64 * (self.class_mass[c] + alpha * v).ln()) as f32;
            }
            for (i, val) in x {
                let row = &self.counts[i as usize * k..i as usize * k + k];
                for (o, &cnt) in out[..k].iter_mut().zip(row) {
                    *o += val * (cnt + alpha as f32).ln();
                }
            }
        } else {
            let xsum = xsum as f64;
            for (c, o) in out[..k].iter_mut().enumerate() {
                let pos_docs = self.class_docs[c] as f64;
                let neg_docs = self.docs as f64 - pos_docs;
                let prior = ((pos_docs + 0.5) / (neg_docs + 0.5)).ln();
                let neg_mass = self.mass - self.class_mass[c];
                let norm = xsum * ((neg_mass + alpha * v).ln() - (self.class_mass[c] + alpha * v).ln());
                *o = (prior + norm) as f32;
            }
            let a = alpha as f32;
            for (i, val) in x {
                let row = &self.counts[i as usize * k..i as usize * k + k];
                let total = self.totals[i as usize];
                for (o, &cnt) in out[..k].iter_mut().zip(row) {
                    *o += val * ((cnt + a).ln() - ((total - cnt).max(0.0) + a).ln());
                }
            }
        }
    }

    /// Counts one document with its gold classes.
    pub fn learn(&mut self, x: &SparseVec, gold: &[usize]) {
        self.learn_entries(x.iter(), gold);
    }

    /// [`NaiveBayes::learn`] of a document given as (bucket, value) entries.
    pub fn learn_entries(&mut self, x: impl Iterator<Item = (u32, f32)> + Clone, gold: &[usize]) {
        let k = self.classes;
        let xsum: f64 = x.clone().map(|(_, v)| v as f64).sum();
        for (i, val) in x {
            let row = &mut self.counts[i as usize * k..i as usize * k + k];
            let fresh = if self.totals.is_empty() {
                row.iter().all(|&c| c == 0.0)
            } else {
                self.totals[i as usize] == 0.0
            };
            if fresh {
                self.vocabulary += 1;
            }
            for &g in gold {
                row[g] += val;
            }
            if !self.totals.is_empty() {
                self.totals[i as usize] += val;
            }
        }
        for &g in gold {
            self.class_mass[g] += xsum;
            self.class_docs[g] += 1;
        }
        self.docs += 1;
        self.mass += xsum;
    }

    /// Takes back [`NaiveBayes::learn_entries`] of the same entries and
    /// classes: counts, masses and documents as they were before (a count
    /// left within rounding of zero is zero again, and a bucket with no
    /// count leaves the vocabulary).
    pub fn unlearn_entries(&mut self, x: impl Iterator<Item = (u32, f32)> + Clone, gold: &[usize]) {
        /// Counts of learned documents are sums of feature values (about
        /// 1 each); what rounding leaves of one taken back is far below.
        const ZERO: f32 = 1e-5;
        let k = self.classes;
        let xsum: f64 = x.clone().map(|(_, v)| v as f64).sum();
        for (i, val) in x {
            let Some(row) = self.counts.get_mut(i as usize * k..i as usize * k + k) else {
                continue;
            };
            for &g in gold.iter().filter(|&&g| g < k) {
                row[g] -= val;
                if row[g].abs() < ZERO {
                    row[g] = 0.0;
                }
            }
            let empty = match self.totals.get_mut(i as usize) {
                Some(t) => {
                    *t -= val;
                    if t.abs() < ZERO {
                        *t = 0.0;
                    }
                    *t == 0.0
                }
                None => row.iter().all(|&c| c == 0.0),
            };
            if empty {
                self.vocabulary = self.vocabulary.saturating_sub(1);
            }
        }
        for &g in gold.iter().filter(|&&g| g < k) {
            self.class_mass[g] = (self.class_mass[g] - xsum).max(0.0);
            self.class_docs[g] = self.class_docs[g].saturating_sub(1);
        }
        self.docs = self.docs.saturating_sub(1);
        self.mass = (self.mass - xsum).max(0.0);
    }
}
