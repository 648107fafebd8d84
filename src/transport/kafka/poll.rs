//! The Kafka transport as the daemon drives it: [`Kafka::open`] opens the
//! producer, the topics and the model by role (a predictor's from the
//! model topic, else the checkpoint's), [`Kafka::drive`] makes the
//! consumer and runs the loop ([`KafkaLoop`]) until shutdown, handing the
//! input and feedback records waiting, a batch at a time, to
//! [`KafkaLoop::on_batch`] (a helper thread prepares a batch's messages
//! while the loop handles them: `crate::transport::ahead`), a predictor's
//! model records to [`KafkaLoop::on_model_records`] and the time-based
//! work to [`KafkaLoop::on_tick`]; [`KafkaLoop::shutdown`] finishes.
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

use super::context::{ConsumerCtx, GroupCommit, KafkaCore, consumer_config, kafka_error, lock, producer_config};
use super::errors::{ErrorSpell, SpellNote};
use super::forward::TopicForward;
use super::model_topic::{self, ModelFeed};
use super::pool::Pool;
use super::publication::{TopicOutlet, TopicPublication};
use super::sink::{DeliveryCounter, KafkaSink};
use super::{KafkaSettings, topics};
use crate::clock::now_ms;
use crate::daemon::core::{Payload, Position, Record, prepare_record};
use crate::daemon::lessons::Forward;
use crate::daemon::publication::Publication;
use crate::daemon::{DaemonError, Model, Opened, Start, Transport};
use crate::metrics::Telemetry;
use crate::pipeline::{Pipeline, Prepared, Preparer, Role};
use crate::replica::{Publisher, TopicIndex};
use crate::shutdown::Shutdown;
use crate::transport::ahead::{handle_ahead, worth_a_helper};

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

/// The Kafka transport: its settings, then, once opened, a predictor's
/// feed of the model topic.
pub(crate) struct Kafka {
    s: KafkaSettings,
    feed: Option<ModelFeed>,
}

impl Kafka {
    pub(crate) fn new(s: KafkaSettings) -> Self {
        Kafka { s, feed: None }
    }
}

impl Transport for Kafka {
    type Sink = KafkaSink;

    /// Opens the producer (a property librdkafka refuses fails here, before
    /// anything waits on the broker), the topics, the model (a predictor
    /// waits for the learner's first version: `None` if shut down first),
    /// a learner's publication and a predictor's way to forward lessons.
    fn open(&mut self, start: &Start<'_>) -> Result<Option<Opened<KafkaSink>>, DaemonError> {
        let s = &self.s;
        let producer: Arc<ThreadedProducer<DeliveryCounter>> = Arc::new(
            producer_config(s)
                .create_with_context(DeliveryCounter {
                    model_topic: (s.role == Role::Learner).then(|| s.model_topic.clone()),
                    ..DeliveryCounter::default()
                })
                .map_err(kafka_error("producer"))?,
        );
        tracing::info!(brokers = %s.brokers, "kafka clients configured; connecting");
        topics::ensure(s);
        let Some((model, publisher, feed)) = open_model(s, start)? else {
            return Ok(None);
        };
        let sink = KafkaSink::new(s, Arc::clone(&producer));
        let publication = publisher.map(|publisher| {
            let outlet = TopicOutlet {
                producer,
                topic: s.model_topic.clone(),
                sent: 0,
            };
            Box::new(TopicPublication { publisher, outlet }) as Box<dyn Publication>
        });
        // A predictor sends the lessons it is taught (mail, console) to the learner
        // through the input topic; the learner keeps its own in its
        // lessons log. (Through the topic, a produce still in flight when
        // a learner is killed can land after its successor's lessons:
        // the lessons soak saw one such forget in 20 kills. Fencing it
        // needs a transactional producer; docs/mail.md.)
        let forward = match s.role == Role::Predictor && start.teaches() {
            true => Some(Box::new(TopicForward::new(s).map_err(DaemonError::Usage)?) as Box<dyn Forward>),
            false => None,
        };
        self.feed = feed;
        Ok(Some(Opened {
            model,
            sink,
            publication,
            forward,
            wake: None,
        }))
    }

    /// Makes the consumer, polls until `shutdown`, then finishes the
    /// message in hand, flushes, checkpoints, commits (a learner publishes
    /// its last version first). Blocks the calling thread, which it uses as
    /// the daemon's loop (the module's doc says why).
    fn drive(self, core: KafkaCore, shutdown: &Shutdown, telemetry: Option<&Telemetry>) -> Result<(), DaemonError> {
        let mut daemon = KafkaLoop::start(self, core, shutdown, telemetry)?;
        daemon.run()?;
        daemon.shutdown()
    }
}

/// A running Kafka loop of any role.
struct KafkaLoop<'a> {
    s: KafkaSettings,
    shutdown: &'a Shutdown,
    telemetry: Option<&'a Telemetry>,
    consumer: BaseConsumer<ConsumerCtx>,
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
    errors: ErrorSpell,
    next_tick: Instant,
    next_feed: Instant,
    /// Its reports to the pool topic, and the pool a console shows.
    pool: Option<Pool>,
    /// Whether an endpoint takes lessons: the loop then learns (or
    /// forwards) them after every poll, and polls at most
    /// [`LESSONS_EVERY`] at a time.
    teaches: bool,
}

impl<'a> KafkaLoop<'a> {
    /// The consumer, subscribed to the topics of this role, over `core`.
    fn start(
        kafka: Kafka,
        core: KafkaCore,
        shutdown: &'a Shutdown,
        telemetry: Option<&'a Telemetry>,
    ) -> Result<Self, DaemonError> {
        let Kafka { s, feed } = kafka;
        let teaches = core.takes_lessons();
        let pool = Pool::open(&s, core.shows_board());
        let core = Arc::new(Mutex::new(core));
        let assigned = Arc::new(AtomicU64::new(0));
        let rebalances = Arc::new(AtomicU64::new(0));
        let ctx = ConsumerCtx {
            core: Arc::clone(&core),
            assigned: Arc::clone(&assigned),
            rebalances: Arc::clone(&rebalances),
        };
        let consumer: BaseConsumer<ConsumerCtx> = consumer_config(&s)
            .create_with_context(ctx)
            .map_err(kafka_error("consumer"))?;
        // A predictor leaves feedback to the learner.
        let topics: Vec<&str> = if s.feedback_topic == s.input_topic || s.role == Role::Predictor {
            vec![&s.input_topic]
        } else {
            vec![&s.input_topic, &s.feedback_topic]
        };
        consumer.subscribe(&topics).map_err(kafka_error("subscribe"))?;
        tracing::info!(brokers = %s.brokers, ?topics, role = %s.role, "consuming");
        // Exported from the start, at 0, so a rate over it is defined before the first error.
        metrics::counter!("classifyd_consumer_errors_total").increment(0);
        // And the forwarding of a predictor's lessons: 1 (none refused).
        crate::metrics::lessons_forwarding(true);
        metrics::counter!("classifyd_lessons_producer_rebuilds_total").increment(0);
        Ok(KafkaLoop {
            s,
            shutdown,
            telemetry,
            consumer,
            core,
            assigned,
            rebalances,
            preparer: None,
            feed,
            errors: ErrorSpell::default(),
            next_tick: Instant::now() + TICK,
            next_feed: Instant::now(),
            teaches,
            pool,
        })
    }

    /// Polls until shutdown is requested.
    fn run(&mut self) -> Result<(), DaemonError> {
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
                Self::on_batch(&self.s, &self.core, &self.consumer, &mut self.preparer, &batch)?;
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
        consumer: &BaseConsumer<ConsumerCtx>,
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
        if feed.poll(Duration::ZERO) && lock(&self.core).put_in_service(|p| feed.update(p)) {
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
            let core = lock(&self.core);
            if let Some(instances) = pool.tick(core.pipeline().model().version()) {
                core.show_pool(instances);
            }
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
    fn shutdown(self) -> Result<(), DaemonError> {
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
    consumer: &'c BaseConsumer<ConsumerCtx>,
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

/// The model by role: a predictor's newest version on the model topic,
/// with its feed (`None` if shut down while waiting); else the
/// checkpoint's or a new one, with, for a learner, its publisher.
type ByRole = (Model, Option<Publisher>, Option<ModelFeed>);

fn open_model(s: &KafkaSettings, start: &Start<'_>) -> Result<Option<ByRole>, DaemonError> {
    let role = s.role;
    if role == Role::Predictor {
        let limits = start.settings().pipeline.limits;
        let Some((feed, model)) = ModelFeed::first_model(s, limits, start.shutdown)? else {
            return Ok(None);
        };
        return Ok(Some((start.served(model), None, Some(feed))));
    }
    let why = format!("with --brokers and --role {role} (it holds the model and the offsets)");
    let model = start.checkpointed(Some(&why))?;
    let publisher = match role {
        Role::Learner => Some(publisher(s, start.shutdown)?),
        _ => None,
    };
    Ok(Some((model, publisher, None)))
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
