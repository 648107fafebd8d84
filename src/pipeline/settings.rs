//! The pipeline's settings: bounds of its input and caches, its metrics
//! window, its role, and what its predictions carry (explanations, the
//! uncertainty review).

use super::{ReviewConfig, Role};
use crate::features::SparseVec;
use crate::message;
use crate::model::member::{ADDED, REGISTRY};

/// Settings of the pipeline around the model.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineConfig {
    pub max_message_bytes: usize,
    /// Length of the sliding metric window.
    pub window: usize,
    /// Positive class for ROC of binary tasks (default: "spam", else the second label seen).
    pub positive_label: Option<String>,
    /// Most messages kept for joining late labels.
    pub cache_entries: usize,
    /// Most text bytes kept for joining late labels.
    pub cache_bytes: usize,
    /// How long a message waits for its late label, in milliseconds.
    pub cache_ttl_ms: u64,
    /// Keep the model's feature-name sketch (what `inspect` shows) up to
    /// date. `eval` turns it off: it keeps no model, and the sampled
    /// documents would be featurized twice and their names allocated.
    pub name_features: bool,
    /// What this process does with the model.
    pub role: Role,
    /// Features explained in each prediction (`--explain`; 0: none).
    pub explain: usize,
    /// The model's memory and class bounds (`--model-memory`, `--max-classes`).
    pub limits: crate::model::Limits,
    /// The uncertainty review of predictions (band, budget, query).
    pub review: ReviewConfig,
    /// Whether the transport sends the messages the review asks for
    /// somewhere (`--review-topic`, `--review`).
    pub review_output: bool,
    /// How far labels are believed: the confident margin, the reporters.
    pub trust: super::TrustConfig,
    /// What of a raw e-mail the document holds (`--email-views`).
    pub email_views: crate::email::Views,
    /// Which messages make a learning model add each of the stack's
    /// added members (`--byte-lr`, ...: one flag a member).
    pub members: AddedWhen,
}

/// `--byte-lr`, ...: when a learning model adds a member of its stack
/// that reads the bytes of a document's head (`model::member`). Once
/// added it stays (checkpointed, published) and reads every message's
/// head.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MemberWhen {
    /// At the first raw e-mail (`"email"`, `"email_base64"`, `--input-format
    /// email`): it ranks raw e-mail and long texts better, short ones (SMS)
    /// worse (docs/accuracy.md).
    #[default]
    Email,
    /// From the first message, whatever its kind.
    Always,
    /// Never.
    Off,
}

impl MemberWhen {
    /// Whether a message (an e-mail when `email`) calls for the member.
    pub fn wants(self, email: bool) -> bool {
        match self {
            MemberWhen::Email => email,
            MemberWhen::Always => true,
            MemberWhen::Off => false,
        }
    }
}

/// When a learning model adds each added member of its stack, by the
/// registry's index (`model::member::REGISTRY`): at the first raw e-mail
/// for those that say so, else never, unless set.
#[derive(Clone, Debug, PartialEq)]
pub struct AddedWhen([MemberWhen; ADDED]);

impl Default for AddedWhen {
    fn default() -> Self {
        AddedWhen(std::array::from_fn(|i| match REGISTRY[i].on_email {
            true => MemberWhen::Email,
            false => MemberWhen::Off,
        }))
    }
}

impl AddedWhen {
    /// Every member at `when`.
    pub fn all(when: MemberWhen) -> Self {
        AddedWhen([when; ADDED])
    }

    /// The member named `name` at `when` (a name the registry lacks:
    /// nothing).
    pub fn with(mut self, name: &str, when: MemberWhen) -> Self {
        if let Some(i) = crate::model::member::index_of(name) {
            self.0[i] = when;
        }
        self
    }

    /// When member `i` of the registry is added.
    pub fn when(&self, i: usize) -> MemberWhen {
        self.0.get(i).copied().unwrap_or(MemberWhen::Off)
    }
}

impl PipelineConfig {
    /// How its messages are read.
    pub fn reading(&self) -> message::Reading {
        message::Reading {
            max_bytes: self.max_message_bytes,
            email_views: self.email_views,
        }
    }
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            max_message_bytes: message::DEFAULT_MAX_MESSAGE_BYTES,
            window: crate::eval::DEFAULT_WINDOW,
            positive_label: None,
            cache_entries: 100_000,
            cache_bytes: 64 << 20,
            cache_ttl_ms: 24 * 3600 * 1000,
            role: Role::Standalone,
            name_features: true,
            explain: 0,
            limits: crate::model::Limits::default(),
            review: ReviewConfig::default(),
            review_output: false,
            trust: super::TrustConfig::default(),
            email_views: crate::email::Views::default(),
            members: AddedWhen::default(),
        }
    }
}

/// An example held back by a [`super::Driver`] (`eval`'s): its raw
/// features, its gold labels, and the key of the user it is for (its
/// personal features are added when it is finished again).
#[derive(Clone, Debug, Default)]
pub struct HeldExample {
    pub raw: SparseVec,
    pub gold: Vec<String>,
    pub user: Option<u64>,
}
