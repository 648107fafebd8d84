//! What the caller that drives a pipeline asks of its labeled and test
//! examples beyond a daemon's work, given with each message
//! ([`super::Pipeline::handle_entry`]). A daemon asks nothing
//! ([`Daemon`]); `eval` brings its own from outside (commands/eval.rs: a
//! label budget, label noise, train examples kept for its extra passes,
//! test examples scored after all training).

use super::settings::HeldExample;

/// The caller's say in how labeled and test examples are learned and
/// scored; every method's default is a daemon's.
pub trait Driver {
    /// Whether a labeled example is learned only when the review asks a
    /// person for its label (all are still predicted and counted first).
    fn budgets_labels(&self) -> bool {
        false
    }

    /// The class the learner sees for gold `class` (of `classes`) of the
    /// `n`th labeled example; the metrics count the gold one.
    fn seen_class(&mut self, _n: u64, class: usize, _classes: usize) -> usize {
        class
    }

    /// Whether the raw features of learned train-split examples are
    /// wanted ([`Driver::learned`]).
    fn keeps_train(&self) -> bool {
        false
    }

    /// A learned train-split example, when [`Driver::keeps_train`].
    fn learned(&mut self, _example: HeldExample) {}

    /// A test-split example: handed back to be scored now, or taken (the
    /// caller scores it later: [`super::Pipeline::score_test`]).
    fn test(&mut self, example: HeldExample) -> Option<HeldExample> {
        Some(example)
    }
}

/// A daemon's driver: every label learned as given, test examples scored
/// at once, nothing kept.
#[derive(Clone, Copy, Debug, Default)]
pub struct Daemon;

impl Driver for Daemon {}
