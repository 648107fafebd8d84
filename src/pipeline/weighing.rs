//! How far one label is believed: weighed against the model's confident
//! prediction of the same message and its reporter's trust
//! ([`super::trust`]), before it is learned in full, with less weight, or
//! held ([`Pipeline::label_weight`]), and the recent share of confident
//! contradictions that the weighing follows.

use super::{Pipeline, trust};
use crate::model::{Scored, Task};

/// A label whose reporter's trust is under this is held (not learned
/// unless another reporter confirms it).
pub(super) const HOLD_BELOW: f32 = 0.05;

/// Below the first share, labels are learned in full; past the second,
/// confident contradictions are down-weighted in full (docs/feedback.md).
const CONTRADICTION_BAND: (f32, f32) = (0.02, 0.04);
/// Past the first share the down-weighting fades, and past the second it
/// is off: so many contradictions are no longer noise but a change of the
/// stream, which must be learned (docs/feedback.md: SMS with its labels
/// swapped half-way, 601 errors without this fade, 481 with it, 249 with
/// no weighing; no noisy run changed).
const CHANGE_BAND: (f32, f32) = (0.5, 0.7);

impl Pipeline {
    /// How far to believe a single label `ids` from `reporter` given the
    /// model's prediction `scored` of the same features: a weight over 0
    /// and at most 1, or `None` when the reporter's trust is under
    /// [`HOLD_BELOW`] and the label is held, not learned.
    ///
    /// A label that contradicts the prediction by a raw-score margin m over
    /// r (`--contradiction-margin`; 0 turns all this off) is a confident
    /// contradiction. Its weight is `1 - s (1 - (r/m)^2)`, where s grows
    /// from 0 to 1 as the recent share of confident contradictions
    /// ([`Pipeline::contradictions`]) goes from 2 % to 4 %: clean feedback
    /// (under 2 % on the shared spam streams) is learned in full; under
    /// noise or an attack a label the model is sure is wrong moves it
    /// little, never not at all. Past 50-70 % the weighing fades out again
    /// ([`CHANGE_BAND`]): that many contradictions are a change of the
    /// stream. Every label is then scaled by its reporter's trust ([`super::trust`]), unless the reporter is trusted
    /// outright.
    pub(super) fn label_weight(&mut self, scored: &Scored, ids: &[usize], reporter: Option<&str>) -> Option<f32> {
        let r = self.cfg.trust.margin;
        let ([gold], Some(&predicted)) = (ids, scored.labels.first()) else {
            return Some(1.0);
        };
        // A multi-label prediction is a set, not one class against the rest.
        if r <= 0.0 || self.predictor.model.task() != Some(Task::SingleLabel) {
            return Some(1.0);
        }
        // The model's own scores, before its stack: the band is
        // calibrated on them, and the other members learn every label apart.
        let own = |c: usize| scored.own_raw().get(c).copied();
        let predicted = match (own(0), own(1), scored.stacked) {
            (Some(a), Some(b), Some(_)) => usize::from(b > a),
            _ => predicted,
        };
        let margin = match (own(*gold), own(predicted)) {
            (Some(g), Some(p)) if predicted != *gold => p - g,
            _ => 0.0,
        };
        let confident = margin > r;
        let name = reporter.unwrap_or(trust::ANONYMOUS);
        let trusted = self.cfg.trust.trusts(name);
        let trust = match trusted {
            true => 1.0,
            false => self.ledger.observe_reporter(name, confident),
        };
        if trust < HOLD_BELOW {
            // Held labels are not what everyone says: they stay out of the share.
            return None;
        }
        self.ledger.note_contradiction(confident);
        if trusted {
            return Some(1.0);
        }
        // The band is calibrated on binary streams (spam filters); a
        // topic stream's clean labels contradict its model more often
        // (docs/feedback.md): there only the reporters' trust applies.
        if !confident || self.predictor.model.labels().len() != 2 {
            return Some(trust);
        }
        let share = self.ledger.contradiction_share();
        let (lo, hi) = CONTRADICTION_BAND;
        let s = ((share - lo) / (hi - lo)).clamp(0.0, 1.0);
        let (lo, hi) = CHANGE_BAND;
        let s = s * (1.0 - ((share - lo) / (hi - lo)).clamp(0.0, 1.0));
        let w = (r / margin) * (r / margin);
        Some(trust * (1.0 - s * (1.0 - w)))
    }

    /// Counts a label learned with `weight` (`None`: held) by its outcome.
    pub(super) fn count_weighed(&mut self, weight: Option<f32>, reporter: Option<&str>) {
        let c = &mut self.counters;
        match weight {
            None => {
                c.labels_held += 1;
                self.ledger.count_held(reporter.unwrap_or(trust::ANONYMOUS));
            }
            Some(w) if w < 1.0 => c.labels_down_weighted += 1,
            Some(_) => c.labels_in_full += 1,
        }
    }
}
