//! `classifyd learn`: mail folders (Maildir, mbox, folders of messages)
//! with one label, learned into a checkpoint, as `sa-learn` and
//! bogofilter do. Each message goes through the same pipeline as a Kafka
//! e-mail record; the checkpoint directory is the daemon's (its lock
//! keeps a running daemon and a bulk learn apart).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::{CommandError, eval::progress_bar};
use crate::checkpoint::{CheckpointDir, Resumed, load_or_new};
use crate::config::LearnArgs;
use crate::mailbox::{self, Item};
use crate::message;
use crate::pipeline::{Daemon, EmailRecord, Entry, Outcome, Pipeline, Raw};

/// What a bulk learn did.
#[derive(Debug, Default, Serialize)]
pub struct LearnSummary {
    pub messages: u64,
    pub learned: u64,
    /// Labeled messages whose label was held, not learned (the reporter's
    /// trust: docs/feedback.md).
    pub held: u64,
    /// Messages refused, by reason (not an e-mail, over the size cap, ...).
    pub bad: BTreeMap<String, u64>,
    pub model_version: u64,
    pub checkpoint: PathBuf,
}

impl LearnSummary {
    /// What was learned, as `classifyd learn` says it on stderr.
    pub fn render(&self, label: &str) -> String {
        let held = if self.held == 0 {
            String::new()
        } else {
            format!("; {} held (the reporter's trust: docs/feedback.md)", self.held)
        };
        let bad = if self.bad.is_empty() {
            String::new()
        } else {
            format!("; not learned: {:?}", self.bad)
        };
        format!(
            "learned {} of {} messages as {label:?} (model version {}), into {}{held}{bad}",
            self.learned,
            self.messages,
            self.model_version,
            self.checkpoint.display(),
        )
    }
}

pub fn learn(args: &LearnArgs) -> Result<LearnSummary, CommandError> {
    message::check_labels(std::slice::from_ref(&args.label))
        .map_err(|bad| CommandError::Usage(format!("--label: {}", bad.detail)))?;
    let (features, hyper) = args.model.settings()?;
    let cfg = crate::pipeline::PipelineConfig {
        limits: args.model.limits(&features)?,
        ..args.pipeline.settings()
    };
    let mut dir = CheckpointDir::open(&args.checkpoint_dir, args.keep_checkpoints)?;
    let Resumed {
        mut pipeline,
        positions,
        ..
    } = load_or_new(Some(&dir), &features, &hyper, cfg)?;
    let bar = progress_bar(mailbox::total_bytes(&args.paths));
    let mut summary = LearnSummary::default();
    let max = pipeline.config().max_message_bytes;
    for path in &args.paths {
        let mut each = |item: Item| {
            bar.inc(item_len(&item));
            learn_one(&mut pipeline, item, args, &mut summary);
        };
        mailbox::each_message(path, max, &mut each).map_err(super::io_at(path.display().to_string()))?;
    }
    bar.finish_and_clear();
    let saved = dir.save_pipeline(&pipeline, &positions)?;
    summary.model_version = pipeline.model().version();
    summary.checkpoint = saved.path;
    Ok(summary)
}

fn item_len(item: &Item) -> u64 {
    match item {
        Item::Message { bytes, .. } => bytes.len() as u64,
        Item::TooLarge { length, .. } => *length,
    }
}

/// Learns one message, counting what became of it.
fn learn_one(pipeline: &mut Pipeline, item: Item, args: &LearnArgs, summary: &mut LearnSummary) {
    summary.messages += 1;
    let (id, outcome) = match item {
        Item::TooLarge { id, length } => {
            let bad = pipeline.refuse(message::too_large(length, pipeline.config().max_message_bytes));
            (id, Outcome::Bad(bad))
        }
        Item::Message { id, bytes } => {
            let record = EmailRecord {
                id: Some(&id),
                label: Some(args.label.as_bytes()),
                reporter: args.reporter.as_deref().map(str::as_bytes),
                user: args.user.as_deref().map(str::as_bytes),
            };
            let entry = Entry::Raw(Raw::Email { raw: &bytes, record });
            let outcome = pipeline.handle_entry(entry, &|| id.clone(), crate::clock::now_ms(), &mut Daemon);
            (id, outcome)
        }
    };
    match outcome {
        Outcome::Learned { taught: true, .. } => summary.learned += 1,
        Outcome::Learned { taught: false, .. } => summary.held += 1,
        Outcome::Bad(bad) => {
            tracing::warn!(message = %id, reason = bad.reason.as_str(), error = %bad.detail, "not learned");
            *summary.bad.entry(bad.reason.as_str().to_string()).or_default() += 1;
        }
        _ => {}
    }
}
