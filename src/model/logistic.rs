//! Logistic regression by SGD on the log loss: softmax over the classes for
//! single-label tasks, one sigmoid per label for multi-label ones. The
//! gradient step for class k is `(1[k = gold] - P(k|d)) * f`.

/// Softmax of `scores` into `out`, stable against overflow.
pub fn softmax(scores: &[f32], out: &mut [f32]) {
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for (o, &s) in out.iter_mut().zip(scores) {
        *o = (s - max).exp();
        sum += *o;
    }
    for o in out.iter_mut() {
        *o /= sum;
    }
}

/// The logistic function, stable for large |x|.
#[inline]
pub fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// Multiclass: `grad[k] = 1[k = gold] - softmax(scores)[k]`; returns `-ln P(gold)`.
pub(super) fn multiclass_gradient(scores: &[f32], gold: usize, grad: &mut [f32]) -> f32 {
    softmax(scores, grad);
    let loss = -grad[gold].max(1e-30).ln();
    for g in grad.iter_mut() {
        *g = -*g;
    }
    grad[gold] += 1.0;
    loss
}

/// Multi-label: `grad[k] = y_k - sigmoid(scores[k])`; returns the summed log loss.
pub(super) fn multilabel_gradient(scores: &[f32], gold: &[bool], grad: &mut [f32]) -> f32 {
    let mut loss = 0.0;
    for ((g, &s), &y) in grad.iter_mut().zip(scores).zip(gold) {
        let p = sigmoid(s);
        let y = if y { 1.0 } else { 0.0 };
        *g = y - p;
        loss -= if y > 0.5 {
            p.max(1e-30).ln()
        } else {
            (1.0 - p).max(1e-30).ln()
        };
    }
    loss
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The analytic gradient of the log loss w.r.t. the scores matches a
    /// central finite difference (the step direction is minus the gradient).
    #[test]
    fn gradient_matches_finite_difference() {
        let scores = [0.3f32, -1.2, 2.0, 0.7];
        for gold in 0..scores.len() {
            let mut grad = [0.0; 4];
            multiclass_gradient(&scores, gold, &mut grad);
            for k in 0..scores.len() {
                let h = 1e-2;
                let mut up = scores;
                up[k] += h;
                let mut down = scores;
                down[k] -= h;
                let mut tmp = [0.0; 4];
                let numeric =
                    (multiclass_gradient(&up, gold, &mut tmp) - multiclass_gradient(&down, gold, &mut tmp)) / (2.0 * h);
                assert!(
                    (numeric + grad[k]).abs() < 1e-3,
                    "class {k}: numeric {numeric} analytic {}",
                    -grad[k]
                );
            }
        }
        let gold = [true, false, true, false];
        let mut grad = [0.0; 4];
        multilabel_gradient(&scores, &gold, &mut grad);
        for k in 0..scores.len() {
            let h = 1e-2;
            let mut up = scores;
            up[k] += h;
            let mut down = scores;
            down[k] -= h;
            let mut tmp = [0.0; 4];
            let numeric =
                (multilabel_gradient(&up, &gold, &mut tmp) - multilabel_gradient(&down, &gold, &mut tmp)) / (2.0 * h);
            assert!((numeric + grad[k]).abs() < 1e-3, "label {k}");
        }
    }

    #[test]
    fn softmax_is_stable_and_normalised() {
        let mut p = [0.0; 3];
        softmax(&[1000.0, 1000.0, -1000.0], &mut p);
        assert!((p[0] - 0.5).abs() < 1e-6 && p[2] == 0.0);
        assert!((sigmoid(-100.0)).is_finite() && sigmoid(100.0) == 1.0);
    }
}
