//! The model and feature flags (`--model`, `--bits`, `--char-ngrams`,
//! `--fusion`, ...), shared by `run` and `eval`, and their validation into
//! the feature configuration, hyperparameters and bounds.

use clap::Args;

use super::{ConfigError, bytes};
use crate::features::{FeatureConfig, ValueMode, parse_char_ngrams};
use crate::model::{Hyper, HyperChoice, Learner, Limits, Schedule};

/// Model and feature flags, shared by `run` and `eval`.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Learner: auto (logistic for single-label streams, hinge for
    /// multi-label ones), perceptron (averaged), logistic, hinge or naive-bayes.
    #[arg(long, env = "CLASSIFYD_MODEL", default_value = "auto")]
    pub model: ModelChoice,
    /// A named set of feature defaults: default, or accurate (word
    /// trigrams and 2^22 buckets: more accurate on spam streams, about 0.6
    /// of the speed; docs/accuracy.md). Flags given win over it.
    #[arg(long, env = "CLASSIFYD_PRESET", value_enum, default_value = "default")]
    pub preset: Preset,
    /// log2 of the number of hash buckets per class [default: 21; 22 with
    /// --preset accurate].
    #[arg(long, env = "CLASSIFYD_BITS", hide = true)]
    pub bits: Option<u8>,
    /// Words in the lower half of the buckets, character n-grams in the upper.
    #[arg(long, env = "CLASSIFYD_SPLIT_VIEWS", default_value_t = true, action = clap::ArgAction::Set, hide = true)]
    pub split_views: bool,
    /// The feature hash: v2 (a folded multiply, the default) or v1 (xxh3,
    /// every model before it). A checkpoint's own wins when resuming.
    #[arg(long, env = "CLASSIFYD_FEATURE_HASH", value_enum, default_value = "v2", hide = true)]
    pub feature_hash: crate::features::FeatureHash,
    /// Seed of the feature hash.
    #[arg(long, env = "CLASSIFYD_HASH_SEED", default_value_t = 0, hide = true)]
    pub hash_seed: u64,
    /// Word n-grams up to N (0 turns words off) [default: 2; 3 with
    /// --preset accurate].
    #[arg(long, env = "CLASSIFYD_NGRAMS")]
    pub ngrams: Option<u8>,
    /// Character n-grams MIN-MAX (or N); 0 turns them off.
    #[arg(long, env = "CLASSIFYD_CHAR_NGRAMS", default_value = "3-4", hide = true)]
    pub char_ngrams: String,
    /// Character n-grams come from this many leading bytes of the text.
    #[arg(long, env = "CLASSIFYD_CHAR_PREFIX_BYTES", default_value_t = 3000, hide = true)]
    pub char_prefix_bytes: usize,
    /// Lowercase the text before taking character n-grams.
    #[arg(long, env = "CLASSIFYD_CHAR_LOWERCASE", default_value_t = false, action = clap::ArgAction::Set, hide = true)]
    pub char_lowercase: bool,
    /// Feature values: binary, count or log-count.
    #[arg(long, env = "CLASSIFYD_VALUE", default_value = "log-count", hide = true)]
    pub value: ValueMode,
    /// Scale each document's vector to unit L2 norm.
    #[arg(long, env = "CLASSIFYD_NORMALIZE", default_value_t = true, action = clap::ArgAction::Set, hide = true)]
    pub normalize: bool,
    /// Weight values by inverse document frequency learned from the stream.
    #[arg(long, env = "CLASSIFYD_IDF", default_value_t = true, action = clap::ArgAction::Set, hide = true)]
    pub idf: bool,
    /// How much a user's own labels weigh against everyone's: the scale of
    /// each word's personal copy in a message for a named user (0: the
    /// shared model alone). The model's personal switch then learns how
    /// far to trust the copies (docs/model.md). A checkpoint's own wins
    /// when resuming.
    #[arg(long, env = "CLASSIFYD_PERSONAL_SCALE", default_value_t = crate::features::PERSONAL_SCALE, hide = true)]
    pub personal_scale: f32,
    /// Learning rate (default depends on --model).
    #[arg(long, env = "CLASSIFYD_LEARNING_RATE", hide = true)]
    pub learning_rate: Option<f32>,
    /// L2 regularization strength (weight decay per step: rate * l2).
    #[arg(long, env = "CLASSIFYD_L2", hide = true)]
    pub l2: Option<f64>,
    /// Learning-rate schedule: constant, inverse (rate / t^power), adagrad, or arow (hinge only).
    #[arg(long, env = "CLASSIFYD_SCHEDULE", hide = true)]
    pub schedule: Option<Schedule>,
    /// Exponent of the inverse schedule.
    #[arg(long, env = "CLASSIFYD_POWER", hide = true)]
    pub power: Option<f64>,
    /// AdaGrad's step is rate * g / (beta + sqrt(sum of g^2)).
    #[arg(long, env = "CLASSIFYD_ADAGRAD_BETA", hide = true)]
    pub adagrad_beta: Option<f32>,
    /// AROW's regularizer r (with --schedule arow).
    #[arg(long, env = "CLASSIFYD_AROW_R", hide = true)]
    pub arow_r: Option<f32>,
    /// Predict with lazily averaged weights.
    #[arg(long, env = "CLASSIFYD_AVERAGE", action = clap::ArgAction::Set, hide = true)]
    pub average: Option<bool>,
    /// Naive Bayes additive smoothing.
    #[arg(long, env = "CLASSIFYD_NB_ALPHA", hide = true)]
    pub nb_alpha: Option<f32>,
    /// Multi-label: predict the best label when none clears the threshold.
    #[arg(long, env = "CLASSIFYD_AT_LEAST_ONE_LABEL", action = clap::ArgAction::Set, hide = true)]
    pub at_least_one_label: Option<bool>,
    /// Multi-label: predict a label when its raw score (log-odds or margin) exceeds this.
    #[arg(long, env = "CLASSIFYD_THRESHOLD", allow_hyphen_values = true, hide = true)]
    pub threshold: Option<f32>,
    /// Fuse naive Bayes on the words into a linear learner's binary
    /// decisions (default: on; needs --split-views).
    #[arg(long, env = "CLASSIFYD_FUSION", action = clap::ArgAction::Set, hide = true)]
    pub fusion: Option<bool>,
    /// Rate of the fusion's weight.
    #[arg(long, env = "CLASSIFYD_FUSION_RATE", hide = true)]
    pub fusion_rate: Option<f32>,
    /// Additive smoothing of the fused naive Bayes.
    #[arg(long, env = "CLASSIFYD_FUSION_ALPHA", hide = true)]
    pub fusion_alpha: Option<f32>,
    /// The most memory the weights (or counts) may take, e.g. 256MiB:
    /// dense rows while they fit, sparse rows past that, the smallest
    /// weights dropped when even those fill it. Predictors need the same.
    #[arg(long, env = "CLASSIFYD_MODEL_MEMORY", default_value = "256MiB", value_parser = bytes::parse_bytes)]
    pub model_memory: usize,
    /// The most classes a model learns; a message with a new label past it
    /// is dead-lettered (too_many_classes).
    #[arg(long, env = "CLASSIFYD_MAX_CLASSES", default_value_t = crate::model::MAX_CLASSES, hide = true)]
    pub max_classes: usize,
}

/// `--preset`: feature defaults for a purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// The most accurate settings at least half as fast as before fusion.
    Default,
    /// Word trigrams and 2^22 buckets: SpamAssassin 0.9901 / 0.156 % and
    /// SMS 0.9873 / 0.700 % against 0.9897 / 0.159 % and 0.9873 / 0.745 %,
    /// at about 0.6 of the speed (docs/accuracy.md).
    Accurate,
}

impl Preset {
    fn bits(self) -> u8 {
        match self {
            Preset::Default => 21,
            Preset::Accurate => 22,
        }
    }

    fn ngrams(self) -> u8 {
        match self {
            Preset::Default => 2,
            Preset::Accurate => 3,
        }
    }
}

/// `--model`: a learner, or `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelChoice {
    Auto,
    Learner(Learner),
}

impl std::str::FromStr for ModelChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ModelChoice::Auto),
            other => other
                .parse()
                .map(ModelChoice::Learner)
                .map_err(|e| format!("{e}, or auto")),
        }
    }
}

impl ModelArgs {
    /// Validates the flags into feature and learner settings.
    pub fn settings(&self) -> Result<(FeatureConfig, HyperChoice), ConfigError> {
        let features = FeatureConfig {
            bits: self.bits.unwrap_or(self.preset.bits()),
            seed: self.hash_seed,
            word_ngrams: self.ngrams.unwrap_or(self.preset.ngrams()),
            char_ngrams: parse_char_ngrams(&self.char_ngrams).map_err(ConfigError::Invalid)?,
            char_prefix_bytes: self.char_prefix_bytes,
            char_lowercase: self.char_lowercase,
            value: self.value,
            normalize: self.normalize,
            idf: self.idf,
            split_views: self.split_views,
            hash: self.feature_hash,
            personal_scale: self.personal_scale,
        };
        features.validate().map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let choice = match self.model {
            ModelChoice::Auto => HyperChoice {
                single: self.hyper(Learner::Logistic),
                multi: self.hyper(Learner::Hinge),
            },
            ModelChoice::Learner(l) => HyperChoice::same(self.hyper(l)),
        };
        choice.validate().map_err(|e| ConfigError::Invalid(e.to_string()))?;
        Ok((features, choice))
    }

    /// The memory and class bounds, checked against the features.
    pub fn limits(&self, features: &FeatureConfig) -> Result<Limits, ConfigError> {
        let limits = Limits {
            memory: self.model_memory,
            max_classes: self.max_classes,
        };
        limits
            .validate(features)
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        Ok(limits)
    }

    /// The learner's defaults with the flags that were given.
    fn hyper(&self, learner: Learner) -> Hyper {
        let d = Hyper::defaults(learner);
        Hyper {
            learner,
            learning_rate: self.learning_rate.unwrap_or(d.learning_rate),
            l2: self.l2.unwrap_or(d.l2),
            schedule: self.schedule.unwrap_or(d.schedule),
            power: self.power.unwrap_or(d.power),
            adagrad_beta: self.adagrad_beta.unwrap_or(d.adagrad_beta),
            arow_r: self.arow_r.unwrap_or(d.arow_r),
            average: self.average.unwrap_or(d.average),
            nb_alpha: self.nb_alpha.unwrap_or(d.nb_alpha),
            at_least_one_label: self.at_least_one_label.unwrap_or(d.at_least_one_label),
            threshold: self.threshold.unwrap_or(d.threshold),
            fusion: self.fusion.unwrap_or(d.fusion),
            fusion_rate: self.fusion_rate.unwrap_or(d.fusion_rate),
            fusion_alpha: self.fusion_alpha.unwrap_or(d.fusion_alpha),
        }
    }
}
