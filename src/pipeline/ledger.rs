//! What is known of labels apart from the model: the record of recent
//! messages and of the label learned for each (the late-label cache:
//! what a late label joins, and what a relabel or a forget takes back),
//! who sent labels and how far each is believed, and the recent share of labels that contradicted a confident
//! prediction. One part the pipeline owns and a checkpoint holds whole;
//! how a label moves it lives beside the learning it goes with (labels,
//! corrections, weighing, reported).

use super::weighing::HOLD_BELOW;
use super::{FeedbackCache, Reporter, Reporters, TrustConfig};

/// At most one log line naming an unreliable reporter this often.
const WARN_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Label handling's state (see the module doc).
#[derive(Debug)]
pub struct Ledger {
    /// Recent messages by id, and what was learned of each.
    pub(crate) cache: FeedbackCache,
    /// The recent share of labels that contradicted a confident
    /// prediction (with `--contradiction-margin`).
    pub(crate) contradictions: f32,
    /// Who sent labels, and how far they are believed.
    pub(crate) reporters: Reporters,
    /// When a reporter was last logged as unreliable, and how many were
    /// not logged since (not checkpointed: a log throttle).
    pub(super) warned: Option<(std::time::Instant, u64)>,
}

impl Ledger {
    /// An empty ledger for `trust`'s bounds.
    pub fn new(trust: &TrustConfig) -> Self {
        Ledger::from_parts(FeedbackCache::default(), 0.0, Reporters::new(trust.max_reporters))
    }

    /// Rebuilds a ledger from checkpointed parts.
    pub(crate) fn from_parts(cache: FeedbackCache, contradictions: f32, reporters: Reporters) -> Self {
        Ledger {
            cache,
            contradictions,
            reporters,
            warned: None,
        }
    }

    pub fn cache(&self) -> &FeedbackCache {
        &self.cache
    }
    pub fn reporters(&self) -> &Reporters {
        &self.reporters
    }
    /// The recent share of labels that contradicted a confident prediction.
    pub fn contradiction_share(&self) -> f32 {
        self.contradictions
    }

    /// Whether `by` may replace or forget a label that `of` gave
    /// (docs/feedback.md): a trusted reporter any label; anyone whose
    /// labels are not held ([`HOLD_BELOW`]) an untrusted one.
    pub(super) fn may_override(&self, trust: &TrustConfig, of: &str, by: &str) -> bool {
        if trust.trusts(by) {
            return true;
        }
        !trust.trusts(of) && self.reporters.standing(by) >= HOLD_BELOW
    }

    /// Logs that `name`'s trust fell under [`super::trust::UNRELIABLE_BELOW`], at
    /// most once every [`WARN_EVERY`] (the ones left out are counted in
    /// the next line).
    pub(super) fn warn_unreliable(&mut self, name: &str) {
        let now = std::time::Instant::now();
        if self.warned.is_some_and(|(at, _)| now.duration_since(at) < WARN_EVERY) {
            if let Some((_, quiet)) = &mut self.warned {
                *quiet += 1;
            }
            return;
        }
        let quiet = self.warned.map_or(0, |(_, q)| q);
        self.warned = Some((now, 0));
        let everyone = self.contradictions;
        let share = self.reporters.get(name).map_or(0.0, Reporter::share);
        tracing::warn!(
            reporter = name,
            contradiction_share = share,
            everyone_share = everyone,
            others_since_last_line = quiet,
            "reporter judged unreliable: its labels contradict confident predictions far more often than \
             everyone's; they are held until another reporter confirms them"
        );
    }
}
