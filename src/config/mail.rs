//! The flags of the mail servers' protocols (`--spamd-addr`,
//! `--rspamd-addr`, `--rspamd-controller-addr`), their scales, and who
//! may teach (`--learn-from`, `--learn-password`).

use std::time::Duration;

use clap::Args;

use super::{at_least_one, at_least_one_usize};
use crate::mail::rspamd::{DEFAULT_ADD_HEADER, DEFAULT_REJECT};
use crate::mail::{
    Actions, Cidr, DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUIRED_SCORE, DEFAULT_TIMEOUT_MS, MailSettings, RspamdSettings,
    SpamdSettings,
};
use crate::serving::Bounds;

#[derive(Debug, Clone, Args)]
pub struct MailArgs {
    /// SpamAssassin's spamd protocol (spamc, spamass-milter, Exim's
    /// `spam =`), e.g. 127.0.0.1:783. Off by default (docs/mail.md).
    #[arg(long, env = "CLASSIFYD_SPAMD_ADDR")]
    pub spamd_addr: Option<String>,
    /// Points at and over which spamd says spam: a message's points are
    /// this plus its spam margin (the log-odds for the logistic models).
    #[arg(long, env = "CLASSIFYD_SPAMD_REQUIRED_SCORE", default_value_t = DEFAULT_REQUIRED_SCORE,
          value_parser = finite, hide = true)]
    pub spamd_required_score: f32,
    /// rspamd's normal worker (POST /checkv2: rspamc, rspamd's proxy as
    /// its upstream or mirror), e.g. 127.0.0.1:11333. Off by default.
    #[arg(long, env = "CLASSIFYD_RSPAMD_ADDR")]
    pub rspamd_addr: Option<String>,
    /// rspamd's controller (POST /learnspam, /learnham, /forget), e.g.
    /// 127.0.0.1:11334. Off by default.
    #[arg(long, env = "CLASSIFYD_RSPAMD_CONTROLLER_ADDR", hide = true)]
    pub rspamd_controller_addr: Option<String>,
    /// The score at which rspamd's answer says "add header": a message's
    /// score is this plus its spam margin, so the model's spam gets it.
    #[arg(long, env = "CLASSIFYD_RSPAMD_ADD_HEADER_SCORE", default_value_t = DEFAULT_ADD_HEADER,
          value_parser = finite, hide = true)]
    pub rspamd_add_header_score: f32,
    /// The score at which the action is "reject" (also `required_score`).
    #[arg(long, env = "CLASSIFYD_RSPAMD_REJECT_SCORE", default_value_t = DEFAULT_REJECT,
          value_parser = finite, hide = true)]
    pub rspamd_reject_score: f32,
    /// "soft reject" from this score (none by default).
    #[arg(long, env = "CLASSIFYD_RSPAMD_SOFT_REJECT_SCORE", value_parser = finite, hide = true)]
    pub rspamd_soft_reject_score: Option<f32>,
    /// "rewrite subject" from this score (none by default).
    #[arg(long, env = "CLASSIFYD_RSPAMD_REWRITE_SUBJECT_SCORE", value_parser = finite, hide = true)]
    pub rspamd_rewrite_subject_score: Option<f32>,
    /// "greylist" from this score (none by default).
    #[arg(long, env = "CLASSIFYD_RSPAMD_GREYLIST_SCORE", value_parser = finite, hide = true)]
    pub rspamd_greylist_score: Option<f32>,
    /// A secret that rspamd's controller asks of every lesson (its Password
    /// header) and POST /v1/classify of every request (a bearer token).
    #[arg(long, env = "CLASSIFYD_LEARN_PASSWORD", hide_env_values = true)]
    pub learn_password: Option<String>,
    /// Addresses (or address/bits blocks, comma-separated) allowed to TELL
    /// spamd, and to teach rspamd's controller when no --learn-password is
    /// set: loopback by default.
    #[arg(long, env = "CLASSIFYD_LEARN_FROM", default_value = "127.0.0.0/8,::1/128",
          value_delimiter = ',', value_parser = cidr, hide = true)]
    pub learn_from: Vec<Cidr>,
    /// Connections open at once per mail endpoint; past it a new one is closed.
    #[arg(long, env = "CLASSIFYD_MAIL_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS,
          value_parser = at_least_one_usize(), hide = true)]
    pub mail_max_connections: usize,
    /// Milliseconds from a mail request's first byte to its answer.
    #[arg(long, env = "CLASSIFYD_MAIL_TIMEOUT_MS", default_value_t = DEFAULT_TIMEOUT_MS,
          value_parser = at_least_one(), hide = true)]
    pub mail_timeout_ms: u64,
    /// Whether the user a mail request names (spamd's User:, rspamd's
    /// Deliver-To, User or first Rcpt) gets personal features; false: the
    /// shared model alone (it still names who a lesson is from).
    #[arg(long, env = "CLASSIFYD_MAIL_PERSONAL", default_value_t = true, action = clap::ArgAction::Set, hide = true)]
    pub mail_personal: bool,
    /// The model's classes that spam and ham name (spamd's Message-class,
    /// rspamd's /learnspam and /learnham).
    #[arg(long, env = "CLASSIFYD_MAIL_SPAM_LABEL", default_value = "spam", hide = true)]
    pub mail_spam_label: String,
    #[arg(long, env = "CLASSIFYD_MAIL_HAM_LABEL", default_value = "ham", hide = true)]
    pub mail_ham_label: String,
}

impl MailArgs {
    /// The rules between these flags.
    pub fn check(&self) -> Result<(), String> {
        let a = self.actions();
        let ladder = [
            ("--rspamd-greylist-score", a.greylist),
            ("--rspamd-add-header-score", Some(a.add_header)),
            ("--rspamd-rewrite-subject-score", a.rewrite_subject),
            ("--rspamd-soft-reject-score", a.soft_reject),
            ("--rspamd-reject-score", Some(a.reject)),
        ];
        let set: Vec<(&str, f32)> = ladder.iter().filter_map(|&(n, v)| Some((n, v?))).collect();
        if let Some(w) = set.windows(2).find(|w| w[0].1 > w[1].1) {
            return Err(format!(
                "{} ({}) is over {} ({}): rspamd's actions go greylist <= add header <= rewrite subject <= soft reject <= reject",
                w[0].0, w[0].1, w[1].0, w[1].1
            ));
        }
        if self.rspamd_controller_addr.is_some() && self.rspamd_addr.is_none() && self.spamd_addr.is_none() {
            tracing::info!("--rspamd-controller-addr without --rspamd-addr: learning only, checks go elsewhere");
        }
        if self.learn_password.as_deref().is_some_and(str::is_empty) {
            return Err("--learn-password is empty: give a secret, or leave the flag out".into());
        }
        Ok(())
    }

    fn actions(&self) -> Actions {
        Actions {
            reject: self.rspamd_reject_score,
            soft_reject: self.rspamd_soft_reject_score,
            rewrite_subject: self.rspamd_rewrite_subject_score,
            add_header: self.rspamd_add_header_score,
            greylist: self.rspamd_greylist_score,
        }
    }

    /// The mail endpoints' settings, if any is on (a client bounded as
    /// `door` says, the connections by --mail-max-connections); messages up to
    /// `max_message_bytes` (`--max-message-bytes`), checked `max_concurrent`
    /// at once (`--http-max-concurrent`: the same copies of the model).
    pub fn settings(&self, max_message_bytes: usize, max_concurrent: usize, door: Bounds) -> Option<MailSettings> {
        let spamd = self.spamd_addr.as_ref().map(|addr| SpamdSettings {
            addr: addr.clone(),
            required: self.spamd_required_score,
        });
        let rspamd = (self.rspamd_addr.is_some() || self.rspamd_controller_addr.is_some()).then(|| RspamdSettings {
            addr: self.rspamd_addr.clone(),
            controller_addr: self.rspamd_controller_addr.clone(),
            actions: self.actions(),
        });
        if spamd.is_none() && rspamd.is_none() {
            return None;
        }
        Some(MailSettings {
            spamd,
            rspamd,
            spam_label: self.mail_spam_label.clone(),
            ham_label: self.mail_ham_label.clone(),
            personal: self.mail_personal,
            learn_from: self.learn_from.clone(),
            password: self.learn_password.clone(),
            max_message_bytes,
            bounds: Bounds {
                connections: self.mail_max_connections,
                ..door
            },
            max_concurrent,
            timeout: Duration::from_millis(self.mail_timeout_ms),
        })
    }
}

fn finite(s: &str) -> Result<f32, String> {
    s.parse::<f32>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("{s:?} is not a finite number"))
}

fn cidr(s: &str) -> Result<Cidr, String> {
    Cidr::parse(s)
}
