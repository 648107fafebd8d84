//! What the mail protocols' servers share: checking a raw message against
//! the served copies of the model (on the blocking pool, a bounded number
//! at once), handing a lesson to the daemon's loop and waiting for what it
//! did, and who may teach (an address allowed, or the learning secret).

use std::net::IpAddr;
use std::sync::Arc;

use tokio::sync::Semaphore;

use super::{Checked, Cidr};
use crate::message::{Bad, BadReason};
use crate::serving::{Classify, Tell, TellDone, Teller, Told, Untold, same_secret};

/// How a check was asked and answered.
pub(super) struct Asked {
    pub raw: Vec<u8>,
    pub user: Option<String>,
    /// Features to name (a report's).
    pub explain: usize,
}

/// Why a check or a lesson was not answered.
#[derive(Debug)]
pub(super) enum Unanswered {
    /// The message is bad input.
    Bad(Bad),
    /// Too many waiting, or the endpoint is stopping.
    Busy,
    /// This process does not learn (a predictor).
    NotLearner,
}

/// The model's side of a mail endpoint.
pub(super) struct Front {
    handle: Arc<dyn Classify>,
    told: Option<Teller>,
    /// Turns at the model (`max_concurrent`).
    turns: Semaphore,
    pub spam_label: String,
    pub ham_label: String,
    /// Whether a request's user gets personal features.
    personal: bool,
    /// Who may teach without a secret.
    learn_from: Vec<Cidr>,
    /// The secret that lets anyone teach (`--learn-password`).
    password: Option<String>,
}

impl Front {
    pub(super) fn new(
        handle: Arc<dyn Classify>,
        told: Option<Teller>,
        max_concurrent: usize,
        (spam_label, ham_label, personal): (String, String, bool),
        (learn_from, password): (Vec<Cidr>, Option<String>),
    ) -> Self {
        Front {
            handle,
            told,
            turns: Semaphore::new(max_concurrent.max(1)),
            spam_label,
            ham_label,
            personal,
            learn_from,
            password,
        }
    }

    /// `asked` predicted with the served copies, on the scale of `required`.
    pub(super) async fn check(&self, asked: Asked, required: f32) -> Result<(Checked, Vec<u8>), Unanswered> {
        let Ok(_turn) = self.turns.acquire().await else {
            return Err(Unanswered::Busy);
        };
        let handle = Arc::clone(&self.handle);
        let spam_label = self.spam_label.clone();
        let user = asked.user.filter(|_| self.personal);
        let done = tokio::task::spawn_blocking(move || {
            let id = super::message_key(&asked.raw);
            let email = crate::pipeline::Raw::email(&asked.raw, &id, user.as_deref());
            let checked = handle
                .classify(email, Some(asked.explain))
                .map(|p| Checked::of(&p, &spam_label, required));
            (checked, asked.raw)
        });
        match done.await {
            Ok((Ok(checked), raw)) => Ok((checked, raw)),
            Ok((Err(bad), _)) => Err(Unanswered::Bad(bad)),
            Err(_) => Err(Unanswered::Busy),
        }
    }

    /// Whether a client that can give a secret (rspamd's `Password`) may
    /// teach: with the secret when one is set (a wrong or missing one is
    /// refused from any address), else from an allowed address.
    pub(super) fn may_learn(&self, peer: IpAddr, given: Option<&[u8]>) -> bool {
        match &self.password {
            Some(p) => given.is_some_and(|g| same_secret(p.as_bytes(), g)),
            None => self.allowed(peer),
        }
    }

    /// Whether `peer` is an address allowed to teach (`--learn-from`): what
    /// decides for a protocol without a secret (spamd's `TELL`).
    pub(super) fn allowed(&self, peer: IpAddr) -> bool {
        self.learn_from.iter().any(|c| c.contains(peer))
    }

    /// Whether a secret is set.
    pub(super) fn has_password(&self) -> bool {
        self.password.is_some()
    }

    /// Hands `lesson` for `raw` (from `user`, also who it is for unless not
    /// personal) to the daemon's loop and waits
    /// for what it did; the model that answers checks has learned it by then.
    pub(super) async fn tell(&self, raw: Vec<u8>, lesson: Tell, user: Option<String>) -> Result<TellDone, Unanswered> {
        let Some(to) = &self.told else {
            return Err(Unanswered::NotLearner);
        };
        if raw.is_empty() {
            let empty = Bad::new(BadReason::MissingText, "an empty message teaches nothing");
            return Err(Unanswered::Bad(empty));
        }
        let (reply, answered) = tokio::sync::oneshot::channel();
        let told = Told {
            id: super::message_key(&raw),
            email: raw,
            text: None,
            lesson,
            user: user.clone().filter(|_| self.personal),
            reporter: user,
            reply,
        };
        match to.try_send(told) {
            Ok(()) => {}
            Err(Untold::Full) => return Err(Unanswered::Busy),
            Err(Untold::Gone) => return Err(Unanswered::NotLearner),
        }
        match answered.await {
            Ok(TellDone::NotLearner) | Err(_) => Err(Unanswered::NotLearner),
            Ok(done) => Ok(done),
        }
    }
}
