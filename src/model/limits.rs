//! What a model may use, whatever its stream: the memory of its weights
//! and the number of its classes. Set by the process that runs a model
//! (flags), not saved with it.

use super::{MAX_CLASSES, ModelError, weights};
use crate::features::FeatureConfig;

/// The memory and class bounds of one model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the weights or counts (`--model-memory`).
    pub memory: usize,
    /// Most classes (`--max-classes`).
    pub max_classes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: weights::DEFAULT_BUDGET,
            max_classes: MAX_CLASSES,
        }
    }
}

impl Limits {
    /// No bounds: for a model that is only read (`predict`, `inspect`, a
    /// checkpoint's check), kept as it was loaded, neither pruned nor given
    /// room to grow.
    pub fn unbounded() -> Self {
        Limits {
            memory: usize::MAX,
            max_classes: usize::MAX,
        }
    }

    /// Whether the limits can hold a model with `features` at all: the
    /// sparse layout's bucket index (or a binary task's one column) must
    /// fit with room to learn.
    pub fn validate(&self, features: &FeatureConfig) -> Result<(), ModelError> {
        let least = features.buckets().saturating_mul(32);
        if self.memory < least {
            return Err(ModelError::Hyper(format!(
                "--model-memory {} is too small for --bits {}: it needs at least {least} bytes (32 per bucket)",
                self.memory, features.bits
            )));
        }
        if self.max_classes == 0 || self.max_classes > u32::MAX as usize {
            return Err(ModelError::Hyper(format!(
                "--max-classes must be between 1 and {}, got {}",
                u32::MAX,
                self.max_classes
            )));
        }
        Ok(())
    }
}
