//! AROW (Crammer, Kulesza and Dredze 2009), diagonal: the step of the
//! hinge learner under `--schedule arow`, with a per-coordinate confidence
//! kept where AdaGrad keeps its sums.

use super::{Task, Weights};
use crate::features::SparseVec;

/// One AROW step. `grad` holds +1/-1 on the classes the hinge loss moves
/// (see `hinge.rs`); on return it is overwritten (scratch). Single-label:
/// the gold and competitor rows move together by one step size from the
/// joint margin; multi-label: each label by its own.
pub(super) fn arow_step(
    w: &mut Weights,
    x: &SparseVec,
    scores: &[f32],
    grad: &mut [f32],
    task: Task,
    r: f32,
    scratch: &mut Vec<bool>,
) {
    let k = grad.len();
    // Which classes move, and with which sign.
    scratch.clear();
    scratch.extend(grad.iter().map(|&g| g != 0.0));
    if !scratch.iter().any(|&m| m) {
        return;
    }
    let sign: Vec<f32> = grad.to_vec();
    // Confidence-weighted squared norm of x per class.
    let mut v = vec![0.0f32; k];
    for (f, val) in x.iter() {
        for c in 0..k {
            if scratch[c] {
                v[c] += val * val * w.variance(f, c);
            }
        }
    }
    // Step size per class: grad[c] := alpha_c * sign_c.
    match task {
        Task::SingleLabel => {
            let (mut s_gold, mut s_comp, mut total) = (0.0, 0.0, 0.0);
            for c in 0..k {
                if sign[c] > 0.0 {
                    s_gold = scores[c];
                } else if sign[c] < 0.0 {
                    s_comp = scores[c];
                }
                total += v[c];
            }
            let loss = (1.0 - (s_gold - s_comp)).max(0.0);
            let alpha = loss / (total + r);
            for c in 0..k {
                grad[c] = alpha * sign[c];
            }
        }
        Task::MultiLabel => {
            for c in 0..k {
                let loss = (1.0 - sign[c] * scores[c]).max(0.0);
                grad[c] = if scratch[c] { loss / (v[c] + r) * sign[c] } else { 0.0 };
            }
        }
    }
    let inv_r = 1.0 / r;
    for (f, val) in x.iter() {
        for c in 0..k {
            if scratch[c] {
                w.arow_add(f, c, grad[c] * val, val * val * inv_r);
            }
        }
    }
}
