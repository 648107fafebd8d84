//! [`Weights`] as plain parts, for checkpoints and the model topic: dense
//! rows without their spare room, or sparse entries, with the scalars.

use super::dense::relayout;
use super::{DEFAULT_BUDGET, MAX_SLOTS, SparseRows, Weights};

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
    /// The sparse layout's entries as (bucket << 32 | class) keys, sorted,
    /// and `slots` values each (then `buf` is empty).
    pub entries: Option<(Vec<u64>, Vec<f32>)>,
}

impl Weights {
    /// The rows without spare room: `[bucket][slot][column]`, `slots *
    /// columns` floats per row (the checkpoint layout; one column for a
    /// mirrored pair).
    pub fn compact(&self) -> Vec<f32> {
        relayout(
            &self.buf,
            self.buckets,
            self.slots(),
            (self.cap, self.counts as usize),
            (self.columns(), 0),
            self.columns(),
        )
    }

    /// Floats per row of [`Weights::compact`].
    pub fn compact_stride(&self) -> usize {
        match self.sparse {
            Some(_) => self.slots(),
            None => self.slots() * self.columns(),
        }
    }

    pub fn to_parts(&self) -> WeightsParts {
        let entries = self.sparse.as_ref().map(|sp| {
            let slots = self.slots();
            let mut keys = Vec::new();
            let mut values = Vec::new();
            for (b, c, e) in sp.iter() {
                keys.push((b as u64) << 32 | c as u64);
                values.extend((0..slots).map(|s| sp.get(e, s)));
            }
            (keys, values)
        });
        let (meta, _) = self.meta();
        WeightsParts {
            buf: if entries.is_some() { Vec::new() } else { self.compact() },
            entries,
            ..meta
        }
    }

    /// Rebuilds weights from checkpointed parts; `None` if the sizes disagree.
    pub fn from_parts(p: WeightsParts) -> Option<Self> {
        let slots = 1 + p.averaged as usize + p.adagrad as usize;
        if p.mirrored && p.classes != 2 {
            return None;
        }
        if p.scale.is_nan() || p.scale <= 0.0 {
            return None;
        }
        let columns = if p.mirrored { 1 } else { p.classes };
        let sparse = match p.entries {
            Some((keys, values)) => {
                // A key's low half is its class.
                if p.mirrored
                    || !p.buf.is_empty()
                    || values.len() != keys.len().checked_mul(slots)?
                    || keys.iter().any(|&k| k as u32 as usize >= p.classes)
                {
                    return None;
                }
                // Room for the entries (a row's room is under twice its
                // length), so nothing is pruned here; the owner sets its
                // budget next ([`Weights::set_budget`]), which sizes the arena.
                let max = 2 * keys.len() + 1;
                let entries = keys.iter().zip(values.chunks_exact(slots)).map(|(&k, v)| {
                    let mut vals = [0.0; MAX_SLOTS];
                    vals[..slots].copy_from_slice(v);
                    ((k >> 32) as u32, k as u32, vals)
                });
                Some(SparseRows::from_entries(p.buckets, slots, max, entries)?)
            }
            None => {
                let n = p.buckets.checked_mul(columns)?.checked_mul(slots)?;
                if p.buf.len() != n {
                    return None;
                }
                None
            }
        };
        let cap = if sparse.is_some() { 0 } else { columns };
        Some(Weights {
            buckets: p.buckets,
            classes: p.classes,
            cap,
            buf: p.buf,
            scale: p.scale,
            inv_scale: (1.0 / p.scale) as f32,
            bsum_f32: p.bsum as f32,
            bsum: p.bsum,
            steps: p.steps,
            averaged: p.averaged,
            adagrad: p.adagrad,
            mirrored: p.mirrored,
            sparse,
            counts: false,
            released: None,
            budget: DEFAULT_BUDGET,
        })
    }
}
