//! The model topic on Kafka (created by [`super::topics`]): read from its
//! start by a predictor (and by a learner, which learns from it the keys a
//! new full version supersedes and the newest epoch), each record handed
//! to the [`Assembler`]. The format and the logic are [`crate::replica`]'s.
//! A predictor's feed ([`ModelFeed`]) is polled by the daemon's loop,
//! on the loop's own thread, between input messages. A learner writes it
//! through its publication (`super::publication`).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::KafkaSettings;
use super::context::{client_config, kafka_error, with_properties};
use crate::daemon::DaemonError;
use crate::model::{Limits, Model};
use crate::pipeline::Pipeline;
use crate::replica::{Assembler, FullVersion, TopicIndex, Update, apply_delta};
use crate::shutdown::Shutdown;

/// A consumer of the model topic's one partition from its start, outside
/// any group (it commits nothing: every start reads the topic again).
pub(super) fn consumer(s: &KafkaSettings) -> Result<BaseConsumer, DaemonError> {
    let mut c = client_config(s);
    c.set("group.id", format!("{}-model-reader", s.group_id))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        // A fetch returns at once when there is a record; with none, it
        // waits at the broker at most this long (librdkafka's 500 ms would
        // add up to half a second of staleness on brokers that wait it out).
        .set("fetch.wait.max.ms", "100")
        // Records are up to 900 KiB and full versions tens of MB: without a
        // bound, librdkafka fetches 50 MB at a time and queues up to 64 MiB
        // ahead of the reader, beside the model being assembled. Ten
        // records' worth a fetch, and as much queued, keep the reader fed.
        .set("fetch.max.bytes", "8388608")
        .set("max.partition.fetch.bytes", "8388608")
        .set("queued.max.messages.kbytes", "8192")
        // Once the queue passes that bound, librdkafka waits this long
        // before it fetches again (1,000 ms by default): with deltas of
        // several MB the queue passed it at nearly every delta, and a
        // predictor read about one delta a second whatever the learner
        // published. It fell seconds behind (6.3 s from publication to
        // service at the median, 20 Newsgroups: docs/scaling.md).
        .set("fetch.queue.backoff.ms", "10");
    let consumer: BaseConsumer = with_properties(c, s)
        .create()
        .map_err(kafka_error("model topic consumer"))?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&s.model_topic, 0, Offset::Beginning)
        .map_err(kafka_error("model topic"))?;
    consumer.assign(&tpl).map_err(kafka_error("model topic"))?;
    Ok(consumer)
}

/// Hands one record to the assembler; true when it completes a newer version.
pub(super) fn take(assembler: &mut Assembler, msg: &BorrowedMessage<'_>) -> bool {
    let key = msg.key().map(String::from_utf8_lossy).unwrap_or_default();
    assembler
        .offer(&key, msg.payload())
        .unwrap_or_else(|e| refused(&e, msg))
}

/// Notes one record in a learner's index of the topic (nothing rebuilt).
pub(super) fn note(index: &mut TopicIndex, msg: &BorrowedMessage<'_>) {
    let key = msg.key().map(String::from_utf8_lossy).unwrap_or_default();
    if let Err(e) = index.note(&key, msg.payload()) {
        refused(&e, msg);
    }
}

/// Counts and logs a record that cannot be used.
fn refused(error: &dyn std::fmt::Display, msg: &BorrowedMessage<'_>) -> bool {
    metrics::counter!("classifyd_model_records_refused_total").increment(1);
    tracing::warn!(%error, offset = msg.offset(), "model record refused");
    false
}

/// Reads the model topic up to its end as it is now (its high watermark),
/// handing each record to `take`: so that a replica serves the newest
/// version from the start ([`take`]) and a learner knows what the topic
/// holds ([`note`]). Gives up on the watermark after `patience` (a broker
/// not yet reachable: the records come later).
pub(super) fn catch_up(
    consumer: &BaseConsumer,
    topic: &str,
    shutdown: &Shutdown,
    patience: Duration,
    mut take: impl FnMut(&BorrowedMessage<'_>),
) -> Result<(), DaemonError> {
    let started = Instant::now();
    let high = loop {
        match consumer.fetch_watermarks(topic, 0, Duration::from_secs(5)) {
            Ok((_, high)) => break high,
            Err(error) if started.elapsed() < patience && !shutdown.is_triggered() => {
                tracing::debug!(%error, "model topic watermarks not yet known");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(error) => {
                tracing::warn!(%error, topic, "cannot read the model topic's end; going on");
                return Ok(());
            }
        }
    };
    let mut read = 0u64;
    let mut next = 0i64;
    // Until past the end and quiet for a moment (some brokers, the test
    // broker among them, report an end short of the last record), or out
    // of patience.
    let quiet = Duration::from_millis(500);
    let mut last_record = Instant::now();
    loop {
        let at_end = next >= high && last_record.elapsed() >= quiet;
        if at_end || shutdown.is_triggered() {
            break;
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(msg)) => {
                last_record = Instant::now();
                next = msg.offset() + 1;
                read += 1;
                take(&msg);
            }
            Some(Err(error)) => {
                tracing::warn!(%error, "model topic read error; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            // Compaction can leave the end past the last record.
            None if started.elapsed() >= patience => break,
            None => {}
        }
    }
    tracing::info!(
        topic,
        records = read,
        ms = started.elapsed().as_millis() as u64,
        "read the model topic"
    );
    Ok(())
}

/// Puts the assembler's updates into `served` (none yet: the first full
/// version makes one); one that does not fit drops what was built.
fn apply_all(assembler: &mut Assembler, served: &mut Option<Model>, limits: Limits) {
    for update in assembler.take_updates() {
        if let Err(error) = update.apply(served, limits) {
            tracing::error!(%error, "a model update does not fit; waiting for a full version");
            assembler.lost();
            *served = None;
            return;
        }
    }
}

/// Puts full version `v` in service in `pipeline`. The model served goes
/// first: the loop holds the daemon's lock while it restores, so nothing
/// is predicted in between either way, and a predictor never holds two
/// models. Should the restore then fail, the predictor serves an empty
/// model until the next full version (the checksum was checked: only a
/// version this build cannot read fails here).
fn restore(pipeline: &mut Pipeline, v: FullVersion) -> Result<(), crate::replica::ReplicaError> {
    let limits = pipeline.model().limits();
    pipeline.clear_model();
    pipeline.replace_model(v.restore(limits)?);
    Ok(())
}

/// The keys of the model topic whose last record is a deletion (read
/// without decoding any value).
fn deleted_keys(s: &KafkaSettings, shutdown: &Shutdown) -> Result<HashSet<String>, DaemonError> {
    let consumer = consumer(s)?;
    let mut deleted = HashSet::new();
    catch_up(&consumer, &s.model_topic, shutdown, Duration::from_secs(30), |m| {
        let key = m.key().map(String::from_utf8_lossy).unwrap_or_default().into_owned();
        match m.payload() {
            None => deleted.insert(key),
            Some(_) => deleted.remove(&key),
        };
    })?;
    Ok(deleted)
}

/// A predictor's feed of the model topic: its consumer and the versions
/// assembled from it.
pub(super) struct ModelFeed {
    consumer: BaseConsumer,
    pub(super) assembler: Assembler,
}

impl ModelFeed {
    /// Reads the topic to its end, then waits (logging every ten seconds)
    /// until it holds a complete version the predictor can serve; `None`
    /// on shutdown.
    pub(super) fn first_model(
        s: &KafkaSettings,
        limits: Limits,
        shutdown: &Shutdown,
    ) -> Result<Option<(Self, Model)>, DaemonError> {
        // First the keys the learner has deleted (what compaction will
        // drop, and may not have yet: the full versions before the newest
        // and the deltas before it), so that they are neither decoded nor
        // restored on the way.
        let deleted = deleted_keys(s, shutdown)?;
        let consumer = consumer(s)?;
        let mut assembler = Assembler::default();
        let mut served: Option<Model> = None;
        // Each update put in place as it comes: the deltas since the last
        // full version are never held all at once.
        catch_up(&consumer, &s.model_topic, shutdown, Duration::from_secs(30), |m| {
            let key = m.key().map(String::from_utf8_lossy).unwrap_or_default();
            if !deleted.contains(key.as_ref()) && take(&mut assembler, m) {
                apply_all(&mut assembler, &mut served, limits);
            }
        })?;
        let mut feed = ModelFeed { consumer, assembler };
        let mut waiting = Instant::now();
        loop {
            apply_all(&mut feed.assembler, &mut served, limits);
            if let Some(model) = served.take() {
                crate::metrics::model_swapped();
                tracing::info!(topic = %s.model_topic, served = ?feed.assembler.served(), "serving the model");
                return Ok(Some((feed, model)));
            }
            if shutdown.is_triggered() {
                return Ok(None);
            }
            if waiting.elapsed() >= Duration::from_secs(10) {
                tracing::info!(topic = %s.model_topic, "no complete model on the model topic yet; waiting for the learner");
                waiting = Instant::now();
            }
            feed.poll(Duration::from_millis(100));
        }
    }

    /// Takes the records that came within `timeout`, up to the first that
    /// completes a newer version (then true): so that a predictor behind
    /// the learner puts each version in place before it reads the next,
    /// and never holds more than one version's update waiting.
    pub(super) fn poll(&mut self, timeout: Duration) -> bool {
        let mut wait = timeout;
        while let Some(record) = self.consumer.poll(wait) {
            match record {
                Ok(msg) if take(&mut self.assembler, &msg) => return true,
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "model topic read error; retrying"),
            }
            // Drain what has come, without waiting again.
            wait = Duration::ZERO;
        }
        false
    }

    /// Puts the updates read since the last call into `pipeline`'s model:
    /// a full version replaces it, a delta is put in place (its rows
    /// only). True when any was; an update that does not fit is logged,
    /// leaves the model as it was, and makes the feed wait for the next
    /// full version.
    pub(super) fn update(&mut self, pipeline: &mut Pipeline) -> bool {
        let mut changed = false;
        for update in self.assembler.take_updates() {
            let started = Instant::now();
            let (kind, applied) = match update {
                Update::Full(v) => ("full", restore(pipeline, v)),
                Update::Delta(mut d) => ("delta", apply_delta(pipeline.model_mut(), &mut d)),
            };
            crate::metrics::model_updated(kind, started.elapsed());
            tracing::debug!(
                kind,
                ms = started.elapsed().as_millis() as u64,
                "model update put in place"
            );
            if let Err(error) = applied {
                tracing::error!(%error, "a model update does not fit the model served; keeping it until a full version comes");
                self.assembler.lost();
                break;
            }
            crate::metrics::model_swapped();
            changed = true;
        }
        changed
    }
}
