//! A length-only member, the proof that a member is one file and a line
//! of the registry: an online logistic regression on a message's head
//! length, `ln(1 + bytes)`, and a bias, two weights in two slots. Added
//! in the tests only.

use super::{Added, Entry, Reads};
use crate::features::SparseVec;

/// Its line of the registry.
pub(crate) const ENTRY: Entry = Entry {
    name: "length",
    make: || Box::new(Length::default()),
    on_email: false,
};

/// Bytes of the head it measures, at most.
const LONGEST: usize = 256;
/// Its learning rate.
const RATE: f32 = 1.0;

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Length {
    /// The length's weight, then the bias.
    w: [f32; 2],
    /// Whether learning changed each slot since the changes were taken
    /// (none: not tracked).
    changed: Option<[bool; 2]>,
}

impl Length {
    fn input(x: &SparseVec) -> f32 {
        (1.0 + x.bytes.len().min(LONGEST) as f32).ln()
    }

    fn step(&mut self, x: &SparseVec, by: f32) {
        self.w[0] += by * Self::input(x);
        self.w[1] += by;
        if let Some(c) = &mut self.changed {
            *c = [true, true];
        }
    }
}

impl Added for Length {
    fn name(&self) -> &'static str {
        ENTRY.name
    }

    fn reads(&self) -> Reads {
        Reads::Bytes(LONGEST)
    }

    fn margin(&self, x: &SparseVec) -> Option<f32> {
        Some(self.w[0] * Self::input(x) + self.w[1])
    }

    fn learn(&mut self, x: &SparseVec, gold: usize, margin: Option<f32>, weight: f32) -> f32 {
        let m = margin.or_else(|| self.margin(x)).unwrap_or(0.0);
        let p = crate::model::sigmoid(m.clamp(-30.0, 30.0));
        let step = RATE * weight * (f32::from(u8::from(gold == 1)) - p);
        self.step(x, step);
        step
    }

    fn unlearn(&mut self, x: &SparseVec, _: Option<usize>, _: f32, step: f32) {
        self.step(x, -step);
    }

    fn track_changes(&mut self) {
        self.changed.get_or_insert([false; 2]);
    }

    fn take_changes(&mut self) -> Option<Vec<u32>> {
        let c = self.changed.as_mut()?;
        let slots = (0..2u32).filter(|&s| c[s as usize]).collect();
        *c = [false; 2];
        Some(slots)
    }

    fn scoring_copy(&self) -> Box<dyn Added> {
        Box::new(Length {
            w: self.w,
            changed: None,
        })
    }

    fn boxed_clone(&self) -> Box<dyn Added> {
        Box::new(self.clone())
    }

    fn bytes(&self) -> usize {
        8
    }

    fn width(&self) -> usize {
        1
    }

    fn nonzero(&self) -> (Vec<u32>, Vec<f32>) {
        (0..2u32)
            .filter(|&s| self.w[s as usize] != 0.0)
            .map(|s| (s, self.w[s as usize]))
            .unzip()
    }

    fn values_of(&self, slots: &[u32]) -> Vec<f32> {
        slots
            .iter()
            .map(|&s| self.w.get(s as usize).copied().unwrap_or(0.0))
            .collect()
    }

    fn fits(&self, slots: &[u32], values: &[f32]) -> bool {
        slots.len() == values.len() && slots.iter().all(|&s| s < 2) && values.iter().all(|v| v.is_finite())
    }

    fn put(&mut self, slots: &[u32], values: &[f32]) -> bool {
        let fits = self.fits(slots, values);
        if fits {
            for (&s, &v) in slots.iter().zip(values) {
                self.w[s as usize] = v;
            }
        }
        fits
    }
}
