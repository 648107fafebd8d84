//! What a process does with the one model (`classifyd run --role`): the
//! names of the roles, their parsing, and what each does with each kind
//! of message ([`Duties`], decided once when a pipeline is built).

/// What a process does with the one model (`classifyd run --role`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Learns and predicts (one process).
    #[default]
    Standalone,
    /// Learns from labeled messages and joined feedback; publishes no
    /// predictions (its replicas do). Unlabeled messages are only kept for
    /// the join.
    Learner,
    /// Predicts with a model it is given; learns nothing. Labeled messages
    /// and feedback are left to the learner.
    Predictor,
}

/// What a role does with each kind of message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Duties {
    /// Learns labels and forgets (else leaves them to the learner).
    pub(crate) learns: bool,
    /// Predicts unlabeled messages (else keeps them for their late labels:
    /// its replicas predict them).
    pub(crate) predicts: bool,
}

impl Role {
    /// What it does with each kind of message.
    pub(crate) fn duties(self) -> Duties {
        Duties {
            learns: self != Role::Predictor,
            predicts: self != Role::Learner,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Standalone => "standalone",
            Role::Learner => "learner",
            Role::Predictor => "predictor",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "standalone" => Ok(Role::Standalone),
            "learner" => Ok(Role::Learner),
            "predictor" => Ok(Role::Predictor),
            other => Err(format!("unknown role {other:?} (standalone, learner or predictor)")),
        }
    }
}
