//! The daemon core, written once for every transport: it owns the
//! [`Pipeline`], the positions its checkpoints record, the checkpoint
//! directory and [`Cadence`], and the copies of the model that HTTP
//! requests are answered from; it takes each [`Record`] a transport read
//! through the pipeline to the transport's [`Sink`], and runs the one
//! checkpoint protocol: the sink flushes every output so far, then the
//! model and the positions past those outputs are saved, then the
//! transport commits them (a Kafka group's offsets).
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

use super::lessons::Lessons;
use super::publication::Publication;
use super::{Cadence, DaemonError};
use crate::checkpoint::{CheckpointDir, InputKey, LinePosition, Positions};
use crate::clock::now_ms;
use crate::http::{HttpServer, HttpSettings};
use crate::mail::{MailServers, MailSettings};
use crate::pipeline::{Daemon, EmailRecord, Entry, Outcome, Pipeline, Prepared, Preparer, Raw, Role};
use crate::serving::{Classify, Feed, Hooks, Told};

/// Where a record stands in its input: what a checkpoint records once it
/// is handled.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Position<'a> {
    /// Offset `offset` of a Kafka topic's partition.
    Offset {
        topic: &'a str,
        partition: i32,
        offset: u64,
    },
    /// Line `number` (from 0) of JSON-lines input `input`, whose bytes
    /// (or, over the size cap, first bytes) are `line`: a checkpoint
    /// records the next line and the mark of this one.
    Line {
        input: &'a InputKey,
        number: u64,
        line: &'a [u8],
    },
}

impl Position<'_> {
    /// The id a message without one is given: `topic/partition/offset`, or
    /// its line's number from 1.
    pub(crate) fn default_id(&self) -> String {
        match self {
            Position::Offset {
                topic,
                partition,
                offset,
            } => format!("{topic}/{partition}/{offset}"),
            Position::Line { number, .. } => (number + 1).to_string(),
        }
    }
}

/// How a record's payload is read.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Payload<'a> {
    /// A JSON message or feedback line.
    Json(&'a [u8]),
    /// A raw e-mail, whose label came in a record header.
    Email { raw: &'a [u8], label: Option<&'a [u8]> },
}

impl<'a> Payload<'a> {
    /// The payload's bytes.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        match self {
            Payload::Json(b) | Payload::Email { raw: b, .. } => b,
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
            Payload::Json(raw) => Raw::Json {
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

/// Where a JSON-lines input stands: its next line, and the last line
/// handled, whose mark a checkpoint records (hashed then, once a
/// checkpoint, not once a line).
#[derive(Debug)]
struct LineAt {
    input: InputKey,
    next: u64,
    last_line: Vec<u8>,
    /// Whether a line was handled (else the recorded mark still holds).
    handled: bool,
}

impl LineAt {
    fn new(input: InputKey, next: u64) -> Self {
        LineAt {
            input,
            next,
            last_line: Vec::new(),
            handled: false,
        }
    }

    /// Its position and mark into `positions`.
    fn settle(&self, positions: &mut Positions) {
        let mark = self.handled.then(|| LinePosition::mark_of(&self.last_line));
        positions.set_line(&self.input, self.next, mark);
    }
}

/// The endpoints a daemon serves besides its transport; dropped, they stop.
#[derive(Default)]
pub(crate) struct Fronts {
    pub http: Option<HttpServer>,
    pub mail: MailServers,
}

impl Fronts {
    /// Whether any endpoint is served (a JSON-lines daemon then goes on
    /// after its input ends).
    pub(crate) fn any(&self) -> bool {
        self.http.is_some() || self.mail.any()
    }
}

/// The pipeline and everything a checkpoint covers, for one transport.
pub(crate) struct Core<K: Sink> {
    pipeline: Pipeline,
    positions: Positions,
    dir: Option<CheckpointDir>,
    cadence: Cadence,
    sink: K,
    /// The copies of the model that HTTP and mail requests are answered from.
    feed: Option<Feed>,
    /// The mail protocols' lessons, to learn between records, and their
    /// log.
    lessons: Lessons,
    /// A learner's publication of the model beyond this process.
    publication: Option<Publication>,
    /// Where the JSON-lines input stands, once it is known.
    lines: Option<LineAt>,
    last_metrics: Instant,
    checkpoints: u64,
    messages: u64,
    /// Mail lessons learned by this run.
    taught: u64,
}

impl<K: Sink> Core<K> {
    /// A core over `pipeline`, resumed at `positions` (from `dir`'s
    /// checkpoint, if any), delivering to `sink`.
    pub(crate) fn new(
        pipeline: Pipeline,
        positions: Positions,
        dir: Option<CheckpointDir>,
        sink: K,
        cadence: Cadence,
    ) -> Self {
        Core {
            pipeline,
            positions,
            dir,
            cadence,
            sink,
            feed: None,
            lessons: Lessons::default(),
            publication: None,
            lines: None,
            last_metrics: Instant::now(),
            checkpoints: 0,
            messages: 0,
            taught: 0,
        }
    }

    /// Keeps in the pipeline's cache what the copies answered since the
    /// last call (before each record and lesson, and at each tick: a late
    /// label finds its request's message).
    fn absorb_requests(&mut self) {
        if let Some(feed) = &self.feed {
            feed.absorb(&mut self.pipeline);
        }
    }

    /// Forwards the mail protocols' lessons to `to` (a predictor's way to
    /// the learner) rather than refusing them; before [`Core::serve`].
    pub(crate) fn forward_lessons(&mut self, to: Box<dyn super::lessons::Forward>) {
        self.lessons.forward_to(to);
    }

    /// Publishes the model beyond this process through `publication` (a
    /// learner's model topic) from now on.
    pub(crate) fn publish_to(&mut self, publication: Publication) {
        self.publication = Some(publication);
    }

    /// The model's version after a record or lesson was handled, to the
    /// publication (whose staleness clock starts at the first change).
    fn observe(&mut self) {
        if let Some(p) = &mut self.publication {
            p.observe(self.pipeline.model().version());
        }
    }

    /// Starts the endpoints asked for: HTTP (`--http-addr`) and the mail
    /// protocols (`--spamd-addr`, `--rspamd-addr`), which answer from copies
    /// of the model that [`Core::tick`] publishes to, and whose lessons it
    /// learns (but on a predictor, which refuses them).
    pub(crate) fn serve(
        &mut self,
        http: Option<&HttpSettings>,
        mail: Option<&MailSettings>,
    ) -> Result<Fronts, DaemonError> {
        let learns = self.pipeline.config().role != Role::Predictor;
        // The lessons a crash left in the log, learned before the copies
        // that answer checks are made.
        if let (true, Some(dir)) = (learns, &self.dir) {
            self.taught += self.lessons.recover(dir, &self.positions, &mut self.pipeline)? as u64;
        }
        if http.is_some() || mail.is_some() {
            let hooks = Hooks {
                published: crate::metrics::http_model,
                unkept: crate::metrics::http_unkept,
            };
            self.feed = Some(Feed::start(&self.pipeline, hooks));
        }
        let told = match mail {
            Some(_) if learns || self.lessons.forwards() => {
                let (to, from) = crate::serving::told_queue();
                self.lessons.listen(from);
                Some(to)
            }
            _ => None,
        };
        let copies = || self.feed.as_ref().map(|f| f.copies() as std::sync::Arc<dyn Classify>);
        let http = crate::http::serve(http, copies())?;
        let mail = crate::mail::serve(mail, copies(), told)?;
        Ok(Fronts { http, mail })
    }

    /// Applies the mail protocols' lessons (`TELL`, `/learnspam`, ...)
    /// that came since the last call, as the feedback path applies a
    /// labeled message or a forget, once the lessons log holds them (with
    /// a checkpoint directory); then publishes the model to the copies
    /// that answer checks when their interval has passed, and answers
    /// each: a crash after the answer loses nothing (`super::lessons`),
    /// and a check sees it within a publication interval (docs/mail.md).
    pub(crate) fn learn_told(&mut self) {
        self.learn_told_after(None);
    }

    /// Waits up to `within` for a lesson from the mail endpoints (sleeps
    /// that long without them), then applies what came: an idle daemon
    /// answers a lesson at once, not at its next tick.
    pub(crate) fn wait_for_lessons(&mut self, within: Duration) {
        if let Some(first) = self.lessons.wait(within) {
            self.learn_told_after(Some(first));
        }
    }

    /// [`Core::learn_told`], `first` before the ones waiting.
    fn learn_told_after(&mut self, first: Option<Told>) {
        // A check answered before its lesson is kept first (its record is
        // the one the lesson then teaches).
        self.absorb_requests();
        let batch = self.lessons.waiting(first);
        if batch.is_empty() {
            return;
        }
        let publication = &mut self.publication;
        let mut started = Instant::now();
        let answers = self.lessons.learn(batch, &mut self.pipeline, |p, outcome| {
            crate::metrics::handled(outcome, started.elapsed());
            if let Some(publication) = publication.as_mut() {
                publication.observe(p.model().version());
            }
            started = Instant::now();
        });
        // The copies take them at their next publication (an interval at
        // most: `Feed`), not one copy of the model per lesson.
        if let Some(feed) = &mut self.feed {
            feed.publish(&self.pipeline, false);
        }
        self.taught += answers.len() as u64;
        for (reply, done) in answers {
            // The asker may have gone (its timeout): nothing to answer.
            let _ = reply.send(done);
        }
    }

    pub(crate) fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The pipeline, for what a transport puts in it besides records (a
    /// predictor's model versions, a refusal the transport made).
    pub(crate) fn pipeline_mut(&mut self) -> &mut Pipeline {
        &mut self.pipeline
    }

    pub(crate) fn positions(&self) -> &Positions {
        &self.positions
    }

    /// The positions, for what a transport records besides its records'
    /// (an input's start, read from its first line).
    pub(crate) fn positions_mut(&mut self) -> &mut Positions {
        &mut self.positions
    }

    pub(crate) fn sink_mut(&mut self) -> &mut K {
        &mut self.sink
    }

    /// Records handled by this run.
    pub(crate) fn messages(&self) -> u64 {
        self.messages
    }

    /// Mail lessons this run learned (those the lessons log gave back at
    /// the start included): what its last checkpoint must hold.
    pub(crate) fn lessons_learned(&self) -> u64 {
        self.taught
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
        self.absorb_requests();
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
        self.sink.deliver(record, outcome)?;
        self.advance(record.position);
        Ok(())
    }

    /// A JSON-lines input starts: `input`, at line `next` (the lines
    /// before it a checkpoint holds).
    pub(crate) fn start_lines(&mut self, input: InputKey, next: u64) {
        self.lines = Some(LineAt::new(input, next));
    }

    /// Records that the record at `position` is done: a Kafka offset, or a
    /// JSON-lines line (kept as it stands, recorded at the next checkpoint).
    pub(crate) fn advance(&mut self, position: Position<'_>) {
        match position {
            Position::Offset {
                topic,
                partition,
                offset,
            } => self.positions.set_offset(topic, partition, offset + 1),
            Position::Line { input, number, line } => {
                let at = match &mut self.lines {
                    Some(at) if at.input == *input => at,
                    other => other.insert(LineAt::new(input.clone(), number)),
                };
                at.next = number + 1;
                at.last_line.clear();
                at.last_line.extend_from_slice(line);
                at.handled = true;
            }
        }
        self.messages += 1;
    }

    /// Whether enough updates were learned for a checkpoint.
    pub(crate) fn due_by_updates(&self) -> bool {
        self.cadence.due_by_updates(self.pipeline.model().version())
    }

    /// The time-based work: the requests' messages kept for their labels,
    /// the model published (to the copies, and by the sink), the metrics
    /// (with `metrics`; true when they were exported), a checkpoint when
    /// one is due (with the transport's part, `part`).
    pub(crate) fn tick(&mut self, metrics: bool, part: &mut impl Checkpointed) -> Result<bool, DaemonError> {
        self.absorb_requests();
        self.learn_told();
        self.publish(false);
        let exported = metrics && self.last_metrics.elapsed() >= crate::metrics::PUBLISH_INTERVAL;
        if exported {
            crate::metrics::publish(&self.pipeline);
            self.sink.export_metrics();
            self.last_metrics = Instant::now();
        }
        let why = match (self.due_by_updates(), self.cadence.due_by_time()) {
            (true, _) => "updates",
            (false, true) => "interval",
            (false, false) => return Ok(exported),
        };
        self.checkpoint(why, part)?;
        Ok(exported)
    }

    /// Publishes the model to the copies that answer requests and beyond
    /// this process, when due (with `force`, whenever it changed).
    pub(crate) fn publish(&mut self, force: bool) {
        if let Some(feed) = &mut self.feed {
            feed.publish(&self.pipeline, force);
        }
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
            crate::metrics::checkpoint_failed();
            self.cadence.put_off();
            return Ok(false);
        }
        if let Some(at) = &self.lines {
            at.settle(&mut self.positions);
        }
        if let Some(g) = self.lessons.position() {
            self.positions.set_lessons(g);
        }
        if let Some(dir) = self.dir.as_mut() {
            let saved = dir
                .save_pipeline(&self.pipeline, &self.positions)
                .inspect_err(|_| crate::metrics::checkpoint_failed())?;
            crate::metrics::checkpoint_saved(saved.bytes, saved.duration);
            self.lessons.checkpointed()?;
            tracing::debug!(path = %saved.path.display(), bytes = saved.bytes, ms = saved.duration.as_millis() as u64, why, "checkpoint written");
        }
        self.cadence.done(self.pipeline.model().version());
        self.checkpoints += 1;
        part.commit(&self.positions, why);
        Ok(true)
    }

    /// Stops answering requests (the endpoint is stopped first) and keeps
    /// the messages they answered, for their late labels.
    pub(crate) fn stop_requests(&mut self) {
        self.absorb_requests();
        drop(self.feed.take());
        self.learn_told();
        self.lessons.close();
    }

    /// The last checkpoint, after the model's last publication, retried
    /// until `deadline` while the sink cannot deliver; then the run's
    /// report in the log.
    pub(crate) fn finish(&mut self, within: Duration, part: &mut impl Checkpointed) -> Result<(), DaemonError> {
        self.stop_requests();
        self.publish(true);
        let deadline = Instant::now() + within;
        while !self.checkpoint("shutdown", part)? {
            if Instant::now() >= deadline {
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
            checkpoints = self.checkpoints,
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
