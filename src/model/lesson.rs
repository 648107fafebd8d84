//! What one learning step taught, kept so that it can be taken back: a
//! label replaced by another, or a message forgotten (docs/feedback.md).
//!
//! A [`Lesson`] is the step's own record, a few numbers: the label's
//! weight, the linear step's rate and its gradient per class that moved,
//! the added members' steps and the stack's (the classes are the label's, which the record
//! that keeps the lesson holds). [`Model::unlearn`] takes the step back at
//! the message's features (featurized again from its text):
//!
//! - naive Bayes counts (the learner's or the fused member's): exactly,
//!   but for rounding, at the features the message was learned with (the
//!   pipeline finishes them with the document frequencies less the
//!   message, as they were; other messages learned since move them a
//!   little);
//! - the added members (`super::member`): each as it says (the byte LR,
//!   a constant rate, and the byte context models' counts: exactly, but
//!   for rounding);
//! - AdaGrad: its sums exactly (a sum of squares forgets one in any
//!   order); each weight by the same step at the rate its coordinate has
//!   now, so exactly where no later step touched the coordinate and a
//!   little less than it moved where later steps shrank the rate;
//! - a plain or AROW step: by what it moved, at today's variance for AROW;
//! - the stack (`super::stack`): at the members' log-odds for the message
//!   once they have taken their own steps back, which are those it learned
//!   from when nothing was learned since (so an undo right after a label
//!   puts the message's margin back), its sums exactly.
//!
//! What it does not take back: the fusion's weight of naive Bayes inside
//! the linear model (one number, fitted over every example) and the
//! later steps that the label's effect on the model shaped. Measured on
//! the shared streams (docs/feedback.md), a forgotten label leaves a model
//! that agrees with the one that never saw it on over 99.8 % of messages.

use super::{Model, Schedule, State, Task};
use crate::features::SparseVec;

/// One learning step's record (see the module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lesson {
    /// How far the label was believed: the step's scale.
    pub weight: f32,
    /// The linear step's learning rate.
    pub rate: f32,
    /// Per class the linear step moved, its gradient (the label's weight
    /// in it): the step on a feature is this times the feature's value.
    pub moves: Few<(u32, f32)>,
    /// What each added member's step returned, by registry index (the
    /// byte LR's: the step each of its grams took; 0: none).
    pub added_steps: [f32; super::member::ADDED],
    /// The stack's step (a scale of 0: none).
    pub stack_step: super::stack::Step,
    /// The step left the message's personal copies out (one of its
    /// user's first labels): taking it back leaves them too.
    pub shared_only: bool,
}

impl Lesson {
    pub(super) fn new(weight: f32) -> Self {
        Lesson {
            weight,
            ..Lesson::default()
        }
    }

    /// Keeps the classes a step moved, with their gradients.
    pub(super) fn keep_moves(&mut self, moves: impl Iterator<Item = (usize, f32)>) {
        self.moves = moves
            .filter(|&(_, g)| g != 0.0 && g.is_finite())
            .map(|(c, g)| (c as u32, g))
            .collect();
    }

    /// Bytes it holds, for the bound of the record that keeps it.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.moves.rest.len() * 8
    }
}

/// A short list whose first item is held inline: a binary model's step
/// moves one class, so its lesson, kept for every learned message, costs
/// no allocation.
#[derive(Clone, Debug, PartialEq)]
pub struct Few<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T> Default for Few<T> {
    fn default() -> Self {
        Few {
            first: None,
            rest: Vec::new(),
        }
    }
}

impl<T: Copy> Few<T> {
    /// The items, in order.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        self.first.into_iter().chain(self.rest.iter().copied())
    }
}

impl<T> FromIterator<T> for Few<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let mut items = items.into_iter();
        Few {
            first: items.next(),
            rest: items.collect(),
        }
    }
}

impl Model {
    /// Takes back what `lesson` taught at `x` as gold classes `gold`: the
    /// same message's features finished as they were when it was learned
    /// (see the module doc for how exactly), as a new version of the model.
    pub fn unlearn(&mut self, x: &SparseVec, gold: &[usize], lesson: &Lesson) {
        self.version += 1;
        self.mark(x.idx.iter().copied());
        if gold.iter().any(|&c| c >= self.labels.len()) {
            return;
        }
        let weight = lesson.weight;
        let w = match &mut self.state {
            State::NaiveBayes(nb) => {
                nb.unlearn_entries(x.iter().map(|(b, v)| (b, v * weight)), gold);
                return;
            }
            State::Linear(w) => w,
        };
        let h = &self.hyper;
        let single = self.task != Some(Task::MultiLabel);
        let stepped = if lesson.shared_only && x.personal > 0 {
            x.personal as usize
        } else {
            x.len()
        };
        for (f, val) in x.iter().take(stepped) {
            for (c, g) in lesson.moves.iter() {
                let c = c as usize;
                match h.schedule {
                    Schedule::AdaGrad => w.adagrad_undo(f, c, lesson.rate, h.adagrad_beta, g * val),
                    Schedule::Arow => w.arow_undo(f, c, g * val, val * val / h.arow_r),
                    _ => w.undo_add(f, c, lesson.rate * g * val),
                }
            }
        }
        if let (Some(fusion), [gold], true) = (&mut self.fusion, gold, single) {
            fusion.unlearn(x, *gold, weight);
        }
        let one = match (gold, single) {
            ([gold], true) => Some(*gold),
            _ => None,
        };
        for (i, m) in self.added.iter_mut() {
            m.unlearn(x, one, weight, lesson.added_steps[i]);
        }
        if lesson.stack_step.scale != 0.0 && self.stack.is_some() {
            let mut now = super::Scored::default();
            self.raw_scores(x, &mut now);
            if let (Some(stack), Some(s)) = (&mut self.stack, now.stacked) {
                stack.unlearn(&s.inputs, &lesson.stack_step);
            }
        }
    }
}
