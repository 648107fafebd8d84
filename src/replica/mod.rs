//! One model, many instances: how a learner's model reaches predict-only
//! replicas through the model topic, as pure logic over records (the
//! Kafka transport moves them: `transport::kafka`).
//!
//! - [`image`]: the scoring image of a model (no optimizer state): a full
//!   version.
//! - `changes`: a delta, the rows learning touched, read from the model.
//! - [`records`]: the learner's [`Publisher`]; `assembler`: the replica's
//!   [`Assembler`], full versions and deltas in order; `apply`: a delta
//!   put into the served model in place; `spool`: where a version's
//!   bytes wait, a file when large (a replica's pieces as they arrive, a
//!   learner's full version as it is cut into records).
//!
//! Owns the model topic's format; it knows no transport, and it reads and
//! writes models only through the checkpoint's protobuf form.

mod apply;
mod assembler;
mod changes;
#[cfg(test)]
mod diff;
pub mod image;
pub mod records;
mod spool;

/// Why a model record cannot be used (it is skipped and counted), or a
/// version cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// The record contradicts itself, the format, or the version it builds on.
    #[error("{0}")]
    Invalid(String),
    /// The assembled version's state cannot be restored.
    #[error(transparent)]
    Restore(#[from] crate::checkpoint::RestoreError),
}

impl From<String> for ReplicaError {
    fn from(detail: String) -> Self {
        ReplicaError::Invalid(detail)
    }
}

impl From<&str> for ReplicaError {
    fn from(detail: &str) -> Self {
        ReplicaError::Invalid(detail.to_string())
    }
}

pub use apply::apply_delta;
pub use assembler::{Assembler, FullVersion, Served, Update};
pub use records::{Kind, MODEL_FORMAT_VERSION, Outgoing, PublishSettings, Publisher, TopicIndex};

#[cfg(test)]
mod tests;
