//! The perceptron: on a mistake, move toward the gold class and away from the
//! predicted one. With the shared lazy averaging it is the averaged perceptron.

/// Multiclass: `grad[gold] = 1`, `grad[pred] = -1` when `pred != gold`.
/// Returns the 0/1 loss.
pub(super) fn multiclass_gradient(scores: &[f32], gold: usize, grad: &mut [f32]) -> f32 {
    grad.fill(0.0);
    let pred = super::argmax(scores);
    if pred == gold {
        return 0.0;
    }
    grad[gold] = 1.0;
    grad[pred] = -1.0;
    1.0
}

/// One-vs-rest: each label whose sign is wrong (a score of 0 counts as
/// negative) moves toward its gold sign. Returns the number of mistakes.
pub(super) fn multilabel_gradient(scores: &[f32], gold: &[bool], grad: &mut [f32]) -> f32 {
    let mut mistakes = 0.0;
    for ((g, &s), &y) in grad.iter_mut().zip(scores).zip(gold) {
        *g = match (y, s > 0.0) {
            (true, false) => 1.0,
            (false, true) => -1.0,
            _ => 0.0,
        };
        mistakes += g.abs();
    }
    mistakes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_only_on_mistakes() {
        let mut g = [0.0; 3];
        assert_eq!(multiclass_gradient(&[0.1, 2.0, -1.0], 1, &mut g), 0.0);
        assert_eq!(g, [0.0, 0.0, 0.0]);
        assert_eq!(multiclass_gradient(&[0.1, 2.0, -1.0], 2, &mut g), 1.0);
        assert_eq!(g, [0.0, -1.0, 1.0]);
        assert_eq!(
            multilabel_gradient(&[1.0, -1.0, 0.0], &[true, true, false], &mut g),
            1.0
        );
        assert_eq!(g, [0.0, 1.0, 0.0]);
    }
}
