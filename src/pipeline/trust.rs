//! Who gave a label and how far to believe them: a bounded table of
//! reporters, each with a decayed record of how often its labels
//! contradicted a confident prediction, and the trust that record earns.
//!
//! A reporter is judged against everyone: its share of confident
//! contradictions is compared with the share over all recent labels (the
//! pipeline's moving average). Under clean feedback both are small; under
//! random noise every reporter's share rises with the average, so honest
//! reporters keep their trust; a change of the stream raises every share
//! too. Only a reporter contradicting the model far more often than the
//! others (a flooder of flipped labels) loses it. Everything here depends
//! only on the labels in stream order, so a resumed run weighs them as the
//! uninterrupted one did.

use hashlink::LinkedHashMap;

/// The raw-score margin over which a prediction is confident (`--contradiction-margin`).
pub const DEFAULT_CONTRADICTION_MARGIN: f32 = 1.0;

/// How far labels are believed.
#[derive(Clone, Debug, PartialEq)]
pub struct TrustConfig {
    /// A prediction is confident past this raw-score margin; 0 turns the
    /// weighing off (every label learned in full, no reporter judged).
    pub margin: f32,
    /// Most reporters kept.
    pub max_reporters: usize,
    /// Reporters whose labels are learned in full.
    pub trusted: Vec<String>,
    /// Most reported messages remembered ([`super::reported`]; 0: none).
    pub reported: usize,
    /// Whether a lesson (an endpoint's: spamd, rspamd, the console) may
    /// add a class: off, a label none of a model's classes (once it has
    /// two) is refused, so a typo cannot make a binary filter multi-class.
    /// Classes the stream itself brings are always taken.
    pub lessons_add_classes: bool,
}

impl TrustConfig {
    /// Why a lesson teaching `label` to a model of `classes` is refused:
    /// none when the label is one of them, the model has fewer than two
    /// (a new filter learns its classes from its first lessons), or
    /// lessons may add classes.
    pub fn unknown_lesson_label(&self, label: &str, classes: &[String]) -> Option<String> {
        if self.lessons_add_classes || classes.len() < 2 || classes.iter().any(|c| c == label) {
            return None;
        }
        Some(format!(
            "unknown label {label:?}: the model's classes are {} (--lessons-add-classes lets a lesson add one)",
            classes.join(", ")
        ))
    }

    /// Whether `name`'s labels are learned in full, unweighed.
    pub fn trusts(&self, name: &str) -> bool {
        self.trusted.iter().any(|t| t == name)
    }
}

impl Default for TrustConfig {
    fn default() -> Self {
        TrustConfig {
            margin: DEFAULT_CONTRADICTION_MARGIN,
            max_reporters: DEFAULT_MAX_REPORTERS,
            trusted: Vec::new(),
            reported: DEFAULT_REPORTED,
            lessons_add_classes: false,
        }
    }
}

/// The key of labels that name no reporter: they share one record.
pub(super) const ANONYMOUS: &str = "";
/// Reporters kept by default (`--max-reporters`).
pub const DEFAULT_MAX_REPORTERS: usize = 10_000;
/// Each of a reporter's labels keeps this share of its earlier record, so
/// the record covers about its last 200 labels: a reporter can lose trust
/// and win it back.
const DECAY: f32 = 0.995;
/// Labels of prior, no worse than everyone, that a new reporter's record
/// starts with: a few flipped labels do not condemn it at once.
const PRIOR_LABELS: f32 = 10.0;
/// How far above everyone's share a reporter's share of confident
/// contradictions may be with full trust, and where trust reaches 0.
const EXCESS_BAND: (f32, f32) = (0.1, 0.3);
/// Trust under which a reporter is reported as unreliable.
pub(super) const UNRELIABLE_BELOW: f32 = 0.5;

/// Messages remembered by default (`--reported-messages`): 16 bytes and
/// a map slot each, about 2 MB for 65,536.
pub const DEFAULT_REPORTED: usize = 65_536;

/// A reporter whose own recent labels contradicted confident predictions
/// more often than this is not taken at its word on a copy: under random
/// label noise every reporter is as bad as everyone (so trust, which
/// compares them, stays whole) but each one's share is the noise's, while
/// honest reporters of a clean stream stay under 2 % (docs/feedback.md).
const MAX_SHARE: f32 = 0.05;
/// Recent labels a reporter has before its share is judged: a new
/// reporter's first labels often correct the confident mistakes of a
/// young model, and one of them alone must not take it out of standing
/// (judged from the first label, CSDMC2010 kept a mistake sticky; from 20,
/// the random flips of SMS cost up to 7 errors more; docs/feedback.md).
const SHARE_AFTER_LABELS: f32 = 5.0;

/// One reporter's record.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reporter {
    /// Labels received.
    pub labels: u64,
    /// Labels held for it (its trust too low to learn them alone).
    pub held: u64,
    /// Labels of its that another reporter replaced or forgot.
    pub overridden: u64,
    /// Decayed count of its recent labels.
    pub recent: f32,
    /// Decayed count of those that contradicted a confident prediction.
    pub contradicted: f32,
    /// Decayed sum, over its recent labels, of how far each one's
    /// contradiction (1 or 0) stood above everyone's share at the time:
    /// the reporter is compared with everyone over the same stretch of the
    /// stream, however rarely it reports.
    pub excess: f32,
}

impl Reporter {
    /// Whether its word stands on a reported message's copies
    /// ([`super::reported`]): trust at least [`UNRELIABLE_BELOW`], and a
    /// recent share of confident contradictions, once judged, of at most
    /// [`MAX_SHARE`].
    pub fn in_good_standing(&self) -> bool {
        let judged = self.recent >= SHARE_AFTER_LABELS && self.share() > MAX_SHARE;
        self.trust() >= UNRELIABLE_BELOW && !judged
    }

    /// Its recent share of confident contradictions.
    pub fn share(&self) -> f32 {
        self.contradicted / self.recent.max(1.0)
    }

    /// How far its share stood above everyone's over its recent labels,
    /// drawn toward 0 by a prior of [`PRIOR_LABELS`] labels.
    pub fn excess(&self) -> f32 {
        self.excess / (self.recent + PRIOR_LABELS)
    }

    /// Its trust, 0 to 1.
    pub fn trust(&self) -> f32 {
        let (lo, hi) = EXCESS_BAND;
        1.0 - ((self.excess() - lo) / (hi - lo)).clamp(0.0, 1.0)
    }

    fn observe(&mut self, contradicted: bool, everyone: f32) {
        let c = f32::from(u8::from(contradicted));
        self.labels += 1;
        self.recent = self.recent * DECAY + 1.0;
        self.contradicted = self.contradicted * DECAY + c;
        self.excess = self.excess * DECAY + (c - everyone);
    }
}

/// The reporters seen, the least recently heard from first, at most `cap`.
#[derive(Clone, Debug)]
pub struct Reporters {
    table: LinkedHashMap<String, Reporter>,
    cap: usize,
    /// Reporters dropped to keep to the cap.
    pub evicted: u64,
}

impl Default for Reporters {
    fn default() -> Self {
        Reporters::new(DEFAULT_MAX_REPORTERS)
    }
}

impl PartialEq for Reporters {
    fn eq(&self, other: &Self) -> bool {
        self.cap == other.cap && self.evicted == other.evicted && self.table.iter().eq(other.table.iter())
    }
}

impl Reporters {
    pub fn new(cap: usize) -> Self {
        Reporters {
            table: LinkedHashMap::new(),
            cap: cap.max(1),
            evicted: 0,
        }
    }

    /// Records a label from `name` (or [`ANONYMOUS`]) that did or did not
    /// contradict a confident prediction, and returns the reporter's trust
    /// before it (a label is weighed by the record it arrives to, so a
    /// flooder's first labels are already judged by the prior) along with
    /// whether this label took it under [`UNRELIABLE_BELOW`].
    pub fn observe(&mut self, name: &str, contradicted: bool, everyone: f32) -> (f32, bool) {
        if self.table.to_back(name).is_none() {
            if self.table.len() >= self.cap {
                self.table.pop_front();
                self.evicted += 1;
            }
            self.table.insert(name.to_string(), Reporter::default());
        }
        // Just moved or inserted: always there.
        let Some(reporter) = self.table.get_mut(name) else {
            return (1.0, false);
        };
        let before = reporter.trust();
        reporter.observe(contradicted, everyone);
        let after = reporter.trust();
        if self.table.len() == 1 {
            // Alone it is everyone: nobody to judge it against (its record,
            // slower than everyone's moving average, would lag it when the
            // share rises, as on a new stream).
            return (1.0, false);
        }
        (before, before >= UNRELIABLE_BELOW && after < UNRELIABLE_BELOW)
    }

    /// `name`'s record, if kept.
    pub fn get(&self, name: &str) -> Option<&Reporter> {
        self.table.get(name)
    }

    /// The trust `name`'s next label is weighed by ([`Reporters::observe`]):
    /// its record's, or whole for a reporter not kept or alone.
    pub fn standing(&self, name: &str) -> f32 {
        if self.table.len() <= 1 {
            return 1.0;
        }
        self.table.get(name).map_or(1.0, Reporter::trust)
    }

    /// Counts a label of `name`'s that another reporter overrode.
    pub fn count_overridden(&mut self, name: &str) {
        if let Some(r) = self.table.get_mut(name) {
            r.overridden += 1;
        }
    }

    /// Counts a label held for `name`.
    pub fn count_held(&mut self, name: &str) {
        if let Some(r) = self.table.get_mut(name) {
            r.held += 1;
        }
    }

    /// Reporters kept.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// How many kept reporters are under [`UNRELIABLE_BELOW`].
    pub fn unreliable(&self) -> usize {
        self.table.values().filter(|r| r.trust() < UNRELIABLE_BELOW).count()
    }

    /// Every kept reporter, the least recently heard from first (the
    /// order a checkpoint keeps).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Reporter)> {
        self.table.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Rebuilds the table from [`Reporters::iter`]'s order.
    pub fn from_parts(cap: usize, evicted: u64, reporters: impl IntoIterator<Item = (String, Reporter)>) -> Self {
        let mut r = Reporters::new(cap);
        r.evicted = evicted;
        for (name, record) in reporters {
            if r.table.len() >= r.cap {
                r.table.pop_front();
                r.evicted += 1;
            }
            r.table.insert(name, record);
        }
        r
    }

    /// The `n` least trusted reporters, least first (ties: most labels first).
    pub fn least_trusted(&self, n: usize) -> Vec<(&str, &Reporter, f32)> {
        let mut all: Vec<_> = self.iter().map(|(k, r)| (k, r, r.trust())).collect();
        all.sort_by(|a, b| a.2.total_cmp(&b.2).then(b.1.labels.cmp(&a.1.labels)));
        all.truncate(n);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reporter_contradicting_far_more_than_everyone_loses_trust() {
        let mut r = Reporters::new(10);
        let everyone = 0.05;
        for i in 0..200 {
            r.observe("honest", i % 20 == 0, everyone);
            r.observe("flooder", i % 5 != 0, everyone);
        }
        let (honest, _) = r.observe("honest", false, everyone);
        let (flooder, _) = r.observe("flooder", true, everyone);
        assert_eq!(honest, 1.0);
        assert_eq!(flooder, 0.0);
        assert_eq!(r.least_trusted(1)[0].0, "flooder");
        assert_eq!(r.unreliable(), 1);
        // Under heavy noise everyone contradicts often: nobody is singled out.
        let mut noisy = Reporters::new(10);
        for i in 0..200 {
            for name in ["a", "b", "c"] {
                noisy.observe(name, (i + name.len()) % 5 != 0, 0.8);
            }
        }
        assert_eq!(noisy.unreliable(), 0);
    }

    #[test]
    fn a_new_reporter_is_judged_by_the_prior_and_the_crossing_is_reported_once() {
        let mut r = Reporters::new(10);
        r.observe("other", false, 0.02);
        let mut crossings = 0;
        let mut first = None;
        for _ in 0..20 {
            let (trust, crossed) = r.observe("new", true, 0.02);
            first.get_or_insert(trust);
            crossings += usize::from(crossed);
        }
        assert_eq!(first, Some(1.0));
        assert_eq!(crossings, 1);
        assert!(r.observe("new", true, 0.02).0 < 0.01);
        // Alone, a reporter is everyone: never judged.
        let mut alone = Reporters::new(10);
        for _ in 0..50 {
            assert_eq!(alone.observe("only", true, 0.0), (1.0, false));
        }
    }

    #[test]
    fn the_table_keeps_to_its_cap_dropping_the_least_recently_heard() {
        let mut r = Reporters::new(3);
        for name in ["a", "b", "c", "a", "d"] {
            r.observe(name, false, 0.0);
        }
        let names: Vec<&str> = r.iter().map(|(k, _)| k).collect();
        assert_eq!(names, ["c", "a", "d"]);
        assert_eq!(r.evicted, 1);
        let back = Reporters::from_parts(3, r.evicted, r.iter().map(|(k, v)| (k.to_string(), v.clone())));
        assert_eq!(back, r);
        for i in 0..100_000 {
            r.observe(&format!("sybil-{i}"), false, 0.0);
        }
        assert_eq!(r.len(), 3);
    }
}
