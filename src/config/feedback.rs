//! Flags of how far labels are believed (docs/feedback.md): the margin
//! that makes a prediction confident, the reporters kept and those
//! trusted outright. Shared by `run` and `eval`.

use clap::Args;

use crate::pipeline::TrustConfig;

#[derive(Debug, Clone, Args)]
pub struct FeedbackArgs {
    /// A prediction is confident when its raw-score margin is over this. A
    /// label contradicting a confident prediction counts against its
    /// reporter, and while such labels are common it is learned with
    /// weight (this / margin)^2. 0: every label learned in full.
    #[arg(long, env = "CLASSIFYD_CONTRADICTION_MARGIN", default_value_t = crate::pipeline::DEFAULT_CONTRADICTION_MARGIN, hide = true)]
    pub contradiction_margin: f32,
    /// Most reporters whose record is kept (the least recently heard from
    /// go first).
    #[arg(long, env = "CLASSIFYD_MAX_REPORTERS", default_value_t = crate::pipeline::DEFAULT_MAX_REPORTERS,
          value_parser = super::at_least_one_usize(), hide = true)]
    pub max_reporters: usize,
    /// A reporter whose labels are learned in full, unweighed (e.g. the
    /// people answering --review-topic). Repeatable, or comma-separated.
    #[arg(long, env = "CLASSIFYD_TRUSTED_REPORTER", value_delimiter = ',')]
    pub trusted_reporter: Vec<String>,
    /// Most reported messages remembered: a label from a reporter in good
    /// standing that the model got wrong is remembered by the message's
    /// fingerprint, and its exact copies take that label (0: none).
    #[arg(long, env = "CLASSIFYD_REPORTED_MESSAGES", default_value_t = crate::pipeline::DEFAULT_REPORTED, hide = true)]
    pub reported_messages: usize,
    /// Let a lesson from an endpoint (spamd, rspamd, the console) add a
    /// class the model does not know. Off: such a lesson is refused with
    /// the model's classes, so a typo ("Spam", "spma") cannot make a
    /// binary filter multi-class. Labels on the stream always may.
    #[arg(long, env = "CLASSIFYD_LESSONS_ADD_CLASSES", default_value_t = false, hide = true)]
    pub lessons_add_classes: bool,
}

impl FeedbackArgs {
    pub fn trust(&self) -> TrustConfig {
        TrustConfig {
            margin: self.contradiction_margin.max(0.0),
            max_reporters: self.max_reporters,
            trusted: self.trusted_reporter.clone(),
            reported: self.reported_messages,
            lessons_add_classes: self.lessons_add_classes,
        }
    }
}
