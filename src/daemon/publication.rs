//! The model's publication beyond this process, a part the daemon core
//! owns: told the model's version after each record, and asked to publish
//! the model at each tick (and at the end, forced). A learner's on Kafka
//! is the model topic (the Kafka transport's); a transport's sink only
//! delivers its records' outcomes.

use crate::model::Model;

/// Where a learner's model goes beyond this process.
pub(crate) trait Publication: Send {
    /// The model's version after a record was handled (when it first
    /// differs from the one published, the staleness clock starts).
    fn observe(&mut self, version: u64);

    /// Publishes `model` when a new version is due (with `force`, whenever
    /// it is not the one last published).
    fn publish(&mut self, model: &mut Model, force: bool);
}
