//! The stack's added members: learners beside the model's own scores
//! (the linear weights, the personal copies, the fused naive Bayes) that
//! read a message's head and give the stack one log-odds each (the byte
//! LR: `super::byte_lr`; the byte context models: `super::compression`).
//! Each is one file behind [`Added`]: it scores a prepared message, learns
//! a lesson and takes it back, says its name, holds its state as slots of
//! a few values (what checkpoints and model records carry, by name, and
//! what a replica's delta puts in place), notes what learning changed.
//!
//! A new member is its file plus one line in [`REGISTRY`] (and, to be
//! added by a flag, a line in `config`): the stack gives it a weight, the
//! pipeline adds it as `--<name>`'s settings say, checkpoints, model
//! records, deltas and explanations carry it by name. The registry's
//! order is the stack's (its weights are stored in it): a member is
//! appended, never inserted.

use crate::features::SparseVec;

pub mod byte_lr;
pub mod compression;

/// What an added member reads of a message's head, which the front stage
/// fills into its features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// The distinct byte 4-gram buckets of the head (`SparseVec::head`).
    Grams,
    /// The first bytes of the document, at most this many
    /// (`SparseVec::bytes`).
    Bytes(usize),
}

/// A member of the stack added beside the model's own scores (see the
/// module's doc). Binary single-label tasks only: a third class or a
/// multi-label task drops it.
pub trait Added: std::fmt::Debug + Send + Sync {
    /// Its name: its stack weight's, its flag's, its state's in
    /// checkpoints and model records.
    fn name(&self) -> &'static str;

    /// What it reads of a message.
    fn reads(&self) -> Reads;

    /// Its log-odds of class 1 for `x`; none when it does not score it
    /// (nothing of what it reads).
    fn margin(&self, x: &SparseVec) -> Option<f32>;

    /// Learns `x` of class `gold` (0 or 1) at `weight`, from its margin
    /// before the lesson (`margin`, when the prediction had it). Returns
    /// what [`Added::unlearn`] needs besides (a step; 0 when none).
    fn learn(&mut self, x: &SparseVec, gold: usize, margin: Option<f32>, weight: f32) -> f32;

    /// Takes back what [`Added::learn`] taught at `x` (the same message's
    /// features) for `gold` (none: not a single class) at `weight`, which
    /// returned `step`.
    fn unlearn(&mut self, x: &SparseVec, gold: Option<usize>, weight: f32, step: f32);

    /// From now on, notes the slots learning changes.
    fn track_changes(&mut self);

    /// The slots changed since the last call (ascending), and a clean
    /// slate; none when changes are not tracked.
    fn take_changes(&mut self) -> Option<Vec<u32>>;

    /// A copy without the change tracking (copies that only score).
    fn scoring_copy(&self) -> Box<dyn Added>;

    /// A copy, change tracking and all.
    fn boxed_clone(&self) -> Box<dyn Added>;

    /// Bytes its state holds.
    fn bytes(&self) -> usize;

    /// Values a slot holds.
    fn width(&self) -> usize;

    /// Its slots holding anything, ascending, and their values
    /// ([`Added::width`] each): what a checkpoint or a full version holds.
    fn nonzero(&self) -> (Vec<u32>, Vec<f32>);

    /// The values of `slots` (ascending): what a delta carries of the
    /// slots it changed.
    fn values_of(&self, slots: &[u32]) -> Vec<f32>;

    /// Whether [`Added::put`] would take `slots` and `values`.
    fn fits(&self, slots: &[u32], values: &[f32]) -> bool;

    /// Sets `slots` to `values`; false (nothing set) when they do not fit.
    fn put(&mut self, slots: &[u32], values: &[f32]) -> bool;
}

/// A member of the registry: its name and how a new one is made.
pub struct Entry {
    pub name: &'static str,
    /// A new member (nothing learned).
    pub make: fn() -> Box<dyn Added>,
    /// Whether a model adds it at the first raw e-mail unless told
    /// otherwise (else only when its flag says so).
    pub on_email: bool,
}

/// Every added member, in the stack's order (see the module's doc).
#[cfg(not(test))]
pub const REGISTRY: &[Entry] = &[byte_lr::ENTRY, compression::ENTRY];

/// Every added member, in the stack's order, and the proof that a member
/// is one file and this line: a length-only member, in the tests.
#[cfg(test)]
pub const REGISTRY: &[Entry] = &[byte_lr::ENTRY, compression::ENTRY, length::ENTRY];

/// How many added members there are.
pub const ADDED: usize = REGISTRY.len();

/// The registry's index of the member named `name`.
pub fn index_of(name: &str) -> Option<usize> {
    REGISTRY.iter().position(|e| e.name == name)
}

/// The added members a model holds, one slot per member of the registry.
#[derive(Debug, Default)]
pub struct Members([Option<Box<dyn Added>>; ADDED]);

impl Clone for Members {
    fn clone(&self) -> Self {
        Members(std::array::from_fn(|i| self.0[i].as_ref().map(|m| m.boxed_clone())))
    }
}

impl Members {
    /// Member `i` of the registry, if held.
    pub fn get(&self, i: usize) -> Option<&dyn Added> {
        self.0.get(i)?.as_deref()
    }

    /// Member `i` of the registry, if held, to learn.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut (dyn Added + 'static)> {
        self.0.get_mut(i)?.as_deref_mut()
    }

    /// The member named `name`, if held.
    pub fn named(&self, name: &str) -> Option<&dyn Added> {
        self.get(index_of(name)?)
    }

    /// Every member held, with its registry index.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &dyn Added)> {
        self.0.iter().enumerate().filter_map(|(i, m)| Some((i, m.as_deref()?)))
    }

    /// Every member held, to learn.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut (dyn Added + 'static))> {
        self.0
            .iter_mut()
            .enumerate()
            .filter_map(|(i, m)| Some((i, m.as_deref_mut()?)))
    }

    /// The state of the member named `name`, if held: its slots holding
    /// anything and their values.
    pub fn state(&self, name: &str) -> Option<(Vec<u32>, Vec<f32>)> {
        Some(self.named(name)?.nonzero())
    }

    /// Whether any member is held.
    pub fn any(&self) -> bool {
        self.0.iter().any(Option::is_some)
    }

    /// Puts `member` in slot `i` (its registry index).
    pub fn set(&mut self, i: usize, member: Box<dyn Added>) {
        if let Some(slot) = self.0.get_mut(i) {
            *slot = Some(member);
        }
    }

    /// Drops every member; the names of those held.
    pub fn clear(&mut self) -> Vec<&'static str> {
        self.0.iter_mut().filter_map(|m| Some(m.take()?.name())).collect()
    }

    /// Copies that only score.
    pub fn scoring_copy(&self) -> Members {
        Members(std::array::from_fn(|i| self.0[i].as_ref().map(|m| m.scoring_copy())))
    }

    /// Bytes their states hold.
    pub fn bytes(&self) -> usize {
        self.iter().map(|(_, m)| m.bytes()).sum()
    }

    /// Their margins for `x`, by registry index (none: not held, or not
    /// scoring `x`).
    pub fn margins(&self, x: &SparseVec) -> [Option<f32>; ADDED] {
        std::array::from_fn(|i| self.get(i)?.margin(x))
    }
}

/// The proof of the trait: a member that reads nothing but the head's
/// length, an online logistic regression on `ln(1 + bytes)` and a bias,
/// added in the tests only (its file and the registry's line are all it
/// takes: the pipeline's tests run it through learning, forgetting,
/// checkpoints and a replica's delta).
#[cfg(test)]
pub(crate) mod length;
