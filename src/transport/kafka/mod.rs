//! `classifyd run --brokers ...`: the Kafka transport on the same
//! [`Pipeline`] as the JSON-lines one.
//!
//! A consumer group reads the input and feedback topics; predictions go to
//! the output topic (keyed by the input's key, or its id), bad input to the
//! dead-letter topic with its reason in headers.
//!
//! Exactly-once learning: a checkpoint holds, beside the model, the next
//! offset of every partition whose messages the model includes. Before one
//! is written the producer is flushed (so every prediction and dead letter of
//! those messages is delivered); after it, the same offsets are committed to
//! the group. Checkpoints are taken every N seconds and M updates, before
//! partitions are revoked, and at shutdown. On every assignment, consumption
//! starts at the later of the checkpoint's offset and the group's committed
//! one, so after a restart or a kill -9 no labeled message is learned twice
//! and none is skipped; predictions after the last checkpoint may repeat (at
//! least once, each carrying its id).
//!
//! Roles (`--role`, the pipeline's [`Role`]) share this loop: a standalone
//! process does all of the above; a learner reads the input and feedback
//! topics in its own group (`GROUP-learner`: it must see every partition),
//! learns, checkpoints and publishes its model to the model topic; a
//! predictor reads the model topic ([`model_topic`]), serves the newest
//! complete version, reads the input topic in the group, publishes
//! predictions and commits its offsets after they are delivered (it keeps
//! no checkpoint). See docs/scaling.md.

mod context;
mod errors;
mod model_topic;
mod state;
pub mod tail;
mod topics;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::producer::{Producer, ThreadedProducer};

use self::context::{Ctx, client_config, kafka_error, lock};
use self::errors::{ErrorSpell, SpellNote};
use self::state::{DeliveryCounter, State};
use super::{Cadence, DaemonError, load_or_new};
use crate::checkpoint::CheckpointDir;
use crate::clock::now_ms;
use crate::features::FeatureConfig;
use crate::metrics::Telemetry;
use crate::model::HyperChoice;
use crate::pipeline::{Pipeline, PipelineConfig, Role};
use crate::replica::{Assembler, PublishSettings, Publisher, TopicIndex};
use crate::shutdown::Shutdown;

/// Settings of a Kafka run.
#[derive(Clone, Debug)]
pub struct KafkaSettings {
    pub brokers: String,
    pub input_topic: String,
    pub feedback_topic: String,
    pub output_topic: String,
    pub dead_letter_topic: String,
    /// Messages to review for a person to label (`--review-topic`).
    pub review_topic: Option<String>,
    /// The compacted topic that carries the learner's model to predictors.
    pub model_topic: String,
    pub group_id: String,
    /// librdkafka properties (`-X key=value`), applied to consumer and producer.
    pub properties: Vec<(String, String)>,
    /// Required but for a predictor (which keeps no checkpoint).
    pub checkpoint_dir: Option<PathBuf>,
    pub checkpoint_interval: Duration,
    pub checkpoint_every_updates: u64,
    pub keep_checkpoints: usize,
    /// How long the producer may take to deliver what is queued at a
    /// checkpoint or at shutdown before the checkpoint is put off.
    pub flush_timeout: Duration,
    /// How a learner publishes its model.
    pub publish: PublishSettings,
    pub features: FeatureConfig,
    pub hyper: HyperChoice,
    /// Its `role` says what this process does.
    pub pipeline: PipelineConfig,
    /// Create the topics this process needs when they are missing.
    pub create_topics: bool,
    /// Partitions of the topics it creates (the model topic has one).
    pub topic_partitions: i32,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct KafkaSummary {
    pub messages: u64,
    pub checkpoints: u64,
    pub resumed_from: Option<PathBuf>,
}

/// How often the loop does its time-based work.
const TICK: Duration = Duration::from_millis(100);

/// The next record of the model topic, or never (no feed).
async fn next_record(consumer: Option<&StreamConsumer>) -> Option<Result<BorrowedMessage<'_>, KafkaError>> {
    match consumer {
        Some(c) => Some(c.recv().await),
        None => std::future::pending().await,
    }
}

/// A predictor's first model: the newest complete version on the model
/// topic, waited for (and logged every ten seconds) until the learner
/// publishes one; `None` on shutdown.
async fn first_model(
    s: &KafkaSettings,
    consumer: &StreamConsumer,
    assembler: &mut Assembler,
    shutdown: &Shutdown,
) -> Result<Option<Pipeline>, DaemonError> {
    let patience = Duration::from_secs(30);
    model_topic::catch_up(consumer, &s.model_topic, shutdown, patience, |m| {
        model_topic::take(assembler, m);
    })
    .await?;
    // Restored once a version is held, and again only when a newer one
    // comes (one that cannot be restored is not tried again and again).
    let mut newer = assembler.served().is_some();
    let mut waiting = Instant::now();
    loop {
        if newer {
            match assembler.model() {
                Some(Ok(m)) => {
                    tracing::info!(topic = %s.model_topic, served = ?assembler.served(), "serving the model");
                    crate::metrics::model_swapped();
                    return Ok(Some(Pipeline::new(m, s.pipeline.clone())));
                }
                Some(Err(error)) => {
                    tracing::error!(%error, "the model on the topic cannot be restored; waiting for another");
                }
                None => {}
            }
        }
        if shutdown.is_triggered() {
            return Ok(None);
        }
        if waiting.elapsed() >= Duration::from_secs(10) {
            tracing::info!(topic = %s.model_topic, "no complete model on the model topic yet; waiting for the learner");
            waiting = Instant::now();
        }
        newer = match tokio::time::timeout(TICK, consumer.recv()).await {
            Ok(Ok(msg)) => model_topic::take(assembler, &msg),
            _ => false,
        };
    }
}

/// Runs until `shutdown`; then finishes the message in hand, flushes,
/// checkpoints, commits (a learner publishes its last version first).
pub async fn run(
    s: &KafkaSettings,
    shutdown: &Shutdown,
    telemetry: Option<&Telemetry>,
) -> Result<KafkaSummary, DaemonError> {
    let role = s.pipeline.role;
    // A predictor's feed of the model topic.
    let (mut model_consumer, mut assembler) = (None, Assembler::default());
    let mut publisher = None;
    topics::ensure(s).await;
    let (pipeline, positions, resumed_from, dir) = if role == Role::Predictor {
        let consumer = model_topic::consumer(s)?;
        let Some(pipeline) = first_model(s, &consumer, &mut assembler, shutdown).await? else {
            return Ok(KafkaSummary::default());
        };
        model_consumer = Some(consumer);
        (pipeline, BTreeMap::new(), None, None)
    } else {
        let Some(path) = &s.checkpoint_dir else {
            return Err(DaemonError::Io(std::io::Error::other(format!(
                "--checkpoint-dir is required with --brokers and --role {role} (it holds the model and the offsets)"
            ))));
        };
        let dir = CheckpointDir::open(path, s.keep_checkpoints)?;
        let (pipeline, positions, resumed_from) = load_or_new(Some(&dir), &s.features, &s.hyper, s.pipeline.clone())?;
        if role == Role::Learner {
            // What the topic holds: the keys the first full version
            // supersedes, and the newest epoch (this run's must be later).
            let mut seen = TopicIndex::default();
            let consumer = model_topic::consumer(s)?;
            let patience = Duration::from_secs(10);
            model_topic::catch_up(&consumer, &s.model_topic, shutdown, patience, |m| {
                model_topic::note(&mut seen, m)
            })
            .await?;
            let epoch = now_ms().max(seen.newest_seen().0 + 1);
            tracing::info!(epoch, topic = %s.model_topic, "publishing the model");
            publisher = Some((
                Publisher::new(epoch, s.publish.clone(), seen.live_keys().clone()),
                s.model_topic.clone(),
            ));
        }
        (pipeline, positions, resumed_from, Some(dir))
    };
    let mut pc = client_config(s);
    // Retry deliveries for as long as the broker is away: nothing is dropped.
    pc.set("message.timeout.ms", "0").set("linger.ms", "5");
    for (k, v) in &s.properties {
        pc.set(k, v);
    }
    let producer: ThreadedProducer<DeliveryCounter> = pc
        .create_with_context(DeliveryCounter::default())
        .map_err(kafka_error("producer"))?;
    let cadence = Cadence::new(
        s.checkpoint_interval,
        s.checkpoint_every_updates,
        pipeline.model().version(),
    );
    let state = Arc::new(Mutex::new(State {
        pipeline,
        positions,
        dir,
        producer,
        output_topic: s.output_topic.clone(),
        dead_letter_topic: s.dead_letter_topic.clone(),
        review_topic: s.review_topic.clone(),
        flush_timeout: s.flush_timeout,
        cadence,
        checkpoints: 0,
        messages: 0,
        publisher,
        buf: Vec::new(),
        key: String::new(),
    }));
    // A learner must see every input partition: its own group.
    let group = match role {
        Role::Learner => format!("{}-learner", s.group_id),
        _ => s.group_id.clone(),
    };
    let mut cc = client_config(s);
    cc.set("group.id", &group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "range")
        .set("statistics.interval.ms", "5000")
        // Notice topics created after start (e.g. the feedback topic on first use) within seconds.
        .set("topic.metadata.refresh.interval.ms", "10000")
        // A 10 s session (librdkafka's default is 45 s): a dead member's
        // partitions move within 10 s, and a fresh group is assigned within
        // seconds on brokers that wait out part of the session timeout
        // before the first assignment (the test broker took 23 s at 45 s).
        // -X session.timeout.ms=... overrides it.
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000");
    for (k, v) in &s.properties {
        cc.set(k, v);
    }
    let assigned = Arc::new(AtomicU64::new(0));
    let ctx = Ctx {
        state: Arc::clone(&state),
        assigned: Arc::clone(&assigned),
    };
    let consumer: StreamConsumer<Ctx> = cc.create_with_context(ctx).map_err(kafka_error("consumer"))?;
    let mut last_publish = Instant::now();
    // A predictor leaves feedback to the learner.
    let topics: Vec<&str> = if s.feedback_topic == s.input_topic || role == Role::Predictor {
        vec![&s.input_topic]
    } else {
        vec![&s.input_topic, &s.feedback_topic]
    };
    consumer.subscribe(&topics).map_err(kafka_error("subscribe"))?;
    tracing::info!(brokers = %s.brokers, ?topics, %group, %role, "consuming");
    // Time-based work (checkpoints, metrics, publishing the model, the
    // shutdown check while no messages come) runs on a tick rather than per
    // message: one timer for the whole run, not a timer and clock reads for
    // every message.
    let tick = tokio::time::sleep(TICK);
    tokio::pin!(tick);
    let mut errors = ErrorSpell::default();
    // Exported from the start, at 0, so a rate over it is defined before the first error.
    metrics::counter!("classifyd_consumer_errors_total").increment(0);
    loop {
        if shutdown.is_triggered() {
            tracing::info!("shutdown requested; finishing");
            break;
        }
        tokio::select! {
            biased;
            () = &mut tick => {
                tick.as_mut().reset(tokio::time::Instant::now() + TICK);
                if let Some(SpellNote::Over { errors, seconds }) = errors.tick(Instant::now()) {
                    tracing::info!(errors, seconds, "consumer errors stopped");
                }
                let mut st = lock(&state);
                st.publish_model(false);
                if st.cadence.due_by_time() {
                    st.checkpoint(&consumer, "interval")?;
                }
                if let Some(t) = telemetry
                    && last_publish.elapsed() >= crate::metrics::PUBLISH_INTERVAL
                {
                    crate::metrics::publish(&st.pipeline);
                    crate::metrics::model_served(assembler.served(), assembler.index().newest_seen());
                    let c = st.producer.context();
                    metrics::counter!("classifyd_delivery_failures_total").absolute(c.failed.load(Ordering::Relaxed));
                    metrics::gauge!("classifyd_producer_queue_messages").set(st.producer.in_flight_count() as f64);
                    t.set_ready(assigned.load(Ordering::SeqCst) > 0);
                    last_publish = Instant::now();
                }
            }
            Some(record) = next_record(model_consumer.as_ref()) => {
                let newer = match record {
                    Ok(msg) => model_topic::take(&mut assembler, &msg),
                    Err(error) => {
                        tracing::warn!(%error, "model topic read error; retrying");
                        false
                    }
                };
                if newer {
                    match assembler.model() {
                        Some(Ok(model)) => {
                            lock(&state).pipeline.replace_model(model);
                            crate::metrics::model_swapped();
                            crate::metrics::model_staleness(assembler.oldest_update_ms());
                        }
                        Some(Err(error)) => tracing::error!(%error, "a model version cannot be restored; keeping the one served"),
                        None => {}
                    }
                }
            }
            received = consumer.recv() => match received {
                Err(error) => {
                    metrics::counter!("classifyd_consumer_errors_total").increment(1);
                    match errors.error(Instant::now()) {
                        Some(SpellNote::Began) => tracing::warn!(%error, "consumer error; retrying"),
                        Some(SpellNote::GoesOn { errors, seconds }) => {
                            tracing::warn!(%error, errors, seconds, "consumer errors go on; retrying");
                        }
                        _ => {}
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(msg) => {
                    let mut st = lock(&state);
                    st.handle(&msg);
                    if st.cadence.due_by_updates(st.pipeline.model().version()) {
                        st.checkpoint(&consumer, "updates")?;
                    }
                }
            },
        }
    }
    let mut st = lock(&state);
    // The learner's last version goes out with the last checkpoint's flush.
    st.publish_model(true);
    let deadline = Instant::now() + s.flush_timeout;
    while !st.checkpoint(&consumer, "shutdown")? {
        if Instant::now() >= deadline {
            tracing::error!("could not deliver outputs before the shutdown deadline; last checkpoint kept");
            break;
        }
    }
    let summary = KafkaSummary {
        messages: st.messages,
        checkpoints: st.checkpoints,
        resumed_from,
    };
    let r = st.pipeline.progressive().report();
    tracing::info!(
        messages = summary.messages,
        learned = st.pipeline.counters().learned,
        predicted = st.pipeline.counters().predicted,
        bad = st.pipeline.counters().bad_total(),
        accuracy = r.accuracy,
        "run finished"
    );
    Ok(summary)
}
