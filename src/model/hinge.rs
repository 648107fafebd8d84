//! Hinge loss (max-margin), Pegasos-style SGD with L2 weight decay.
//! Multiclass uses the cost-augmented argmax (Crammer and Singer): the
//! competitor is `argmax_k s_k + [k != gold]`, and a step is taken whenever
//! it scores within a margin of 1 of the gold class.

/// Multiclass hinge: returns the loss `max(0, 1 + s_comp - s_gold)`.
pub(super) fn multiclass_gradient(scores: &[f32], gold: usize, grad: &mut [f32]) -> f32 {
    grad.fill(0.0);
    let mut comp = usize::MAX;
    let mut best = f32::NEG_INFINITY;
    for (k, &s) in scores.iter().enumerate() {
        if k != gold && s + 1.0 > best {
            best = s + 1.0;
            comp = k;
        }
    }
    if comp == usize::MAX {
        return 0.0; // a single class: nothing to separate
    }
    let loss = best - scores[gold];
    if loss <= 0.0 {
        return 0.0;
    }
    grad[gold] = 1.0;
    grad[comp] = -1.0;
    loss
}

/// One-vs-rest hinge: each label with `y * s < 1` (y = +-1) steps by `y`.
pub(super) fn multilabel_gradient(scores: &[f32], gold: &[bool], grad: &mut [f32]) -> f32 {
    let mut loss = 0.0;
    for ((g, &s), &y) in grad.iter_mut().zip(scores).zip(gold) {
        let y = if y { 1.0 } else { -1.0 };
        let l = (1.0 - y * s).max(0.0);
        *g = if l > 0.0 { y } else { 0.0 };
        loss += l;
    }
    loss
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_inside_the_margin() {
        let mut g = [0.0; 3];
        // Gold leads by 2: outside the margin, no step.
        assert_eq!(multiclass_gradient(&[3.0, 1.0, 0.5], 0, &mut g), 0.0);
        assert_eq!(g, [0.0; 3]);
        // Gold leads by 0.5: inside the margin, step against the runner-up.
        assert_eq!(multiclass_gradient(&[1.5, 1.0, 0.5], 0, &mut g), 0.5);
        assert_eq!(g, [1.0, -1.0, 0.0]);
        let l = multilabel_gradient(&[2.0, 0.5, -0.2], &[true, true, false], &mut g);
        assert!((l - 1.3).abs() < 1e-6);
        assert_eq!(g, [0.0, 1.0, -1.0]);
    }
}
