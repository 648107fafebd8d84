//! The personal switch: how far a binary model trusts a user's personal
//! copies ([`crate::features::personalize`]) over its shared part alone.
//!
//! A message for a named user has two predictions: the whole model's
//! (shared features and the user's copies) and the shared part's (the
//! same less the copies' share of the margin). The model serves their
//! Bayesian mixture, `q = pi p_whole + (1 - pi) p_shared`, where `pi` is
//! the posterior that the whole model is the better predictor of the
//! stream: `pi = sigmoid(a)`, `a` the log-loss the shared part lost to the
//! whole model over every user's labeled message so far, each judged
//! before it was learned (progressively, so the comparison is fair to the
//! copies, which fit their own labels). `a` is clipped at
//! [`SWITCH_CLIP`] nats either way, so a stream that changes can turn it.
//!
//! Why: where users disagree (one user's newsletter is another's spam)
//! the copies pay and `pi` goes to 1; where users agree they only echo
//! the shared words at a higher rate, the shared part predicts as well or
//! better, and `pi` goes to 0. With copies x4, grey mail gains 0.02 over
//! copies x1.5 without the switch, and SMS and SpamAssassin with random
//! users stay within 1 % of the same streams without users
//! (docs/model.md, "The personal switch").
//!
//! One number per model, learned as the stacker's weights are: a
//! checkpoint, a full version and every delta carry it; a lesson taken
//! back leaves it (as it leaves the stacker's weights).

/// The most the switch's log-likelihood ratio counts either way, in nats.
pub const SWITCH_CLIP: f32 = 50.0;

/// A user's message's two predictions before the mix: the whole model's
/// raw scores (classes 0 and 1) and the shared part's margin of class 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sides {
    pub whole: [f32; 2],
    pub shared: f32,
}

impl Sides {
    /// The whole model's margin of class 1.
    pub fn whole_margin(&self) -> f32 {
        self.whole[1] - self.whole[0]
    }
}

/// The switch's state: the shared part's log-loss lost to the whole model.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Switch {
    pub(crate) advantage: f32,
}

impl Switch {
    /// The switch at a stored advantage (clipped; not a number: even).
    pub fn from_advantage(advantage: f32) -> Self {
        let advantage = if advantage.is_nan() { 0.0 } else { advantage };
        Switch {
            advantage: advantage.clamp(-SWITCH_CLIP, SWITCH_CLIP),
        }
    }

    /// The weight of the whole model in the mixture, `pi`.
    pub fn weight(&self) -> f32 {
        sigmoid(self.advantage)
    }

    /// The margin of class 1 (log-odds) of the mixture of a whole model's
    /// margin `whole` and a shared part's `shared`.
    pub fn mix(&self, whole: f32, shared: f32) -> f32 {
        let (lw, ls) = (log_sigmoid(self.advantage), log_sigmoid(-self.advantage));
        let yes = log_add(lw + log_sigmoid(whole), ls + log_sigmoid(shared));
        let no = log_add(lw + log_sigmoid(-whole), ls + log_sigmoid(-shared));
        yes - no
    }

    /// Learns from a labeled message's two margins, judged before it is
    /// learned: its gold class is 1 (`positive`) or 0.
    pub fn learn(&mut self, sides: Sides, positive: bool) {
        let y = if positive { 1.0 } else { -1.0 };
        let gain = log_sigmoid(y * sides.whole_margin()) - log_sigmoid(y * sides.shared);
        if gain.is_finite() {
            *self = Switch::from_advantage(self.advantage + gain);
        }
    }
}

fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

/// `ln sigmoid(z)`, without overflow for any `z`.
fn log_sigmoid(z: f32) -> f32 {
    if z >= 0.0 {
        -(-z).exp().ln_1p()
    } else {
        z - z.exp().ln_1p()
    }
}

/// `ln(e^a + e^b)`, without overflow.
fn log_add(a: f32, b: f32) -> f32 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if hi == f32::NEG_INFINITY {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_even_switch_averages_the_probabilities() {
        let s = Switch::default();
        let (a, b) = (2.0f32, -1.0f32);
        let q = 0.5 * sigmoid(a) + 0.5 * sigmoid(b);
        assert!((s.mix(a, b) - (q / (1.0 - q)).ln()).abs() < 1e-5);
        // The same margin on both sides is that margin, at any weight.
        for adv in [-50.0, 0.0, 3.0, 50.0] {
            assert!((Switch::from_advantage(adv).mix(1.5, 1.5) - 1.5).abs() < 1e-4);
        }
    }

    #[test]
    fn a_decided_switch_serves_one_side_and_stays_finite() {
        let whole = Switch::from_advantage(SWITCH_CLIP);
        assert!((whole.mix(3.0, -3.0) - 3.0).abs() < 1e-3);
        let shared = Switch::from_advantage(-SWITCH_CLIP);
        assert!((shared.mix(3.0, -3.0) + 3.0).abs() < 1e-3);
        for (a, b) in [(1e4, -1e4), (-1e4, -1e4), (80.0, 80.0)] {
            assert!(Switch::default().mix(a, b).is_finite(), "{a} {b}");
        }
    }

    #[test]
    fn the_better_side_wins_the_switch_and_the_clip_holds() {
        let mut s = Switch::default();
        // The whole model is right where the shared part is wrong.
        let sides = Sides {
            whole: [-0.5, 0.5],
            shared: -1.0,
        };
        s.learn(sides, true);
        assert!(s.weight() > 0.5);
        // ln sigmoid(1) - ln sigmoid(-1) = 1 nat.
        assert!((s.advantage - 1.0).abs() < 1e-5, "{}", s.advantage);
        for _ in 0..1000 {
            s.learn(sides, false);
        }
        assert_eq!(s.advantage, -SWITCH_CLIP);
        assert_eq!(Switch::from_advantage(f32::NAN), Switch::default());
    }
}
