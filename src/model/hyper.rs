//! Hyperparameters: which learner, its learning-rate schedule and the
//! settings every learner reads ([`Hyper`], validated once), and the pair
//! of them a model keeps for single- and multi-label tasks
//! ([`HyperChoice`]). Owns parsing and validation; learns nothing.

use std::fmt;
use std::str::FromStr;

use super::{ModelError, Task};

/// Which learner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Learner {
    Perceptron,
    Logistic,
    Hinge,
    NaiveBayes,
}

impl Learner {
    pub fn as_str(self) -> &'static str {
        match self {
            Learner::Perceptron => "perceptron",
            Learner::Logistic => "logistic",
            Learner::Hinge => "hinge",
            Learner::NaiveBayes => "naive-bayes",
        }
    }

    /// Whether its scores are probabilities.
    pub fn probabilistic(self) -> bool {
        matches!(self, Learner::Logistic | Learner::NaiveBayes)
    }
}

impl fmt::Display for Learner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Learner {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "perceptron" => Ok(Learner::Perceptron),
            "logistic" | "logreg" => Ok(Learner::Logistic),
            "hinge" | "svm" => Ok(Learner::Hinge),
            "naive-bayes" | "nb" => Ok(Learner::NaiveBayes),
            other => Err(format!(
                "unknown model {other:?} (expected perceptron, logistic, hinge or naive-bayes)"
            )),
        }
    }
}

/// Learning-rate schedule of the linear learners.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// `eta`.
    Constant,
    /// `eta / t^power`.
    InvScaling,
    /// Per-coordinate `eta / (beta + sqrt(sum of squared gradients))`:
    /// AdaGrad, with FTRL-Proximal's beta so the first steps are not full-size.
    AdaGrad,
    /// AROW (Crammer, Kulesza and Dredze 2009), diagonal: a per-coordinate
    /// confidence that shrinks as a feature is seen, and a step just large
    /// enough for the margin. Hinge loss only.
    Arow,
}

impl Schedule {
    pub fn as_str(self) -> &'static str {
        match self {
            Schedule::Constant => "constant",
            Schedule::InvScaling => "inverse",
            Schedule::AdaGrad => "adagrad",
            Schedule::Arow => "arow",
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Schedule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "constant" => Ok(Schedule::Constant),
            "inverse" | "invscaling" => Ok(Schedule::InvScaling),
            "adagrad" => Ok(Schedule::AdaGrad),
            "arow" => Ok(Schedule::Arow),
            other => Err(format!(
                "unknown schedule {other:?} (expected constant, inverse, adagrad or arow)"
            )),
        }
    }
}

/// Hyperparameters, validated once; kept apart from the learned state.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Hyper {
    pub learner: Learner,
    /// Base learning rate (linear learners).
    pub learning_rate: f32,
    /// L2 strength: each step decays weights by `1 - rate * l2`.
    pub l2: f64,
    pub schedule: Schedule,
    /// Exponent of the inverse-scaling schedule.
    pub power: f64,
    /// AdaGrad's step is `rate * g / (beta + sqrt(sum g^2))`.
    pub adagrad_beta: f32,
    /// AROW's regularizer r: larger values make smaller, steadier steps.
    pub arow_r: f32,
    /// Predict with the lazily averaged weights.
    pub average: bool,
    /// Naive Bayes additive smoothing.
    pub nb_alpha: f32,
    /// Multi-label: predict the best label when none clears the threshold.
    pub at_least_one_label: bool,
    /// Multi-label: a label is predicted when its raw score (log-odds for
    /// logistic and naive Bayes, margin otherwise) exceeds this.
    pub threshold: f32,
    /// Fuse naive Bayes on the words into a linear learner's binary
    /// decisions (see [`super::fusion`]; needs split feature views).
    pub fusion: bool,
    /// AdaGrad rate of the fusion's weight.
    pub fusion_rate: f32,
    /// The fused naive Bayes's additive smoothing.
    pub fusion_alpha: f32,
}

impl From<Hyper> for HyperChoice {
    fn from(h: Hyper) -> Self {
        HyperChoice::same(h)
    }
}

impl Hyper {
    /// The defaults of each learner: the most accurate settings found on the
    /// shared streams (see the README's accuracy table).
    pub fn defaults(learner: Learner) -> Hyper {
        let base = Hyper {
            learner,
            learning_rate: 0.5,
            l2: 0.0,
            schedule: Schedule::AdaGrad,
            power: 0.5,
            adagrad_beta: 0.01,
            arow_r: 1.0,
            average: false,
            nb_alpha: 0.1,
            at_least_one_label: true,
            threshold: 0.0,
            fusion: learner != Learner::NaiveBayes,
            fusion_rate: 0.05,
            fusion_alpha: 0.01,
        };
        match learner {
            Learner::Logistic => Hyper { l2: 1e-5, ..base },
            Learner::Perceptron => Hyper {
                learning_rate: 1.0,
                schedule: Schedule::Constant,
                average: true,
                ..base
            },
            Learner::Hinge | Learner::NaiveBayes => base,
        }
    }

    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |what: &str, v: f64| Err(ModelError::Hyper(format!("{what} must be finite and >= 0, got {v}")));
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return Err(ModelError::Hyper(format!(
                "--learning-rate must be finite and > 0, got {}",
                self.learning_rate
            )));
        }
        if !(self.l2.is_finite() && self.l2 >= 0.0) {
            return bad("--l2", self.l2);
        }
        if !(self.power.is_finite() && self.power >= 0.0) {
            return bad("--power", self.power);
        }
        if !(self.adagrad_beta.is_finite() && self.adagrad_beta >= 0.0) {
            return bad("--adagrad-beta", self.adagrad_beta as f64);
        }
        if !self.threshold.is_finite() {
            return Err(ModelError::Hyper(format!(
                "--threshold must be finite, got {}",
                self.threshold
            )));
        }
        if !(self.arow_r.is_finite() && self.arow_r > 0.0) {
            return Err(ModelError::Hyper(format!(
                "--arow-r must be finite and > 0, got {}",
                self.arow_r
            )));
        }
        if self.schedule == Schedule::Arow && self.learner != Learner::Hinge {
            return Err(ModelError::Hyper(format!(
                "--schedule arow needs --model hinge, not {}",
                self.learner
            )));
        }
        if self.fusion && self.learner == Learner::NaiveBayes {
            return Err(ModelError::Hyper(
                "--fusion fuses naive Bayes into a linear learner, not into naive Bayes".into(),
            ));
        }
        if self.fusion {
            for (what, v) in [
                ("--fusion-rate", self.fusion_rate),
                ("--fusion-alpha", self.fusion_alpha),
            ] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(ModelError::Hyper(format!("{what} must be finite and > 0, got {v}")));
                }
            }
        }
        if !(self.nb_alpha.is_finite() && self.nb_alpha > 0.0) {
            return Err(ModelError::Hyper(format!(
                "--nb-alpha must be finite and > 0, got {}",
                self.nb_alpha
            )));
        }
        Ok(())
    }
}

/// Hyperparameters for each kind of task: the model uses `single` on a
/// single-label stream and `multi` on a multi-label one (one-vs-rest),
/// decided by the first labeled example. `--model auto` (the default) picks
/// logistic regression for the first and hinge for the second, the most
/// accurate on the shared streams; naming a learner uses it for both.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HyperChoice {
    pub single: Hyper,
    pub multi: Hyper,
}

impl HyperChoice {
    /// The same hyperparameters for both kinds of task.
    pub fn same(h: Hyper) -> Self {
        HyperChoice {
            single: h.clone(),
            multi: h,
        }
    }

    pub fn validate(&self) -> Result<(), ModelError> {
        self.single.validate()?;
        self.multi.validate()
    }

    pub fn for_task(&self, task: Task) -> &Hyper {
        match task {
            Task::SingleLabel => &self.single,
            Task::MultiLabel => &self.multi,
        }
    }
}
