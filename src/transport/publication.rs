//! The model's publication beyond this process, a part the daemon core
//! owns: a learner's [`Publisher`] decides when a version is due and
//! which records carry it ([`crate::replica`]); an [`Outlet`] (the model
//! topic, on Kafka) takes the records. A transport's sink only delivers
//! its records' outcomes.

use std::time::Instant;

use crate::clock::now_ms;
use crate::model::Model;
use crate::replica::Publisher;

/// Where the model's records go: queued now, delivered by the transport's
/// next flush (the checkpoint's).
pub(crate) trait Outlet: Send {
    /// Queues one record (a value of none deletes its key); false when it
    /// could not be queued (logged and counted by the outlet).
    fn send(&mut self, key: &[u8], value: Option<&[u8]>) -> bool;

    /// Whether every record queued so far was delivered or failed for good.
    fn settled(&self) -> bool;
}

/// A learner's publication: its publisher and its outlet.
pub(crate) struct Publication {
    publisher: Publisher,
    outlet: Box<dyn Outlet>,
}

impl Publication {
    pub(crate) fn new(publisher: Publisher, outlet: Box<dyn Outlet>) -> Self {
        Publication { publisher, outlet }
    }

    /// The model's version after a record was handled (when it first
    /// differs from the one published, the staleness clock starts).
    pub(crate) fn observe(&mut self, version: u64) {
        self.publisher.observe(version, now_ms);
    }

    /// Publishes `model` when a new version is due (with `force`, whenever
    /// it is not the one last published).
    pub(crate) fn publish(&mut self, model: &mut Model, force: bool) {
        let version = model.version();
        // A model that has learned nothing predicts nothing: replicas wait
        // (not ready) for the first one that has.
        if version == 0 {
            return;
        }
        // The next version waits until the outlet has taken the last one
        // whole: a model that changes faster than the broker stores it is
        // published less often, each version bringing more (a bucket moved
        // twice travels once), instead of queueing without end.
        let due = if force {
            self.publisher.published_version() != Some(version)
        } else {
            self.outlet.settled() && self.publisher.due(version)
        };
        if !due {
            return;
        }
        let started = Instant::now();
        let (mut records, mut bytes) = (0usize, 0usize);
        let outlet = &mut self.outlet;
        // Each record queued as it is made (a full version is never whole
        // in memory).
        let kind = self.publisher.publish(model, now_ms(), &mut |r| {
            records += 1;
            bytes += r.key.len() + r.value.as_ref().map_or(0, Vec::len);
            outlet.send(r.key.as_bytes(), r.value.as_deref());
        });
        crate::metrics::model_published(kind.as_str(), bytes as u64);
        tracing::debug!(
            version,
            kind = kind.as_str(),
            records,
            bytes,
            ms = started.elapsed().as_millis() as u64,
            "model published"
        );
    }
}
