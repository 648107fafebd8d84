//! The flags of the web console (`--console-addr` and what it keeps).

use clap::Args;

use super::at_least_one_usize;
use super::mail::MailArgs;
use crate::console::{ConsoleSettings, DEFAULT_HISTORY, Reviewers};
use crate::serving::{Bounds, Cidr};

#[derive(Debug, Clone, Args)]
pub struct ConsoleArgs {
    /// The web console (status, history, review, scan and teach, model),
    /// e.g. 127.0.0.1:8081. Off by default. Reading it asks for
    /// --console-password (or, without one, a loopback client); teaching
    /// asks for --learn-password (or, without one, an address of
    /// --learn-from).
    #[arg(long, env = "CLASSIFYD_CONSOLE_ADDR")]
    pub console_addr: Option<String>,
    /// The secret that lets a console client read (sent as
    /// `Authorization: Bearer`); without it, only loopback clients read.
    #[arg(long, env = "CLASSIFYD_CONSOLE_PASSWORD", hide_env_values = true, hide = true)]
    pub console_password: Option<String>,
    /// Predictions the console's history keeps in memory (the oldest go
    /// first); 0 keeps none.
    #[arg(long, env = "CLASSIFYD_CONSOLE_HISTORY", default_value_t = DEFAULT_HISTORY, hide = true)]
    pub console_history: usize,
    /// Whether the history keeps each message's start (its first 4 KiB),
    /// or, false, only its subject or first line.
    #[arg(long, env = "CLASSIFYD_CONSOLE_KEEP_TEXT", default_value_t = true, action = clap::ArgAction::Set, hide = true)]
    pub console_keep_text: bool,
    /// Largest body a console request carries (a scanned message).
    #[arg(long, env = "CLASSIFYD_CONSOLE_MAX_BODY_BYTES", default_value_t = crate::console::MAX_BODY_BYTES,
          value_parser = at_least_one_usize(), hide = true)]
    pub console_max_body_bytes: usize,
    /// Named reviewers: a file of `name role secret` lines (role: read or
    /// teach); a reviewer's lessons carry its name as reporter.
    #[arg(long, env = "CLASSIFYD_CONSOLE_USERS", value_name = "FILE", hide = true)]
    pub console_users: Option<std::path::PathBuf>,
    /// Proxies (address blocks, comma-separated) whose X-Forwarded-For
    /// names the console's client, for its slow-down and --learn-from.
    #[arg(long, env = "CLASSIFYD_TRUSTED_PROXY", value_name = "CIDR", value_parser = Cidr::parse,
          value_delimiter = ',', hide = true)]
    pub trusted_proxy: Vec<Cidr>,
}

impl ConsoleArgs {
    /// Refuses settings that cannot work: an empty secret.
    pub fn check(&self) -> Result<(), String> {
        if self.console_password.as_deref().is_some_and(str::is_empty) {
            return Err("--console-password is empty: give a secret, or leave it out for loopback reading".into());
        }
        Ok(())
    }

    /// The console's settings, if it is on; who may teach is the mail
    /// flags' (`--learn-password`, `--learn-from`).
    pub fn settings(&self, mail: &MailArgs, door: Bounds) -> Result<Option<ConsoleSettings>, String> {
        let Some(addr) = self.console_addr.as_ref() else {
            return Ok(None);
        };
        let users = match &self.console_users {
            Some(path) => Reviewers::load(path)?,
            None => Reviewers::default(),
        };
        Ok(Some(ConsoleSettings {
            addr: addr.clone(),
            read_password: self.console_password.clone(),
            write_password: mail.learn_password.clone(),
            learn_from: mail.learn_from.clone(),
            history: self.console_history,
            keep_text: self.console_keep_text,
            max_message_bytes: self.console_max_body_bytes,
            bounds: Bounds {
                connections: crate::console::MAX_CONNECTIONS,
                ..door
            },
            users,
            trusted_proxy: self.trusted_proxy.clone(),
        }))
    }
}
