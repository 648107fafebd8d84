//! One online step of a learner: the scores it starts from (a
//! prediction's, when they are the current weights'), the loss's gradient,
//! the update of the weights (plain, AdaGrad or AROW) and of the fused
//! naive Bayes, each scaled by how far the label is believed.

use super::stack::Step;
use super::{
    Learner, Lesson, Margins, Model, ModelError, Schedule, Scored, State, Task, Weights, arow, fusion, hinge, logistic,
    perceptron,
};
use crate::features::SparseVec;

impl Model {
    /// Learns one example with gold classes `gold` (ids from [`Model::intern`]).
    pub fn learn(&mut self, x: &SparseVec, gold: &[usize]) -> Result<Lesson, ModelError> {
        self.learn_scored(x, gold, None)
    }

    /// Like [`Model::learn`], reusing `predicted`, what [`Model::predict`]
    /// just returned for `x`: its raw scores when they are the current
    /// weights' (no averaging, no class added since), and its fusion inputs.
    pub fn learn_scored(
        &mut self,
        x: &SparseVec,
        gold: &[usize],
        predicted: Option<&Scored>,
    ) -> Result<Lesson, ModelError> {
        self.learn_weighted(x, gold, predicted, 1.0)
    }

    /// Like [`Model::learn_scored`], the step scaled by `weight` (in
    /// (0, 1]: how far this label is to be believed): the gradient of a
    /// linear learner, the counts of naive Bayes and of the fusion.
    /// Returns what the step taught, to take it back ([`Model::unlearn`]).
    pub fn learn_weighted(
        &mut self,
        x: &SparseVec,
        gold: &[usize],
        predicted: Option<&Scored>,
        weight: f32,
    ) -> Result<Lesson, ModelError> {
        let task = self.task.unwrap_or(Task::SingleLabel);
        if task == Task::SingleLabel && gold.len() != 1 {
            return Err(ModelError::NotSingleLabel(gold.len()));
        }
        self.version += 1;
        self.mark(x.idx.iter().copied());
        let mut lesson = Lesson::new(weight);
        let before = self.stack_before(x, predicted);
        let w = match &mut self.state {
            State::NaiveBayes(nb) if weight == 1.0 => {
                nb.learn(x, gold);
                return Ok(lesson);
            }
            State::NaiveBayes(nb) => {
                nb.learn_entries(x.iter().map(|(b, v)| (b, v * weight)), gold);
                return Ok(lesson);
            }
            State::Linear(w) => w,
        };
        let h = &self.hyper;
        let eta = step_rate(h, w.steps() + 1);
        w.begin_step(eta * h.l2);
        // The fused part of the scores, which the decay leaves alone.
        let fused = self.fusion.as_ref().map(|f| match predicted {
            // The scores of the prediction just made: its inputs too.
            Some(p) => (p.fused.unwrap_or_default(), f.weight),
            None => (f.inputs(x), f.weight),
        });
        let k = self.labels.len();
        self.scratch.resize(k, 0.0);
        self.grad.resize(k, 0.0);
        let decay = if h.l2 > 0.0 {
            (1.0 - eta * h.l2).max(0.0) as f32
        } else {
            1.0
        };
        // The prediction's own raw scores, before the stack.
        let raw = predicted.map(Scored::own_raw);
        step_scores(w, self.fusion.as_ref(), x, raw, fused, decay, &mut self.scratch);
        gradient(
            h.learner,
            task,
            &self.scratch,
            gold,
            &mut self.gold_mask,
            &mut self.grad,
        );
        if weight != 1.0 {
            self.grad.iter_mut().for_each(|g| *g *= weight);
        }
        if let (Some(f), Some((inputs, _))) = (&mut self.fusion, fused) {
            f.learn(x, inputs, &self.grad, h.fusion_rate, gold[0], weight);
        }
        let eta = eta as f32;
        lesson.rate = eta;
        if h.schedule == Schedule::Arow {
            arow::arow_step(w, x, &self.scratch, &mut self.grad, task, h.arow_r, &mut self.gold_mask);
            lesson.keep_moves(
                self.grad
                    .iter()
                    .enumerate()
                    .skip(w.mirrored() as usize)
                    .map(|(c, &g)| (c, g)),
            );
        } else {
            step_moving(w, x, h, task, &self.grad, &mut self.active, eta);
            lesson.keep_moves(self.active.iter().copied());
        }
        w.end_step();
        // `scratch` still holds the scores the step started from.
        lesson.stack_step = self.learn_stack(before, gold, fused.map(|(i, _)| i), weight);
        if let ([gold], Task::SingleLabel) = (gold, task) {
            for (i, m) in self.added.iter_mut() {
                lesson.added_steps[i] = m.learn(x, *gold, before.margins.added[i], weight);
            }
        }
        Ok(lesson)
    }
}

/// What the stack learns from, taken before the members step: the
/// prediction's inputs when it has them; else the other members'
/// margins, completed from the step's own scores.
#[derive(Clone, Copy, Default)]
struct Before {
    inputs: Option<super::stack::Inputs>,
    /// The other members' margins (the added members' alone when
    /// `inputs` are known: their steps read them).
    margins: Margins,
}

impl Model {
    /// The stack's inputs of `predicted` (the scores of the weights
    /// before this step), or what completes them from the step's scores.
    fn stack_before(&self, x: &SparseVec, predicted: Option<&Scored>) -> Before {
        if self.stack.is_none() {
            return Before::default();
        }
        match predicted.and_then(|p| p.stacked) {
            Some(s) => Before {
                inputs: Some(s.inputs),
                margins: Margins {
                    added: std::array::from_fn(|i| s.added[i].or_else(|| self.added.get(i)?.margin(x))),
                    ..Margins::default()
                },
            },
            None => Before {
                inputs: None,
                margins: Margins {
                    copies: self.copies_margin(x),
                    added: self.added.margins(x),
                },
            },
        }
    }

    /// The stack's step for a message of the one class `gold` (binary
    /// models with a stack): from the prediction's inputs, else from the
    /// scores the linear step started from (`scratch`) and the fusion's
    /// inputs `fused`. Returns the step (a scale of 0: none).
    fn learn_stack(&mut self, before: Before, gold: &[usize], fused: Option<[f32; 2]>, weight: f32) -> Step {
        let ([gold], [own_0, own_1], Some(_)) = (gold, &self.scratch[..], &self.stack) else {
            return Step::default();
        };
        let own = own_1 - own_0;
        let inputs = (before.inputs).unwrap_or_else(|| self.stack_inputs(own, fused, before.margins));
        let positive = *gold == 1;
        self.stack
            .as_mut()
            .map_or_else(Step::default, |s| s.learn(&inputs, positive, weight))
    }
}

/// A plain or AdaGrad step of `w` at rate `eta` along `grad` for the
/// classes that move, which it leaves in `active`: softmax moves every
/// class a little; past two, those it moves by less than the cut-off are
/// left (see SOFTMAX_CUTOFF). Class 0 of a mirrored pair moves with class 1.
fn step_moving(
    w: &mut Weights,
    x: &SparseVec,
    h: &super::Hyper,
    task: Task,
    grad: &[f32],
    active: &mut Vec<(usize, f32)>,
    eta: f32,
) {
    let k = grad.len();
    let cutoff = if task == Task::SingleLabel && k > 2 && h.learner == Learner::Logistic {
        SOFTMAX_CUTOFF
    } else {
        0.0
    };
    active.clear();
    let first = w.mirrored() as usize;
    active.extend(
        grad.iter()
            .enumerate()
            .skip(first)
            .filter(|(_, g)| g.abs() > cutoff)
            .map(|(c, &g)| (c, g)),
    );
    if h.schedule == Schedule::AdaGrad {
        w.adagrad_step(x, active, eta, h.adagrad_beta);
    } else {
        for (f, val) in x.iter() {
            for &(c, g) in active.iter() {
                w.add(f, c, eta * g * val);
            }
        }
    }
}

/// The learning rate of step `t` under the schedule.
fn step_rate(h: &super::Hyper, t: u64) -> f64 {
    match h.schedule {
        Schedule::Constant | Schedule::AdaGrad | Schedule::Arow => h.learning_rate as f64,
        Schedule::InvScaling => h.learning_rate as f64 / (t as f64).powf(h.power),
    }
}

/// The scores a step starts from, into `out`: the prediction's own `raw`
/// scores when they are the current weights' (decay changes every linear
/// score by the same factor, and leaves the `fused` part alone), else
/// computed again.
fn step_scores(
    w: &Weights,
    fusion: Option<&fusion::Fusion>,
    x: &SparseVec,
    raw: Option<&[f32]>,
    fused: Option<([f32; 2], f32)>,
    decay: f32,
    out: &mut [f32],
) {
    match raw {
        Some(r) if r.len() == out.len() && !w.averaged() => {
            for (c, (s, &r)) in out.iter_mut().zip(r).enumerate() {
                let part = fused.map_or(0.0, |(i, a)| a * i.get(c).copied().unwrap_or(0.0));
                *s = (r - part) * decay + part;
            }
        }
        _ => {
            w.scores(x, out);
            if let (Some(f), Some((inputs, _))) = (fusion, fused) {
                f.add(inputs, out);
            }
        }
    }
}

/// The loss's gradient for each class's score, into `grad`: the learner's,
/// for one gold class or a set of them (`mask` is the set's scratch).
fn gradient(learner: Learner, task: Task, scores: &[f32], gold: &[usize], mask: &mut Vec<bool>, grad: &mut [f32]) {
    match task {
        Task::SingleLabel => {
            let g = gold[0];
            match learner {
                Learner::Perceptron => perceptron::multiclass_gradient(scores, g, grad),
                Learner::Hinge => hinge::multiclass_gradient(scores, g, grad),
                _ => logistic::multiclass_gradient(scores, g, grad),
            };
        }
        Task::MultiLabel => {
            mask.clear();
            mask.resize(scores.len(), false);
            for &g in gold {
                mask[g] = true;
            }
            match learner {
                Learner::Perceptron => perceptron::multilabel_gradient(scores, mask, grad),
                Learner::Hinge => hinge::multilabel_gradient(scores, mask, grad),
                _ => logistic::multilabel_gradient(scores, mask, grad),
            };
        }
    }
}

/// The smallest softmax gradient (`|1[k = gold] - P(k|d)|`) a step of a
/// single-label logistic model with more than two classes applies: with
/// many classes nearly all are far from the example, and moving each by
/// a rounding error would make every step cost features x classes and
/// fill every row (docs/many-classes.md measures it).
pub const SOFTMAX_CUTOFF: f32 = 1e-3;
