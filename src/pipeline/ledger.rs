//! What is known of labels apart from the model: the record of recent
//! messages and of the label learned for each (the late-label cache:
//! what a late label joins, and what a relabel or a forget takes back),
//! who sent labels and how far each is believed, and the recent share of labels that contradicted a confident
//! prediction. One part the pipeline owns and a checkpoint holds whole;
//! how a label moves it lives beside the learning it goes with (labels,
//! corrections, weighing, reported).

use super::weighing::HOLD_BELOW;
use super::{CacheEntry, FeedbackCache, PipelineConfig, Reporter, Reporters, TrustConfig};

/// The recent share of confident contradictions is a moving average over
/// about 1 / this many labels.
const CONTRADICTION_ALPHA: f32 = 0.02;

/// At most one log line naming an unreliable reporter this often.
const WARN_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Label handling's state (see the module doc).
#[derive(Debug)]
pub struct Ledger {
    /// Recent messages by id, and what was learned of each.
    cache: FeedbackCache,
    /// The recent share of labels that contradicted a confident
    /// prediction (with `--contradiction-margin`).
    contradictions: f32,
    /// Who sent labels, and how far they are believed.
    reporters: Reporters,
    /// When a reporter was last logged as unreliable, and how many were
    /// not logged since (not checkpointed: a log throttle).
    warned: Option<(std::time::Instant, u64)>,
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

    /// The record of message `id`, if it is kept.
    pub(super) fn get(&self, id: &str) -> Option<&CacheEntry> {
        self.cache.get(id)
    }

    /// The record of message `id`, to change (a label held on it).
    pub(super) fn get_mut(&mut self, id: &str) -> Option<&mut CacheEntry> {
        self.cache.get_mut(id)
    }

    /// Keeps `entry` as the record of message `id` (replacing any), within
    /// `cfg`'s bounds.
    pub(super) fn keep(&mut self, id: String, entry: CacheEntry, cfg: &PipelineConfig) {
        self.cache.insert(id, entry, cfg);
    }

    /// The ids whose label (learned or held) reporter `of` gave, oldest
    /// first.
    pub(super) fn ids_of(&self, of: &str) -> Vec<String> {
        let gave = |e: &CacheEntry| {
            e.taught.as_ref().is_some_and(|t| t.reporter == of) || e.held.as_ref().is_some_and(|h| h.reporter == of)
        };
        (self.cache.entries().into_iter())
            .filter(|(_, e)| gave(e))
            .map(|(id, _)| id.to_string())
            .collect()
    }

    /// Message `id`'s label taken back: the record keeps the message as
    /// if never labeled, and as if nothing was published for it (its
    /// prediction was scored by the label forgotten).
    pub(super) fn forgotten(&mut self, id: &str) {
        self.cache.teach(id, None);
        if let Some(e) = self.cache.get_mut(id) {
            e.predicted = None;
            e.score = None;
        }
    }

    /// Records what message `id` was taught (see [`FeedbackCache::teach`]);
    /// whether it is kept.
    pub(super) fn teach(&mut self, id: &str, taught: Option<Box<super::Taught>>) -> bool {
        self.cache.teach(id, taught)
    }

    /// Drops the records older than `ttl_ms` at `now_ms`.
    pub(super) fn expire(&mut self, now_ms: u64, ttl_ms: u64) {
        self.cache.expire(now_ms, ttl_ms);
    }

    /// Counts a label that `name` gave, which contradicted a confident
    /// prediction or not, in the reporter's standing and (unless the label
    /// is then held: [`Ledger::note_contradiction`] is the caller's) in
    /// the share of everyone's; returns the reporter's trust, and whether
    /// it just crossed into unreliable (logged here).
    pub(super) fn observe_reporter(&mut self, name: &str, contradicted: bool) -> f32 {
        let (trust, crossed) = self.reporters.observe(name, contradicted, self.contradictions);
        if crossed {
            self.warn_unreliable(name);
        }
        trust
    }

    /// Counts a label in the recent share of labels that contradicted a
    /// confident prediction.
    pub(super) fn note_contradiction(&mut self, contradicted: bool) {
        self.contradictions += CONTRADICTION_ALPHA * (f32::from(u8::from(contradicted)) - self.contradictions);
    }

    /// Sets the share (a test's shortcut to a stream's history).
    #[cfg(test)]
    pub(super) fn set_contradiction_share(&mut self, share: f32) {
        self.contradictions = share;
    }

    /// Counts a label of `name`'s held (not learned).
    pub(super) fn count_held(&mut self, name: &str) {
        self.reporters.count_held(name);
    }

    /// Counts a label of `name`'s replaced or forgotten by another reporter.
    pub(super) fn count_overridden(&mut self, name: &str) {
        self.reporters.count_overridden(name);
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
    fn warn_unreliable(&mut self, name: &str) {
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
