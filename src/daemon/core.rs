//! The daemon core, written once for every transport: it holds the
//! [`Pipeline`] and its parts (the checkpoint protocol's [`Saving`]: the
//! directory, positions and cadence; the serving part's [`Endpoints`]: the
//! copies requests are answered from and the lessons endpoints take);
//! it takes each [`Record`] a transport read through the pipeline to the
//! transport's [`Sink`], and runs the one checkpoint protocol: the sink
//! flushes every output so far, then the model and the positions past
//! those outputs are saved, then the transport commits them (a Kafka
//! group's offsets).
//!
//! A learner's model goes beyond this process through the core's
//! [`Publication`]; a sink only delivers its records' outcomes.
//!
//! A transport reads (a file's lines, a consumer's records) and drives the
//! core: [`Core::handle`] per record, [`Core::tick`] for the time-based
//! work, [`Core::finish`] at shutdown. It never touches the pipeline's
//! outcomes or the checkpoint itself. Every record's position goes
//! through the core as a typed [`Position`] (a partition's offset, an
//! input's line); the source's part in a checkpoint is a [`Checkpointed`]:
//! what it commits after the save.

use std::time::{Duration, Instant};

use super::DaemonError;
use super::endpoints::{EndpointSettings, Endpoints};
use super::publication::Publication;
pub(crate) use super::saving::Position;
use super::saving::Saving;
use crate::checkpoint::{InputKey, Positions};
use crate::clock::now_ms;
use crate::pipeline::{Daemon, EmailRecord, Entry, Outcome, Pipeline, Prepared, Preparer, Raw};

/// How a record's payload is read.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Payload<'a> {
    /// A JSON message or feedback line.
    Json(&'a [u8]),
    /// A raw e-mail, whose label came in a record header.
    Email { raw: &'a [u8], label: Option<&'a [u8]> },
    /// A record over the size cap, of which only `prefix` was read: it is
    /// refused (too large) without being parsed.
    Oversized { prefix: &'a [u8], length: u64 },
}

impl<'a> Payload<'a> {
    /// The payload's bytes.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        match self {
            Payload::Json(b) | Payload::Email { raw: b, .. } | Payload::Oversized { prefix: b, .. } => b,
        }
    }
}

/// One record a transport read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record<'a> {
    pub payload: Payload<'a>,
    /// The record's key (Kafka's), if any.
    pub key: Option<&'a [u8]>,
    /// Who gave its label, from a record header.
    pub reporter: Option<&'a [u8]>,
    /// Who it is for, from a record header.
    pub user: Option<&'a [u8]>,
    /// When the transport says it was written (ms since the epoch).
    pub stamp_ms: Option<u64>,
    pub position: Position<'a>,
}

impl<'a> Record<'a> {
    /// The record's message as the pipeline reads it: a JSON message, or
    /// a raw e-mail named by its key, with the reporter and user its
    /// headers name.
    pub(crate) fn raw(&self) -> Raw<'a> {
        match self.payload {
            // An oversized record is never parsed (`Core::handle`): what
            // would be read of it is its prefix, as a JSON line.
            Payload::Json(raw) | Payload::Oversized { prefix: raw, .. } => Raw::Json {
                raw,
                reporter: self.reporter,
                user: self.user,
            },
            Payload::Email { raw, label } => Raw::Email {
                raw,
                record: EmailRecord {
                    id: self
                        .key
                        .and_then(|k| std::str::from_utf8(k).ok())
                        .filter(|k| !k.is_empty()),
                    label,
                    reporter: self.reporter,
                    user: self.user,
                },
            },
        }
    }
}

/// Parses `record` as its transport says, hashes its text's features and,
/// with `count`, counts their repeats, into `out`: what
/// [`Core::handle_prepared`] takes, on any thread.
pub(crate) fn prepare_record(preparer: &mut Preparer, record: &Record<'_>, count: bool, out: &mut Prepared) {
    record.raw().prepare(preparer, count, out);
}

/// Where a transport's outputs go. A sink queues or buffers; only
/// [`Sink::flush`] promises that what it was given is delivered.
pub(crate) trait Sink {
    /// Delivers `record`'s outcome: a prediction to the output (and to
    /// review when it asks for a person), a refusal to the dead letters.
    fn deliver(&mut self, record: &Record<'_>, outcome: Outcome) -> Result<(), DaemonError>;

    /// Delivers everything given so far; `Ok(false)` when that cannot be
    /// done yet (the broker is away): the checkpoint waits.
    fn flush(&mut self, why: &str) -> Result<bool, DaemonError>;

    /// The sink's own metrics, with the pipeline's.
    fn export_metrics(&self) {}
}

/// The wait between tries of the last checkpoint when its save fails.
const SHUTDOWN_RETRY: Duration = Duration::from_millis(250);

/// A source's part in a checkpoint: after the save, the positions
/// committed beyond it (a Kafka group's offsets).
pub(crate) trait Checkpointed {
    fn commit(&mut self, positions: &Positions, why: &str);
}

/// A source whose positions are the checkpoint's alone (JSON lines):
/// nothing to commit beyond it.
impl Checkpointed for () {
    fn commit(&mut self, _: &Positions, _: &str) {}
}

/// The pipeline and its parts, for one transport.
pub(crate) struct Core<K: Sink> {
    pipeline: Pipeline,
    sink: K,
    /// The checkpoint directory, the positions, the cadence.
    saving: Saving,
    /// The copies requests are answered from, the lessons endpoints take.
    endpoints: Endpoints,
    /// A learner's publication of the model beyond this process.
    publication: Option<Box<dyn Publication>>,
    last_metrics: Instant,
    /// Records handled by this run.
    messages: u64,
}

impl<K: Sink> Core<K> {
    /// A core over `pipeline`, delivering to `sink`, checkpointing as
    /// `saving` says.
    pub(crate) fn new(pipeline: Pipeline, saving: Saving, sink: K) -> Self {
        Core {
            pipeline,
            sink,
            saving,
            endpoints: Endpoints::default(),
            publication: None,
            last_metrics: Instant::now(),
            messages: 0,
        }
    }

    /// Forwards the endpoints' lessons to `to` (a predictor's way to the
    /// learner) rather than refusing them; before [`Core::serve`].
    pub(crate) fn forward_lessons(&mut self, to: Box<dyn super::lessons::Forward>) {
        self.endpoints.forward_to(to);
    }

    /// Wakes the loop where it waits for its input with `wake` whenever an
    /// endpoint queues a lesson, so it is learned at once; before
    /// [`Core::serve`].
    pub(crate) fn wake_for_lessons(&mut self, wake: crate::serving::Waker) {
        self.endpoints.wake_with(wake);
    }

    /// Publishes the model beyond this process through `publication` (a
    /// learner's model topic) from now on.
    pub(crate) fn publish_to(&mut self, publication: Box<dyn Publication>) {
        self.publication = Some(publication);
    }

    /// The model's version after a record was handled, to the publication
    /// (whose staleness clock starts at the first change).
    fn observe(&mut self) {
        if let Some(p) = &mut self.publication {
            p.observe(self.pipeline.model().version());
        }
    }

    /// Starts the endpoints asked for (see [`Endpoints::start`]), which
    /// answer from copies of the model that [`Core::tick`] publishes to.
    pub(crate) fn serve(&mut self, asked: &EndpointSettings) -> Result<(), DaemonError> {
        let at = (self.saving.dir(), self.saving.positions());
        self.endpoints.start(&mut self.pipeline, at, asked)
    }

    /// Whether endpoints are served (a JSON-lines daemon then goes on
    /// after its input ends).
    pub(crate) fn serves(&self) -> bool {
        self.endpoints.serves()
    }

    /// Whether endpoints take lessons (see [`Endpoints::takes_lessons`]).
    pub(crate) fn takes_lessons(&self) -> bool {
        self.endpoints.takes_lessons()
    }

    /// Applies the endpoints' lessons that came since the last call
    /// ([`Endpoints::learn`]).
    pub(crate) fn learn_told(&mut self) {
        self.endpoints
            .learn(&mut self.pipeline, None, self.publication.as_mut());
    }

    /// Waits up to `within` for a lesson from the endpoints (sleeps that
    /// long without them), then applies what came: an idle daemon answers
    /// a lesson at once, not at its next tick.
    pub(crate) fn wait_for_lessons(&mut self, within: Duration) {
        if let Some(first) = self.endpoints.wait(within) {
            (self.endpoints).learn(&mut self.pipeline, Some(first), self.publication.as_mut());
        }
    }

    pub(crate) fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Whether a console shows a board (the pool among what it shows).
    pub(crate) fn shows_board(&self) -> bool {
        self.endpoints.board().is_some()
    }

    /// The pool's instances as their reports say, to the board.
    pub(crate) fn show_pool(&self, instances: Vec<crate::pool::Instance>) {
        if let Some(board) = self.endpoints.board() {
            board.set_pool(instances);
        }
    }

    /// Puts a model that came from elsewhere in service between two
    /// records (a predictor's newer version from the model topic):
    /// `update` replaces or updates the pipeline's model, and says whether
    /// it did.
    pub(crate) fn put_in_service(&mut self, update: impl FnOnce(&mut Pipeline) -> bool) -> bool {
        update(&mut self.pipeline)
    }

    pub(crate) fn positions(&self) -> &Positions {
        self.saving.positions()
    }

    /// The checkpoint the run resumed from, if any.
    pub(crate) fn resumed_from(&self) -> Option<&std::path::Path> {
        self.saving.resumed_from()
    }

    /// The input `input` starts being read at its line `next` (a JSON-lines
    /// input, known by its first line); `legacy`: the checkpoint kept one
    /// line for any input, which this input's position now replaces.
    pub(crate) fn start_input(&mut self, input: InputKey, next: u64, legacy: bool) {
        let positions = self.saving.positions_mut();
        if legacy {
            positions.forget_legacy_line();
        }
        positions.start_reading(input, next);
    }

    /// Records handled by this run.
    pub(crate) fn messages(&self) -> u64 {
        self.messages
    }

    /// Lessons this run learned: what its last checkpoint must hold.
    pub(crate) fn lessons_learned(&self) -> u64 {
        self.endpoints.taught()
    }

    /// One record through the pipeline, its outcome to the sink, its
    /// position recorded.
    pub(crate) fn handle(&mut self, record: &Record<'_>) -> Result<(), DaemonError> {
        self.handle_with(record, None)
    }

    /// [`Core::handle`] for a record whose message a source prepared
    /// already: message `i` of `prepared` ([`Pipeline::handle_entry`]),
    /// with whatever reporter and user the source set on it (a JSON
    /// line's own fields; it has no headers).
    pub(crate) fn handle_prepared(
        &mut self,
        record: &Record<'_>,
        (prepared, i): (&mut Prepared, usize),
    ) -> Result<(), DaemonError> {
        self.handle_with(record, Some((prepared, i)))
    }

    fn handle_with(
        &mut self,
        record: &Record<'_>,
        prepared: Option<(&mut Prepared, usize)>,
    ) -> Result<(), DaemonError> {
        self.endpoints.absorb(&mut self.pipeline);
        if let Payload::Oversized { length, .. } = record.payload {
            let max = self.pipeline.config().max_message_bytes;
            let bad = self.pipeline.refuse(crate::message::too_large(length, max));
            self.sink.deliver(record, Outcome::Bad(bad))?;
            self.advance(record.position);
            return Ok(());
        }
        let default_id = || record.position.default_id();
        let now = record.stamp_ms.unwrap_or_else(now_ms);
        let started = Instant::now();
        let entry = match prepared {
            Some((p, i)) => Entry::Prepared(p, i),
            None => Entry::Raw(record.raw()),
        };
        let outcome = self.pipeline.handle_entry(entry, &default_id, now, &mut Daemon);
        crate::metrics::handled(&outcome, started.elapsed());
        self.observe();
        self.endpoints.saw(&outcome, &self.pipeline, || record.raw());
        self.sink.deliver(record, outcome)?;
        self.advance(record.position);
        Ok(())
    }

    /// Records that the record at `position` is done (see
    /// [`Saving::advance`]).
    fn advance(&mut self, position: Position<'_>) {
        self.saving.advance(position);
        self.messages += 1;
    }

    /// Whether enough updates were learned for a checkpoint.
    pub(crate) fn due_by_updates(&self) -> bool {
        self.saving.due_by_updates(self.pipeline.model().version())
    }

    /// The time-based work: the requests' messages kept for their labels,
    /// the model published (to the copies, and by the sink), the metrics
    /// (with `metrics`; true when they were exported), a checkpoint when
    /// one is due (with the transport's part, `part`).
    pub(crate) fn tick(&mut self, metrics: bool, part: &mut impl Checkpointed) -> Result<bool, DaemonError> {
        self.endpoints.absorb(&mut self.pipeline);
        self.learn_told();
        self.publish(false);
        self.endpoints.post(&self.pipeline, self.messages);
        let exported = metrics && self.last_metrics.elapsed() >= crate::metrics::PUBLISH_INTERVAL;
        if exported {
            crate::metrics::publish(&self.pipeline);
            self.sink.export_metrics();
            self.last_metrics = Instant::now();
        }
        if let Some(why) = self.saving.due(self.pipeline.model().version()) {
            self.checkpoint(why, part)?;
        }
        Ok(exported)
    }

    /// Publishes the model to the copies that answer requests and beyond
    /// this process, when due (with `force`, whenever it changed).
    pub(crate) fn publish(&mut self, force: bool) {
        self.endpoints.publish(&self.pipeline, force);
        if let Some(p) = &mut self.publication {
            p.publish(self.pipeline.model_mut(), force);
        }
    }

    /// Flush, save, commit (the transport's part before and after the
    /// save: `part`). When the sink cannot deliver yet, nothing is saved or
    /// committed, the next try is one interval away, and `Ok(false)` says
    /// so.
    pub(crate) fn checkpoint(&mut self, why: &str, part: &mut impl Checkpointed) -> Result<bool, DaemonError> {
        if !self.sink.flush(why)? {
            self.saving.put_off();
            return Ok(false);
        }
        let lessons = self.endpoints.lessons_position();
        match self.saving.save(&self.pipeline, lessons, why) {
            // Retried later (`Saving::save`); nothing committed.
            None => return Ok(false),
            Some(true) => self.endpoints.checkpointed(),
            Some(false) => {}
        }
        part.commit(self.saving.positions(), why);
        Ok(true)
    }

    /// Stops answering requests (the endpoints are stopped first) and keeps
    /// the messages they answered, for their late labels.
    pub(crate) fn stop_requests(&mut self) {
        self.endpoints.stop(&mut self.pipeline, self.publication.as_mut());
    }

    /// The last checkpoint, after the model's last publication, retried
    /// until `deadline` while the sink cannot deliver; then the run's
    /// report in the log.
    pub(crate) fn finish(&mut self, within: Duration, part: &mut impl Checkpointed) -> Result<(), DaemonError> {
        self.stop_requests();
        self.publish(true);
        let deadline = Instant::now() + within;
        while !self.checkpoint("shutdown", part)? {
            if let Some(failed) = self.saving.failure() {
                if Instant::now() >= deadline {
                    // Nothing lost: what it would hold was not committed.
                    return Err(failed);
                }
                std::thread::sleep(SHUTDOWN_RETRY);
            } else if Instant::now() >= deadline {
                tracing::error!("could not deliver outputs before the shutdown deadline; last checkpoint kept");
                break;
            }
        }
        Ok(())
    }

    /// Logs what the run did: the progressive accuracy of its labeled
    /// messages and the accuracy of its published predictions that late
    /// labels judged (NaN where there were none: a run whose labels all
    /// came late has no progressive examples, not an accuracy of 0).
    pub(crate) fn report(&self) {
        let p = &self.pipeline;
        let c = p.counters();
        let or_nan = |r: &crate::eval::Progressive| {
            let t = r.total();
            if t.examples > 0 { t.accuracy() } else { f64::NAN }
        };
        tracing::info!(
            messages = self.messages,
            checkpoints = self.saving.written(),
            learned = c.learned,
            predicted = c.predicted,
            bad = c.bad_total(),
            accuracy = or_nan(p.progressive()),
            published_judged = p.published().total().examples,
            published_accuracy = or_nan(p.published()),
            labels_repeated = c.labels_repeated,
            labels_replaced = c.labels_replaced,
            labels_forgotten = c.labels_forgotten,
            "run finished"
        );
    }
}
