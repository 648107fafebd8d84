//! What the mail protocols teach, as the core takes it: the lessons
//! queued by the endpoints (`TELL`, `/learnspam`, `/learnham`, `/forget`),
//! made durable in the checkpoint directory's lessons log before they are
//! learned and answered (`checkpoint::lessons`), learned through the
//! pipeline as the feedback path learns a labeled message or a forget, and
//! the lessons a crash left in the log learned again at the start.
//!
//! A batch of lessons that arrived together is written with one sync and
//! answered together: a folder taught over many connections waits for one
//! disk sync a batch, not one a lesson.
//!
//! An instance that does not learn (a predictor) forwards them instead
//! ([`Forward`]: on Kafka, to the learner's input and feedback topics) and
//! answers once they are durable there.

use std::sync::mpsc::Receiver;

use crate::checkpoint::lessons::{LessonsLog, Recorded};
use crate::checkpoint::{CheckpointDir, Positions};
use crate::clock::now_ms;
use crate::pipeline::{Daemon, EmailRecord, Entry, Outcome, Pipeline, Raw};
use crate::serving::{Tell, TellDone, Told};

/// Where an instance that does not learn sends its lessons.
pub(crate) trait Forward: Send {
    /// Makes `lessons` durable where the learner will learn them; returns
    /// once they are (or why they are not).
    fn forward(&mut self, lessons: &[Recorded]) -> Result<(), String>;
}

/// The lessons' queue from the endpoints and their log, or where they are
/// forwarded.
#[derive(Default)]
pub(crate) struct Lessons {
    told: Option<Receiver<Told>>,
    log: Option<LessonsLog>,
    forward: Option<Box<dyn Forward>>,
}

/// A lesson learned, and who waits for its answer.
pub(crate) type Reply = (tokio::sync::oneshot::Sender<TellDone>, TellDone);

impl Lessons {
    /// Whether it takes the endpoints' lessons.
    pub(crate) fn listening(&self) -> bool {
        self.told.is_some()
    }

    /// Takes the endpoints' lessons from `told` from now on.
    pub(crate) fn listen(&mut self, told: Receiver<Told>) {
        self.told = Some(told);
    }

    /// Forwards the lessons to `to` rather than learning them.
    pub(crate) fn forward_to(&mut self, to: Box<dyn Forward>) {
        self.forward = Some(to);
    }

    /// Whether the lessons are forwarded.
    pub(crate) fn forwards(&self) -> bool {
        self.forward.is_some()
    }

    /// Stops taking lessons (the endpoints have stopped).
    pub(crate) fn close(&mut self) {
        self.told = None;
    }

    /// Opens `dir`'s lessons log after the checkpoint whose positions are
    /// `positions` and learns again, into `pipeline`, the lessons it holds
    /// that the checkpoint does not; returns how many.
    pub(crate) fn recover(
        &mut self,
        dir: &CheckpointDir,
        positions: &Positions,
        pipeline: &mut Pipeline,
    ) -> std::io::Result<usize> {
        let (log, replay) = LessonsLog::open(dir.path(), positions.lessons())?;
        for r in &replay {
            learn(pipeline, r);
        }
        if !replay.is_empty() {
            tracing::info!(
                lessons = replay.len(),
                "mail lessons after the checkpoint learned again from the lessons log"
            );
        }
        self.log = Some(log);
        Ok(replay.len())
    }

    /// Waits up to `within` for a lesson (`None` when none came, or
    /// there is no queue).
    pub(crate) fn wait(&self, within: std::time::Duration) -> Option<Told> {
        match &self.told {
            Some(from) => from.recv_timeout(within).ok(),
            None => {
                std::thread::sleep(within);
                None
            }
        }
    }

    /// The lessons waiting, `first` first.
    pub(crate) fn waiting(&self, first: Option<Told>) -> Vec<Told> {
        let rest = self.told.iter().flat_map(|from| from.try_iter());
        first.into_iter().chain(rest).collect()
    }

    /// Makes `batch` durable (one sync), then learns each into `pipeline`
    /// (`each` after every one): the answers to send once the model is
    /// published. When the log cannot take them, none is learned and each
    /// is answered so.
    pub(crate) fn learn(
        &mut self,
        batch: Vec<Told>,
        pipeline: &mut Pipeline,
        mut each: impl FnMut(&Pipeline, &Outcome),
    ) -> Vec<Reply> {
        let (batch, mut answers) = known_labels(batch, pipeline);
        if batch.is_empty() {
            return answers;
        }
        let (recorded, replies): (Vec<Recorded>, Vec<_>) = batch.into_iter().map(split).unzip();
        if let Some(to) = &mut self.forward {
            let done = match to.forward(&recorded) {
                Ok(()) => TellDone::Changed,
                Err(why) => {
                    tracing::error!(error = %why, lessons = replies.len(), "mail lessons could not be forwarded: refused");
                    crate::metrics::lessons_not_durable(replies.len());
                    TellDone::NotDurable(why)
                }
            };
            answers.extend(replies.into_iter().map(|reply| (reply, done.clone())));
            return answers;
        }
        if let Some(log) = &mut self.log
            && let Err(e) = log.append(&recorded)
        {
            tracing::error!(error = %e, lessons = replies.len(), "mail lessons could not be written to the lessons log: refused");
            crate::metrics::lessons_not_durable(replies.len());
            let why = format!("the lesson could not be made durable: {e}");
            answers.extend(
                replies
                    .into_iter()
                    .map(|reply| (reply, TellDone::NotDurable(why.clone()))),
            );
            return answers;
        }
        for (reply, r) in replies.into_iter().zip(&recorded) {
            let outcome = learn(pipeline, r);
            each(pipeline, &outcome);
            answers.push((reply, TellDone::of(&outcome)));
        }
        answers
    }

    /// The lessons position a checkpoint of the model as it stands
    /// records, when there is a log.
    pub(crate) fn position(&self) -> Option<u64> {
        self.log.as_ref().and_then(LessonsLog::position)
    }

    /// After a checkpoint that recorded [`Lessons::position`] was saved:
    /// the log moves past the lessons it holds.
    pub(crate) fn checkpointed(&mut self) {
        if let Some(log) = &mut self.log {
            log.rotate();
        }
    }
}

/// The lessons of `batch` whose label the model knows (or that may add a
/// class), and the answers to the others: refused before they are made
/// durable, so none of them is ever learned.
fn known_labels(batch: Vec<Told>, pipeline: &Pipeline) -> (Vec<Told>, Vec<Reply>) {
    let (trust, classes) = (&pipeline.config().trust, pipeline.model().labels().names());
    let mut refused = Vec::new();
    let known = batch
        .into_iter()
        .filter_map(|t| {
            let why = match &t.lesson {
                Tell::Learn(label) => trust.unknown_lesson_label(label, classes),
                Tell::Forget | Tell::ForgetReporter(_) => None,
            };
            match why {
                Some(why) => {
                    refused.push((t.reply, TellDone::UnknownLabel(why)));
                    None
                }
                None => Some(t),
            }
        })
        .collect();
    if !refused.is_empty() {
        crate::metrics::lessons_refused("unknown_label", refused.len());
    }
    (known, refused)
}

/// A lesson as the log keeps it (its e-mail moved, not copied), and who
/// waits for its answer.
fn split(t: Told) -> (Recorded, tokio::sync::oneshot::Sender<TellDone>) {
    let recorded = Recorded {
        id: t.id,
        learn: match &t.lesson {
            Tell::Learn(label) => Some(label.clone()),
            Tell::Forget | Tell::ForgetReporter(_) => None,
        },
        forget_reporter: match t.lesson {
            Tell::ForgetReporter(of) => Some(of),
            Tell::Learn(_) | Tell::Forget => None,
        },
        user: t.user,
        reporter: t.reporter,
        email: t.email,
        text: t.text,
    };
    (recorded, t.reply)
}

/// One lesson through the pipeline, from its reporter, for its user: its
/// e-mail or text learned as its label, a label for the message the record
/// knows by its id, or its id forgotten.
fn learn(pipeline: &mut Pipeline, r: &Recorded) -> Outcome {
    let now = now_ms();
    let default_id = || r.id.clone();
    let user = r.user.as_deref().map(str::as_bytes);
    let reporter = r.reporter.as_deref().map(str::as_bytes);
    if let (Some(label), false) = (&r.learn, r.email.is_empty()) {
        let record = EmailRecord {
            id: Some(&r.id),
            label: Some(label.as_bytes()),
            reporter,
            user,
        };
        let raw = Raw::Email { raw: &r.email, record };
        return pipeline.handle_entry(Entry::Raw(raw), &default_id, now, &mut Daemon);
    }
    let line = json_of(r).to_string();
    let raw = Raw::Json {
        raw: line.as_bytes(),
        reporter,
        user,
    };
    pipeline.handle_entry(Entry::Raw(raw), &default_id, now, &mut Daemon)
}

/// A lesson that is no e-mail as the input's JSON: a labeled text, a late
/// label for the id, a forget, or a reporter's forget.
pub(crate) fn json_of(r: &Recorded) -> serde_json::Value {
    match (&r.learn, &r.text, &r.forget_reporter) {
        (Some(label), Some(text), _) => serde_json::json!({"id": r.id, "text": text, "label": label}),
        (Some(label), None, _) => serde_json::json!({"id": r.id, "label": label}),
        (None, _, Some(of)) => serde_json::json!({"forget_reporter": of}),
        (None, _, None) => serde_json::json!({"id": r.id, "forget": true}),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::checkpoint::model_digest;
    use crate::pipeline::PipelineConfig;

    /// A pipeline of the daemon's default model (its stack of members),
    /// over 2^14 buckets.
    fn default_pipeline() -> Pipeline {
        #[derive(clap::Parser)]
        struct Flags {
            #[command(flatten)]
            model: crate::config::ModelArgs,
        }
        let flags = <Flags as clap::Parser>::parse_from(["t", "--bits", "14"]);
        let (features, hyper) = flags.model.settings().expect("the default settings");
        Pipeline::new(crate::model::Model::new(hyper, features), PipelineConfig::default())
    }

    const TEXTS: [&str; 6] = [
        "win a free prize now, call 0800 today",
        "are we still on for lunch tomorrow?",
        "urgent: your account needs verification, click here",
        "thanks for the notes from the meeting",
        "cheap meds without prescription, order now",
        "the kids loved the park this weekend",
    ];

    /// A lesson: message `id`'s text taught as `label`, or its id forgotten.
    fn lesson(id: usize, label: Option<&str>) -> (Told, tokio::sync::oneshot::Receiver<TellDone>) {
        let (reply, answered) = tokio::sync::oneshot::channel();
        let told = Told {
            id: format!("m-{id}"),
            email: Vec::new(),
            text: label.map(|_| TEXTS[id % TEXTS.len()].to_string()),
            lesson: label.map_or(Tell::Forget, |l| Tell::Learn(l.to_string())),
            user: None,
            reporter: Some(format!("r-{}", id % 3)),
            reply,
        };
        (told, answered)
    }

    /// `script`'s lessons (id, label or forget) learned in the batches
    /// `cuts` makes (each cut ends a batch), through a lessons log: the
    /// model's digest and the answers.
    fn learned(script: &[(usize, Option<&'static str>)], cuts: &[bool]) -> (u64, Vec<TellDone>) {
        let dir = tempfile::tempdir().unwrap();
        let mut pipeline = default_pipeline();
        // The model knows both classes before any lesson: a lesson may not
        // add one (--lessons-add-classes off).
        for (i, label) in ["spam", "ham"].into_iter().enumerate() {
            let line = serde_json::json!({"id": format!("seed-{i}"), "text": TEXTS[i], "label": label});
            pipeline.handle(line.to_string().as_bytes(), &|| format!("seed-{i}"), 0);
        }
        let mut lessons = Lessons::default();
        let (dir_, positions) = (CheckpointDir::open(dir.path(), 3).unwrap(), Positions::default());
        lessons.recover(&dir_, &positions, &mut pipeline).unwrap();
        let (mut batch, mut waiting, mut answers) = (Vec::new(), Vec::new(), Vec::new());
        for (k, &(id, label)) in script.iter().enumerate() {
            let (told, answered) = lesson(id, label);
            batch.push(told);
            waiting.push(answered);
            if cuts.get(k).copied().unwrap_or(true) || k + 1 == script.len() {
                let done = lessons.learn(std::mem::take(&mut batch), &mut pipeline, |_, _| {});
                answers.extend(done.into_iter().map(|(_, d)| d));
            }
        }
        (model_digest(pipeline.model()), answers)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The same lessons in the same order give the same model (and the
        /// same answers) whether they arrive one at a time, all together,
        /// or in any batches (issue 70 item 9): a batch shares one sync of
        /// the log, never a different learning.
        #[test]
        fn one_by_one_or_in_batches_the_same_model(
            script in proptest::collection::vec(
                (0usize..8, prop_oneof![Just(Some("spam")), Just(Some("ham")), Just(None)]),
                1..40,
            ),
            cuts in proptest::collection::vec(any::<bool>(), 40),
        ) {
            let one_by_one = learned(&script, &[true; 40]);
            let together = learned(&script, &[false; 40]);
            let batched = learned(&script, &cuts);
            prop_assert_eq!(&one_by_one, &together);
            prop_assert_eq!(&one_by_one, &batched);
            // The lessons were learned, not refused.
            let learns = script.iter().any(|(_, l)| l.is_some());
            prop_assert_eq!(one_by_one.1.contains(&TellDone::Changed), learns);
        }
    }
}
