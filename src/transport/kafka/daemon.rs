//! The Kafka daemon as a type: [`Daemon::start`] opens the clients and the
//! model, [`Daemon::run`] polls until shutdown, handing the input and
//! feedback records waiting, a batch at a time, to [`Daemon::on_batch`]
//! (a helper thread prepares a batch's messages while the loop handles
//! them: `crate::transport::ahead`), a predictor's model records
//! to [`Daemon::on_model_records`] and the time-based work to
//! [`Daemon::on_tick`]; [`Daemon::shutdown`] finishes.
//!
//! One concurrency model: a plain thread over a `BaseConsumer`. Every
//! blocking call (polling, the producer's flush, the synchronous commit,
//! the checkpoint's write and fsync) runs on this thread, which exists for
//! them; no async runtime is blocked. librdkafka runs the rebalance and
//! statistics callbacks inside `poll`, on this same thread, so the state
//! they share with the loop sits behind a lock that is never contended
//! (it is there because a consumer context must be `Sync`), and never held
//! across a poll.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::producer::ThreadedProducer;

use super::context::GroupCommit;
use super::context::{Ctx, KafkaCore, consumer_config, kafka_error, lock, producer_config};
use super::errors::{ErrorSpell, SpellNote};
use super::model_topic::TopicOutlet;
use super::model_topic::{self, ModelFeed};
use super::sink::{DeliveryCounter, KafkaSink};
use super::{KafkaSettings, topics};
use crate::checkpoint::{CheckpointDir, Positions, Resumed, load_or_new};
use crate::clock::now_ms;
use crate::metrics::Telemetry;
use crate::pipeline::{Pipeline, Prepared, Preparer, Role};
use crate::replica::{Publisher, TopicIndex};
use crate::shutdown::Shutdown;
use crate::transport::ahead::{handle_ahead, worth_a_helper};
use crate::transport::core::{Core, Payload, Position, Record, prepare_record};
use crate::transport::publication::Publication;
use crate::transport::saving::Saving;
use crate::transport::service::{Asked, Fronts};
use crate::transport::{Cadence, DaemonError};

/// How often the loop does its time-based work, and the longest a poll
/// waits for a record.
const TICK: Duration = Duration::from_millis(100);
/// The longest a lesson waits for the loop when endpoints take lessons
/// (a poll of the consumer cannot be woken).
const LESSONS_EVERY: Duration = Duration::from_millis(5);
/// How often a predictor looks at the model topic, input or not.
const FEED_EVERY: Duration = Duration::from_millis(10);
/// Most records taken from the consumer at once, to be prepared ahead
/// while they are handled (a batch never waits for more than are there).
const BATCH: usize = 64;
/// ... or about this many payload bytes.
const BATCH_BYTES: usize = 1 << 20;

/// The model a process starts with, and what comes with it by role.
struct Opened {
    pipeline: Pipeline,
    positions: Positions,
    dir: Option<CheckpointDir>,
    /// A learner's publisher.
    publisher: Option<Publisher>,
    /// A predictor's feed of the model topic.
    feed: Option<ModelFeed>,
}

/// A running Kafka daemon of any role.
pub(super) struct Daemon<'a> {
    s: &'a KafkaSettings,
    shutdown: &'a Shutdown,
    telemetry: Option<&'a Telemetry>,
    consumer: BaseConsumer<Ctx>,
    /// Shared with the consumer's callbacks (see the module's doc).
    core: Arc<Mutex<KafkaCore>>,
    /// Partitions assigned now (for `/readyz`).
    assigned: Arc<AtomicU64>,
    /// Rebalances so far (the consumer's callbacks count them).
    rebalances: Arc<AtomicU64>,
    /// Prepares each batch's messages ahead of the loop, for the
    /// pipeline's model (made again when a predictor's model hashes
    /// otherwise).
    preparer: Option<Preparer>,
    feed: Option<ModelFeed>,
    /// The HTTP endpoint, stopped before the last checkpoint.
    fronts: Fronts,
    errors: ErrorSpell,
    next_tick: Instant,
    next_feed: Instant,
    /// Its reports to the pool topic, and the pool a console shows.
    pool: Option<super::pool::Pool>,
    /// Whether an endpoint takes lessons: the loop then learns (or
    /// forwards) them after every poll, and polls at most
    /// [`LESSONS_EVERY`] at a time.
    teaches: bool,
}

impl<'a> Daemon<'a> {
    /// Opens the producer (a property librdkafka refuses fails here, before
    /// anything waits on the broker), the topics, the model (a predictor
    /// waits for the learner's first version: `None` if shut down first)
    /// and the consumer.
    pub(super) fn start(
        s: &'a KafkaSettings,
        shutdown: &'a Shutdown,
        telemetry: Option<&'a Telemetry>,
    ) -> Result<Option<Self>, DaemonError> {
        let producer: Arc<ThreadedProducer<DeliveryCounter>> = Arc::new(
            producer_config(s)
                .create_with_context(DeliveryCounter {
                    model_topic: (s.pipeline.role == Role::Learner).then(|| s.model_topic.clone()),
                    ..DeliveryCounter::default()
                })
                .map_err(kafka_error("producer"))?,
        );
        tracing::info!(brokers = %s.brokers, "kafka clients configured; connecting");
        topics::ensure(s);
        let Some(opened) = open_model(s, shutdown)? else {
            return Ok(None);
        };
        let cadence = Cadence::new(
            s.checkpoint_interval,
            s.checkpoint_every_updates,
            opened.pipeline.model().version(),
        );
        let sink = KafkaSink::new(s, Arc::clone(&producer));
        let saving = Saving::new(opened.dir, opened.positions, cadence);
        let mut core = Core::new(opened.pipeline, saving, sink);
        if let Some(publisher) = opened.publisher {
            let outlet = TopicOutlet {
                producer,
                topic: s.model_topic.clone(),
                sent: 0,
            };
            core.publish_to(Publication::new(publisher, Box::new(outlet)));
        }
        let core = Arc::new(Mutex::new(core));
        let assigned = Arc::new(AtomicU64::new(0));
        let rebalances = Arc::new(AtomicU64::new(0));
        let ctx = Ctx {
            core: Arc::clone(&core),
            assigned: Arc::clone(&assigned),
            rebalances: Arc::clone(&rebalances),
        };
        let consumer: BaseConsumer<Ctx> = consumer_config(s)
            .create_with_context(ctx)
            .map_err(kafka_error("consumer"))?;
        // A predictor leaves feedback to the learner.
        let topics: Vec<&str> = if s.feedback_topic == s.input_topic || s.pipeline.role == Role::Predictor {
            vec![&s.input_topic]
        } else {
            vec![&s.input_topic, &s.feedback_topic]
        };
        consumer.subscribe(&topics).map_err(kafka_error("subscribe"))?;
        tracing::info!(brokers = %s.brokers, ?topics, role = %s.pipeline.role, "consuming");
        // Exported from the start, at 0, so a rate over it is defined before the first error.
        metrics::counter!("classifyd_consumer_errors_total").increment(0);
        // And the forwarding of a predictor's lessons: 1 (none refused).
        crate::metrics::lessons_forwarding(true);
        metrics::counter!("classifyd_lessons_producer_rebuilds_total").increment(0);
        // A predictor sends the lessons it is taught (mail, console) to the learner
        // through the input topic; the learner keeps its own in its
        // lessons log. (Through the topic, a produce still in flight when
        // a learner is killed can land after its successor's lessons:
        // the lessons soak saw one such forget in 20 kills. Fencing it
        // needs a transactional producer; docs/mail.md.)
        let asked = Asked {
            http: s.http.as_ref(),
            mail: s.mail.as_ref(),
            console: s.console.as_ref(),
        };
        if s.pipeline.role == Role::Predictor && asked.teaches() {
            let to = super::forward::TopicForward::new(s).map_err(DaemonError::Usage)?;
            lock(&core).forward_lessons(Box::new(to));
        }
        let fronts = lock(&core).serve(asked)?;
        let pool = super::pool::Pool::open(s, lock(&core).board());
        Ok(Some(Daemon {
            s,
            shutdown,
            telemetry,
            consumer,
            core,
            assigned,
            rebalances,
            preparer: None,
            feed: opened.feed,
            fronts,
            errors: ErrorSpell::default(),
            next_tick: Instant::now() + TICK,
            next_feed: Instant::now(),
            teaches: asked.teaches(),
            pool,
        }))
    }

    /// Polls until shutdown is requested.
    pub(super) fn run(&mut self) -> Result<(), DaemonError> {
        while !self.shutdown.is_triggered() {
            let now = Instant::now();
            if now >= self.next_tick {
                self.next_tick = now + TICK;
                self.on_tick()?;
            }
            if self.feed.is_some() && now >= self.next_feed {
                self.next_feed = now + FEED_EVERY;
                self.on_model_records();
            }
            // A predictor waits at most as long as it may leave its model
            // feed unread.
            let wait = match (self.teaches, self.feed.is_some()) {
                (true, _) => LESSONS_EVERY,
                (false, true) => FEED_EVERY,
                (false, false) => TICK,
            };
            let batch = take_batch(&self.consumer, &self.rebalances, wait, &mut self.errors);
            if self.teaches {
                lock(&self.core).learn_told();
            }
            if !batch.msgs.is_empty() {
                Self::on_batch(self.s, &self.core, &self.consumer, &mut self.preparer, &batch)?;
            }
        }
        tracing::info!("shutdown requested; finishing");
        Ok(())
    }

    /// Input and feedback records through the pipeline in order, each
    /// one's outputs queued and offset recorded, a checkpoint whenever
    /// enough updates are due. A helper thread prepares a batch's messages
    /// ahead of the loop, unless the batch is too small to gain
    /// ([`worth_a_helper`]): then its records are handled as they come.
    fn on_batch(
        s: &KafkaSettings,
        core: &Mutex<KafkaCore>,
        consumer: &BaseConsumer<Ctx>,
        preparer: &mut Option<Preparer>,
        batch: &Batch<'_>,
    ) -> Result<(), DaemonError> {
        let mut core = lock(core);
        let records: Vec<Record<'_>> = batch.msgs.iter().map(|m| record(s, m)).collect();
        let preparer = worth_a_helper(records.len(), batch.bytes).then(|| fitted(preparer, core.pipeline()));
        let mut handle = |r: &Record<'_>, prepared: Option<(&mut Prepared, usize)>| {
            match prepared {
                Some(p) => core.handle_prepared(r, p)?,
                None => core.handle(r)?,
            }
            if core.due_by_updates() {
                core.checkpoint("updates", &mut GroupCommit(consumer))?;
            }
            Ok(())
        };
        let Some(preparer) = preparer else {
            return records.iter().try_for_each(|r| handle(r, None));
        };
        handle_ahead(
            preparer,
            &records,
            |prep, r, out| prepare_record(prep, r, true, out),
            |r, p| handle(r, Some(p)),
        )
    }

    /// A predictor's model records: a newer complete version is put in
    /// service between two messages.
    fn on_model_records(&mut self) {
        let Some(feed) = self.feed.as_mut() else {
            return;
        };
        if feed.poll(Duration::ZERO) && feed.update(lock(&self.core).pipeline_mut()) {
            let published_ms = feed.assembler.served().map_or(0, |(_, _, at)| at);
            crate::metrics::model_staleness(feed.assembler.oldest_update_ms(), published_ms);
        }
    }

    /// The time-based work: the error log, publishing the model,
    /// checkpoints by time, metrics.
    fn on_tick(&mut self) -> Result<(), DaemonError> {
        if let Some(SpellNote::Over { errors, seconds }) = self.errors.tick(Instant::now()) {
            tracing::info!(errors, seconds, "consumer errors stopped");
        }
        let exported = lock(&self.core).tick(self.telemetry.is_some(), &mut GroupCommit(&self.consumer))?;
        if let Some(pool) = &mut self.pool {
            pool.tick(lock(&self.core).pipeline().model().version());
        }
        if let Some(t) = self.telemetry
            && exported
        {
            if let Some(feed) = &self.feed {
                let a = &feed.assembler;
                crate::metrics::model_served(a.served(), a.index().newest_seen());
            }
            t.set_ready(self.assigned.load(Ordering::SeqCst) > 0);
        }
        Ok(())
    }

    /// Finishes: a learner publishes its last version, then the last
    /// checkpoint (flush, save, commit) is retried until the deadline.
    pub(super) fn shutdown(mut self) -> Result<(), DaemonError> {
        drop(std::mem::take(&mut self.fronts));
        if let Some(pool) = &self.pool {
            pool.finish();
        }
        let mut core = lock(&self.core);
        // The learner's last version goes out with the last checkpoint's flush.
        core.finish(self.s.flush_timeout, &mut GroupCommit(&self.consumer))?;
        core.report();
        Ok(())
    }
}

/// Records taken from the consumer together, and their payloads' bytes.
struct Batch<'c> {
    msgs: Vec<BorrowedMessage<'c>>,
    bytes: usize,
}

/// The records waiting, up to a batch: the first poll waits up to `wait`,
/// the rest take only what is there. A rebalance in a poll (its callbacks
/// run inside it) drops the records taken before it: their partitions
/// were revoked, and a partition assigned again starts from the
/// checkpoint's offset, before them, so they come again (to this process
/// or the partition's new owner), and were never handled here.
fn take_batch<'c>(
    consumer: &'c BaseConsumer<Ctx>,
    rebalances: &AtomicU64,
    mut wait: Duration,
    errors: &mut ErrorSpell,
) -> Batch<'c> {
    let mut batch = Batch {
        msgs: Vec::new(),
        bytes: 0,
    };
    while batch.msgs.len() < BATCH && batch.bytes < BATCH_BYTES {
        let seen = rebalances.load(Ordering::SeqCst);
        let polled = consumer.poll(wait);
        if rebalances.load(Ordering::SeqCst) != seen {
            batch.msgs.clear();
            batch.bytes = 0;
        }
        match polled {
            None => break,
            Some(Err(error)) => {
                on_error(errors, &error);
                break;
            }
            Some(Ok(msg)) => {
                batch.bytes += msg.payload_len();
                batch.msgs.push(msg);
            }
        }
        wait = Duration::ZERO;
    }
    batch
}

/// A consumer error (the broker away, say): counted, logged once per
/// spell, and a pause before the next poll.
fn on_error(errors: &mut ErrorSpell, error: &KafkaError) {
    metrics::counter!("classifyd_consumer_errors_total").increment(1);
    match errors.error(Instant::now()) {
        Some(SpellNote::Began) => tracing::warn!(%error, "consumer error; retrying"),
        Some(SpellNote::GoesOn { errors, seconds }) => {
            tracing::warn!(%error, errors, seconds, "consumer errors go on; retrying");
        }
        _ => {}
    }
    std::thread::sleep(Duration::from_millis(100));
}

/// The daemon's preparer, made again when the pipeline's model hashes
/// otherwise than the one it was made for.
fn fitted<'p>(slot: &'p mut Option<Preparer>, pipeline: &Pipeline) -> &'p mut Preparer {
    if slot
        .as_ref()
        .is_some_and(|p| p.features() != pipeline.model().features())
    {
        *slot = None;
    }
    slot.get_or_insert_with(|| pipeline.preparer())
}

/// What the core needs of a consumed record: its payload (a raw e-mail
/// on an e-mail input topic, whose label is in a header), key, reporter
/// and user headers, timestamp and offset.
fn record<'m>(s: &'m KafkaSettings, msg: &'m BorrowedMessage<'m>) -> Record<'m> {
    let header = |name: &str| {
        msg.headers()
            .and_then(|h| h.iter().find(|h| h.key == name).map(|h| h.value.unwrap_or_default()))
    };
    let raw = msg.payload().unwrap_or(&[]);
    let payload = match &s.email_input {
        Some(label) if msg.topic() == s.input_topic => Payload::Email {
            raw,
            label: header(label),
        },
        _ => Payload::Json(raw),
    };
    Record {
        payload,
        key: msg.key(),
        reporter: header(&s.reporter_header),
        user: header(&s.user_header),
        stamp_ms: msg.timestamp().to_millis().and_then(|t| u64::try_from(t).ok()),
        position: Position::Offset {
            topic: msg.topic(),
            partition: msg.partition(),
            offset: msg.offset() as u64,
        },
    }
}

/// The model by role: a predictor's newest version on the model topic
/// (`None` if shut down while waiting); else the checkpoint's or a new
/// one, with, for a learner, its publisher.
fn open_model(s: &KafkaSettings, shutdown: &Shutdown) -> Result<Option<Opened>, DaemonError> {
    let role = s.pipeline.role;
    if role == Role::Predictor {
        let Some((feed, model)) = ModelFeed::first_model(s, shutdown)? else {
            return Ok(None);
        };
        return Ok(Some(Opened {
            pipeline: Pipeline::new(model, s.pipeline.clone()),
            positions: Positions::default(),
            dir: None,
            publisher: None,
            feed: Some(feed),
        }));
    }
    let Some(path) = &s.checkpoint_dir else {
        return Err(DaemonError::Usage(format!(
            "--checkpoint-dir is required with --brokers and --role {role} (it holds the model and the offsets)"
        )));
    };
    let dir = CheckpointDir::open(path, s.keep_checkpoints)?;
    let Resumed {
        pipeline, positions, ..
    } = load_or_new(Some(&dir), &s.features, &s.hyper, s.pipeline.clone())?;
    let publisher = match role {
        Role::Learner => Some(publisher(s, shutdown)?),
        _ => None,
    };
    Ok(Some(Opened {
        pipeline,
        positions,
        dir: Some(dir),
        publisher,
        feed: None,
    }))
}

/// A learner's publisher: what the model topic holds (the keys its first
/// full version supersedes, and the newest epoch, which this run's must
/// pass).
fn publisher(s: &KafkaSettings, shutdown: &Shutdown) -> Result<Publisher, DaemonError> {
    let mut seen = TopicIndex::default();
    let consumer = model_topic::consumer(s)?;
    model_topic::catch_up(&consumer, &s.model_topic, shutdown, Duration::from_secs(10), |m| {
        model_topic::note(&mut seen, m)
    })?;
    let epoch = now_ms().max(seen.newest_seen().0 + 1);
    tracing::info!(epoch, topic = %s.model_topic, "publishing the model");
    Ok(Publisher::new(epoch, s.publish.clone(), seen.live_keys().clone()))
}
