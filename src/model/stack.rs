//! The stack: how a binary linear model combines its members into the
//! margin it serves, by an online logistic regression on their log-odds
//! (Lynam and Cormack 2006, "On-line spam filter fusion"; TREC 2007's best
//! runs fused their members so).
//!
//! Each member gives a log-odds of class 1 for a message ([`Inputs`]):
//!
//! - `linear`: the linear weights' margin over the shared features;
//! - `personal`: the margin of the user's personal copies (0 for a
//!   message without a user);
//! - `naive_bayes`: the fused naive Bayes's log-odds, clipped at
//!   [`super::fusion::FUSION_CLIP`];
//! - then each added member's (`super::member`: the byte LR, the byte
//!   context models, in the registry's order; 0 for a model without it).
//!
//! The served margin is `b + sum_i v_i c(z_i)`, where `c(z) = C tanh(z /
//! C)` bounds a member at [`INPUT_CLIP`] either way (one member's wild
//! margin cannot carry the sum). Every weight and the bias start at 0 and
//! learn by AdaGrad (rate [`STACK_RATE`]) from the log-loss of each
//! labeled message's inputs as they were before the members learned it,
//! scaled by how far the label is believed. A member's weight stays at or
//! over 0: each member estimates the same log-odds, so a negative weight
//! is noise (early in a stream it would turn a label's lesson against
//! it), and holding it at 0 ranked as well on every stream. A step moves a weight by at
//! most the rate, so one odd message costs little and the next ones undo
//! it. Where a member ranks a stream well its weight grows; where it does
//! not, it stays near 0 (docs/model.md, "The stack").
//!
//! The members learn apart from the stack: the linear learner steps from
//! its own scores (linear, fused naive Bayes as it was trained, copies),
//! the byte LR from its own margin. A lesson taken back takes the stack's
//! step back too ([`Stack::unlearn`]).

use super::sigmoid;

/// A member of the stack, in the order its weights are stored: the
/// model's own three, then the added members in the registry's order
/// (`super::member::REGISTRY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member(usize);

impl Member {
    /// The linear weights' margin over the shared features.
    pub const LINEAR: Member = Member(0);
    /// The user's personal copies'.
    pub const PERSONAL: Member = Member(1);
    /// The fused naive Bayes's.
    pub const NAIVE_BAYES: Member = Member(2);
    /// How many of the model's own there are, before the added ones.
    pub const OWN: usize = 3;

    /// Every member, in order.
    pub const ALL: [Member; MEMBERS] = {
        let mut all = [Member(0); MEMBERS];
        let mut i = 0;
        while i < MEMBERS {
            all[i] = Member(i);
            i += 1;
        }
        all
    };

    /// Added member `i` of the registry.
    pub fn added(i: usize) -> Member {
        Member(Self::OWN + i)
    }

    /// The member named `name`.
    pub fn named(name: &str) -> Option<Member> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Its place among the stack's inputs.
    pub fn index(self) -> usize {
        self.0
    }

    /// Its name in reports, metrics and explanations.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "linear",
            1 => "personal",
            2 => "naive_bayes",
            i => super::member::REGISTRY.get(i - Self::OWN).map_or("?", |e| e.name),
        }
    }
}

/// How many members a stack has.
pub const MEMBERS: usize = Member::OWN + super::member::ADDED;
/// AdaGrad's rate for the stack's weights: 0.2 ranked best over the raw
/// and text spam streams of 0.05, 0.1, 0.2, 0.3 and 0.5 (docs/accuracy.md).
pub const STACK_RATE: f32 = 0.2;
/// A member's log-odds is bounded softly at this, `C tanh(z / C)`: 10
/// ranked best over the spam streams of 6, 8, 10, 12, 15 and 20 (SpamAssassin
/// text lost 2-4 % at 15-20; docs/accuracy.md).
pub const INPUT_CLIP: f32 = 10.0;

/// One step of the stack, kept to take it back: its gradient scale (the
/// label's weight times `y - p`) and what each weight moved (the bias
/// first).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Step {
    pub scale: f32,
    pub moves: [f32; MEMBERS + 1],
}

/// The members' log-odds of class 1 for one message, unbounded.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Inputs(pub [f32; MEMBERS]);

impl Inputs {
    /// Member `m`'s log-odds.
    pub fn get(&self, m: Member) -> f32 {
        self.0[m.0]
    }

    /// The bias's input (1) and each member's log-odds bounded at
    /// `bound` (0: unbounded).
    fn features(&self, bound: f32) -> [f32; MEMBERS + 1] {
        let mut f = [1.0; MEMBERS + 1];
        for (out, &z) in f[1..].iter_mut().zip(&self.0) {
            *out = match (z.is_finite(), bound > 0.0) {
                (false, _) => 0.0,
                (true, true) => bound * (z / bound).tanh(),
                (true, false) => z,
            };
        }
        f
    }
}

/// The stacker's state: the bias and a weight per member, AdaGrad's
/// sums of their squared gradients, and the members' bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stack {
    weights: [f32; MEMBERS + 1],
    sum_sq: [f32; MEMBERS + 1],
    /// [`INPUT_CLIP`]; 0 (unbounded) in a stack made for a model from
    /// before the stack, so that it scores as that model did.
    bound: f32,
}

impl Default for Stack {
    fn default() -> Self {
        Stack {
            weights: [0.0; MEMBERS + 1],
            sum_sq: [0.0; MEMBERS + 1],
            bound: INPUT_CLIP,
        }
    }
}

/// The sums a stack made for a model from before the stack starts with:
/// as if each weight had taken a hundred full steps, so the first labels
/// after the upgrade move it by a tenth of the rate, not the whole.
const LEGACY_SUM: f32 = 100.0;

impl Stack {
    /// From stored parts (the bias first, then the members; the bound, 0
    /// for none): missing entries are 0; `None` when a part is not
    /// finite, a sum, a member's weight or the bound is negative or there
    /// are more entries than this build knows.
    pub fn from_parts(weights: &[f32], sum_sq: &[f32], bound: f32) -> Option<Self> {
        if !(bound.is_finite() && bound >= 0.0) {
            return None;
        }
        let mut s = Stack {
            bound,
            ..Stack::default()
        };
        let fits = weights.len() <= MEMBERS + 1 && sum_sq.len() <= MEMBERS + 1;
        let members_ok = weights.iter().skip(1).all(|&w| w >= 0.0);
        let ok =
            members_ok && weights.iter().all(|w| w.is_finite()) && sum_sq.iter().all(|g| g.is_finite() && *g >= 0.0);
        if !fits || !ok {
            return None;
        }
        s.weights[..weights.len()].copy_from_slice(weights);
        s.sum_sq[..sum_sq.len()].copy_from_slice(sum_sq);
        Some(s)
    }

    /// A model from before the stack, as it combined its members: the
    /// linear margin at 1, the copies at the personal switch's weight
    /// `copies` (1 without a switch), naive Bayes at the fusion's weight,
    /// the byte LR at its hinge-learned weight; no bias, no bound. It
    /// learns from there, its sums at [`LEGACY_SUM`].
    pub fn legacy(copies: f32, naive_bayes: f32, byte_lr: f32) -> Self {
        let mut s = Stack {
            sum_sq: [LEGACY_SUM; MEMBERS + 1],
            bound: 0.0,
            ..Stack::default()
        };
        s.weights[1 + Member::LINEAR.0] = 1.0;
        s.weights[1 + Member::PERSONAL.0] = copies;
        s.weights[1 + Member::NAIVE_BAYES.0] = naive_bayes;
        if let Some(b) = Member::named("byte_lr") {
            s.weights[1 + b.0] = byte_lr;
        }
        s
    }

    /// The bias and the members' weights, as stored.
    pub fn weights(&self) -> &[f32; MEMBERS + 1] {
        &self.weights
    }

    /// AdaGrad's sums, as stored.
    pub fn sums(&self) -> &[f32; MEMBERS + 1] {
        &self.sum_sq
    }

    /// The members' bound (0: none), as stored.
    pub fn bound(&self) -> f32 {
        self.bound
    }

    /// The bias.
    pub fn bias(&self) -> f32 {
        self.weights[0]
    }

    /// Member `m`'s weight (never under 0).
    pub fn weight(&self, m: Member) -> f32 {
        self.weights[1 + m.0]
    }

    /// The served margin of class 1 for `inputs`.
    pub fn margin(&self, inputs: &Inputs) -> f32 {
        let f = inputs.features(self.bound);
        self.weights.iter().zip(&f).map(|(w, x)| w * x).sum()
    }

    /// Each member's share of the margin for `inputs` (its weight times
    /// its bounded log-odds); the bias is the rest.
    pub fn shares(&self, inputs: &Inputs) -> [f32; MEMBERS] {
        let f = inputs.features(self.bound);
        std::array::from_fn(|i| self.weights[i + 1] * f[i + 1])
    }

    /// One step of the log-loss for a message of class 1 (`positive`) or
    /// 0 whose members said `inputs`, scaled by `weight` (how far the
    /// label is believed). Returns the step, what [`Stack::unlearn`]
    /// takes back.
    pub fn learn(&mut self, inputs: &Inputs, positive: bool, weight: f32) -> Step {
        let m = self.margin(inputs);
        let mut step = Step::default();
        if !m.is_finite() || !weight.is_finite() {
            return step;
        }
        step.scale = weight * (f32::from(u8::from(positive)) - sigmoid(m));
        for (i, x) in inputs.features(self.bound).into_iter().enumerate() {
            let gi = step.scale * x;
            // A gradient whose square is 0 in f32 (a member saying 1e-25)
            // would divide by a sum of 0: no step.
            if gi * gi > 0.0 {
                self.sum_sq[i] += gi * gi;
                let mut moved = self.weights[i] + STACK_RATE * gi / self.sum_sq[i].sqrt();
                if i > 0 {
                    moved = moved.max(0.0);
                }
                step.moves[i] = moved - self.weights[i];
                self.weights[i] = moved;
            }
        }
        step
    }

    /// Takes back `step` (what [`Stack::learn`] returned) of a message
    /// whose members now say `inputs`: each weight by what it moved
    /// (exact but for rounding and the floor at 0, where a later step
    /// moved it), the sums by the squared gradients at `inputs` (exact
    /// when they are those the step saw).
    pub fn unlearn(&mut self, inputs: &Inputs, step: &Step) {
        if step.scale == 0.0 || !step.scale.is_finite() {
            return;
        }
        for (i, x) in inputs.features(self.bound).into_iter().enumerate() {
            let moved = self.weights[i] - step.moves[i];
            self.weights[i] = if i > 0 { moved.max(0.0) } else { moved };
            let gi = step.scale * x;
            self.sum_sq[i] = (self.sum_sq[i] - gi * gi).max(0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn byte_lr() -> Member {
        Member::named("byte_lr").unwrap()
    }

    fn inputs(linear: f32, b: f32) -> Inputs {
        let mut x = Inputs::default();
        x.0[Member::LINEAR.0] = linear;
        x.0[byte_lr().0] = b;
        x
    }

    #[test]
    fn it_weighs_the_member_that_ranks_and_ignores_the_one_that_does_not() {
        let mut s = Stack::default();
        assert_eq!(s.margin(&inputs(5.0, 5.0)), 0.0);
        // The byte LR is right every time; the linear member is noise.
        for i in 0..400 {
            let noise = if i % 3 == 0 { 4.0 } else { -4.0 };
            s.learn(&inputs(noise, 3.0), true, 1.0);
            s.learn(&inputs(-noise, -3.0), false, 1.0);
        }
        let (lin, byte) = (s.weight(Member::LINEAR), s.weight(byte_lr()));
        assert!(byte > 0.5 && lin.abs() < byte / 4.0, "{lin} {byte}");
        assert!(s.margin(&inputs(-4.0, 3.0)) > 0.0);
        let shares = s.shares(&inputs(2.0, 3.0));
        let total: f32 = shares.iter().sum::<f32>() + s.bias();
        assert!((total - s.margin(&inputs(2.0, 3.0))).abs() < 1e-4);
    }

    #[test]
    fn one_odd_message_moves_each_weight_by_at_most_the_rate_and_is_taken_back() {
        let mut s = Stack::default();
        for _ in 0..200 {
            s.learn(&inputs(3.0, 1.0), true, 1.0);
            s.learn(&inputs(-3.0, -1.0), false, 1.0);
        }
        let before = s;
        // A wildly wrong member: its bound and AdaGrad cap the step.
        let odd = inputs(1e9, -1e9);
        let step = s.learn(&odd, false, 1.0);
        for (a, b) in s.weights().iter().zip(before.weights()) {
            assert!((a - b).abs() <= STACK_RATE + 1e-6, "{a} {b}");
        }
        s.unlearn(&odd, &step);
        for (a, b) in s.weights().iter().zip(before.weights()) {
            assert!((a - b).abs() < 1e-5, "{a} {b}");
        }
        for (a, b) in s.sums().iter().zip(before.sums()) {
            assert!((a - b).abs() <= 1e-3 * b.max(1.0), "{a} {b}");
        }
        // A gradient too small to square in f32, on an empty sum (a fresh
        // stack, or one a forget emptied): no step, never an infinite one.
        let mut fresh = Stack::default();
        let tiny = fresh.learn(&inputs(1e-25, 0.0), true, 1.0);
        assert!(fresh.weights().iter().all(|w| w.is_finite()), "{fresh:?}");
        assert_eq!(tiny.moves[1], 0.0);
        assert_eq!(
            Stack::from_parts(fresh.weights(), fresh.sums(), fresh.bound()),
            Some(fresh)
        );
        // A half-believed label steps less; a non-finite input counts 0.
        let mut half = before;
        let mut full = before;
        let x = inputs(-2.0, 2.0);
        half.learn(&x, false, 0.5);
        full.learn(&x, false, 1.0);
        assert!((half.margin(&x) - before.margin(&x)).abs() < (full.margin(&x) - before.margin(&x)).abs());
        assert_eq!(inputs(f32::NAN, 0.0).features(INPUT_CLIP)[1], 0.0);
    }

    #[test]
    fn stored_parts_round_trip_and_bad_ones_are_refused() {
        // A model from before the stack scores as it did: unbounded.
        let mut s = Stack::legacy(0.5, 0.8, 1.2);
        let mut old = inputs(30.0, -1.0);
        (old.0[Member::PERSONAL.0], old.0[Member::NAIVE_BAYES.0]) = (2.0, 4.0);
        assert_eq!(s.margin(&old), 30.0 + 0.5 * 2.0 + 0.8 * 4.0 - 1.2);
        s.learn(&inputs(1.0, 1.0), true, 1.0);
        assert_eq!(Stack::from_parts(s.weights(), s.sums(), s.bound()), Some(s));
        let c = |z: f32| INPUT_CLIP * (z / INPUT_CLIP).tanh();
        assert_eq!(Stack::legacy(1.0, 0.0, 0.0).sums(), &[LEGACY_SUM; MEMBERS + 1]);
        // Fewer entries (an older build's): the rest are 0.
        let short = Stack::from_parts(&[0.1, 1.0], &[], INPUT_CLIP).unwrap();
        assert_eq!(
            (short.bias(), short.weight(Member::LINEAR), short.weight(byte_lr())),
            (0.1, 1.0, 0.0)
        );
        assert_eq!(short.margin(&inputs(30.0, 0.0)), 0.1 + c(30.0));
        assert!(Stack::from_parts(&[0.0; MEMBERS + 2], &[], 1.0).is_none());
        assert!(Stack::from_parts(&[f32::NAN], &[], 1.0).is_none());
        assert!(Stack::from_parts(&[], &[-1.0], 1.0).is_none());
        assert!(Stack::from_parts(&[-1.0, 0.0, -0.5], &[], 1.0).is_none());
        assert!(Stack::from_parts(&[], &[], -1.0).is_none());
    }
}
