//! A learner's publication of its model on the model topic (the daemon's
//! `Publication`): its [`Publisher`] decides when a version is due and
//! which records carry it ([`crate::replica`]); a [`TopicOutlet`] queues
//! them on the daemon's producer, delivered by its next flush (the
//! checkpoint's).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rdkafka::producer::{Producer, ThreadedProducer};

use super::sink::{DeliveryCounter, send_opt};
use crate::clock::now_ms;
use crate::daemon::publication::Publication;
use crate::model::Model;
use crate::replica::Publisher;

/// A learner's model topic: records queued on the
/// daemon's producer (waiting while librdkafka's queue is full), settled
/// once the producer's delivery reports have counted them all
/// ([`DeliveryCounter::model_settled`]).
pub(super) struct TopicOutlet {
    pub(super) producer: Arc<ThreadedProducer<DeliveryCounter>>,
    pub(super) topic: String,
    /// Records queued so far.
    pub(super) sent: u64,
}

impl TopicOutlet {
    /// Queues one record (a value of none deletes its key); false when it
    /// could not be queued (logged and counted).
    fn send(&mut self, key: &[u8], value: Option<&[u8]>) -> bool {
        let queued = send_opt(&self.producer, &self.topic, key, value, None);
        self.sent += u64::from(queued);
        queued
    }

    /// Whether every record queued so far was delivered or failed for good.
    fn settled(&self) -> bool {
        self.producer.context().model_settled.load(Ordering::Relaxed) >= self.sent
    }
}

/// A learner's publication: its publisher and the model topic.
pub(super) struct TopicPublication {
    pub(super) publisher: Publisher,
    pub(super) outlet: TopicOutlet,
}

impl Publication for TopicPublication {
    fn observe(&mut self, version: u64) {
        self.publisher.observe(version, now_ms);
    }

    fn publish(&mut self, model: &mut Model, force: bool) {
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
