//! The mail servers' protocols (docs/mail.md): SpamAssassin's spamd
//! protocol on `--spamd-addr`, so that spamc, spamass-milter, Exim's
//! `spam =` and amavis ask classifyd as they ask spamd. Checks are
//! answered from the copies of the model that HTTP requests read (the
//! [`Classify`] handle); a `TELL` is a labeled message (or a forget) handed
//! to the daemon's loop (the serving part's [`Told`]), which learns it through the pipeline's
//! feedback path as it would a record from the input, and answers whether
//! the model changed.
//!
//! - [`spamd`]: the protocol's heads and answers (pure).
//! - `server`: the listener, its bounds, and one request per connection.

use std::sync::Arc;
use std::time::Duration;

pub use crate::email::message_key;
use crate::pipeline::{Contribution, Prediction};
pub use crate::serving::Cidr;
use crate::serving::{Bounds, Endpoint, Handles, ServeError, Serving};

mod front;
pub mod rspamd;
mod rspamd_server;
pub mod spamd;
mod spamd_server;

pub use rspamd::{Actions, RspamdSettings};
pub use rspamd_server::RspamdServer;
pub use spamd_server::SpamdServer;

/// Default `--spamd-required-score`: SpamAssassin's own.
pub const DEFAULT_REQUIRED_SCORE: f32 = 5.0;
/// Default `--spamd-max-connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default `--mail-timeout-ms`: from a connection's first byte to its answer.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// Features a `REPORT` names.
pub const REPORT_FEATURES: usize = 10;

/// Where and how the mail protocols are served, and who may teach.
#[derive(Clone, Debug)]
pub struct MailSettings {
    /// The spamd protocol (`--spamd-addr`).
    pub spamd: Option<SpamdSettings>,
    /// rspamd's protocol (`--rspamd-addr`, `--rspamd-controller-addr`).
    pub rspamd: Option<RspamdSettings>,
    /// The model's classes that spam and ham name.
    pub spam_label: String,
    pub ham_label: String,
    /// Whether the user a request names (spamd's `User:`, rspamd's
    /// `Deliver-To`, `User` or first `Rcpt`) gets personal features
    /// (`--mail-personal`); either way it is who a lesson is from.
    pub personal: bool,
    /// Who may teach without a secret (`--learn-from`: spamd's `TELL`, and
    /// rspamd's controller when no password is set): loopback by default.
    pub learn_from: Vec<Cidr>,
    /// The secret rspamd's controller asks of every lesson
    /// (`--learn-password`, its `Password` header).
    pub password: Option<String>,
    /// The longest message read; longer ones are refused.
    pub max_message_bytes: usize,
    /// Connections open at once per endpoint, per address, and the time
    /// to send a request.
    pub bounds: Bounds,
    /// Checks classified at once; the others wait their turn.
    pub max_concurrent: usize,
    /// From a connection's first byte to its answer (the request's read
    /// bounded tighter by `bounds.read_timeout`).
    pub timeout: Duration,
}

/// The spamd endpoint.
#[derive(Clone, Debug)]
pub struct SpamdSettings {
    pub addr: String,
    /// The points at and over which a message is spam (`Spam: True ; p / required`).
    pub required: f32,
}

/// How far under its threshold a message that is not spam scores at
/// least: a tenth, the precision SpamAssassin's reports print, so that no
/// rounding of its score reads as the threshold.
pub const HAM_GAP: f32 = 0.1;

/// A score on a scale whose spam starts at `threshold`: the threshold
/// plus the spam class's margin, held on the verdict's side of it (a
/// spam at or over it, anything else at least [`HAM_GAP`] under), so that
/// a client comparing the score with the threshold reaches the verdict
/// the answer names, at every margin (0 and the smallest either side
/// included). Scores rank as the margins do, but for the margins within
/// the gap under 0 that the model calls not spam, which share a score.
pub fn score_on_side(threshold: f32, margin: f32, spam: bool) -> f32 {
    let score = threshold + margin;
    if spam {
        score.max(threshold)
    } else {
        score.min(threshold - HAM_GAP)
    }
}

/// How a prediction reads on SpamAssassin's scale: points are the
/// required score plus the spam class's margin (for the logistic models,
/// the log-odds of spam) on the verdict's side of it
/// ([`score_on_side`]), so a message is spam exactly when the model says
/// so, and the points rank messages as the margins do.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The message's id: its Message-ID, else a hash of its bytes.
    pub id: String,
    pub spam: bool,
    pub points: f32,
    pub required: f32,
    /// The spam class's margin (0 while the model knows no class).
    pub margin: f32,
    /// The predicted label.
    pub label: String,
    pub model_version: u64,
    /// The strongest features, for a report.
    pub features: Vec<Contribution>,
}

impl Checked {
    /// `p` on the scale of `required`, its spam class `spam_label`.
    pub fn of(p: &Prediction, spam_label: &str, required: f32) -> Checked {
        let margin = match p.margins.iter().find(|(c, _)| c == spam_label) {
            Some(&(_, m)) => m,
            // Before a spam is learned: the one other class's margin, against.
            None => p.margins.first().map_or(0.0, |&(_, m)| -m),
        };
        let margin = if margin.is_finite() { margin } else { 0.0 };
        let label = p.labels.first().cloned().unwrap_or_default();
        let spam = label == spam_label;
        Checked {
            id: p.id.clone(),
            spam,
            points: score_on_side(required, margin, spam),
            required,
            margin,
            label,
            model_version: p.model_version,
            features: p.explanation.clone().unwrap_or_default(),
        }
    }

    /// The verdict in words: the predicted label, or what an empty model
    /// says.
    pub fn verdict(&self) -> &str {
        if self.label.is_empty() {
            "not spam (nothing learned yet)"
        } else {
            &self.label
        }
    }

    /// The rule name a verdict fires.
    pub fn symbol(&self) -> &'static str {
        if self.spam { "CLASSIFYD_SPAM" } else { "CLASSIFYD_HAM" }
    }
}

/// The mail endpoints a daemon serves; dropped, they stop.
struct MailServers {
    _spamd: Option<SpamdServer>,
    _rspamd: Option<RspamdServer>,
}

/// The mail endpoints `self` asks for, answering checks with the copies
/// and sending lessons where the handles say (none on a predictor that
/// cannot forward them: refused).
impl Endpoint for MailSettings {
    fn teaches(&self) -> bool {
        true
    }

    fn serve(&self, handles: &Handles) -> Result<Serving, ServeError> {
        let front = || {
            Arc::new(front::Front::new(
                Arc::clone(&handles.copies),
                handles.lessons.clone(),
                self.max_concurrent,
                (self.spam_label.clone(), self.ham_label.clone(), self.personal),
                (self.learn_from.clone(), self.password.clone()),
            ))
        };
        let spamd = match &self.spamd {
            Some(d) => Some(SpamdServer::start(d, self, front())?),
            None => None,
        };
        let rspamd = match &self.rspamd {
            Some(r) => Some(RspamdServer::start(r, self, front())?),
            None => None,
        };
        Ok(Box::new(MailServers {
            _spamd: spamd,
            _rspamd: rspamd,
        }))
    }
}

#[cfg(test)]
mod tests;
