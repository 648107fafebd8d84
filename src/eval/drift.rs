//! Drift detection on a stream of errors: the Page-Hinkley test (Page
//! 1954; as River's `drift.PageHinkley`, implemented here from its
//! definition), one-sided, for a rise of the error rate.
//!
//! Each labeled example adds `x` (1 for an error, 0 for a hit). With `m`
//! the running mean of `x`, the test keeps `U = alpha * U + (x - m -
//! delta)` and its smallest value so far, and signals a drift when `U`
//! rises more than `threshold` standard deviations of `x` (`sqrt(m (1 -
//! m))`, at least 0.05) above that minimum: errors have come, for long
//! enough, faster than the stream's own rate plus `delta`. The threshold
//! is in standard deviations, not River's absolute units, so that one
//! default serves a spam filter erring 1 % of the time and a topic router
//! erring 20 %: a threshold fixed in errors either missed SpamAssassin
//! followed by SMS (50) or fired twice on a steady 10 % stream (20). After
//! a signal the test starts over. A falling error rate (a model still
//! learning) never signals.

/// The Page-Hinkley test's settings and state.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PageHinkley {
    /// Tolerated rise of the error rate before it counts.
    delta: f64,
    /// How far the cumulative rise must go to signal.
    threshold: f64,
    /// Forgetting factor of the cumulative sum.
    alpha: f64,
    /// Observations before a signal is allowed.
    min_instances: u64,
    n: u64,
    mean: f64,
    sum: f64,
    min_sum: f64,
}

impl Default for PageHinkley {
    /// River's delta (0.005) and first 30; a threshold of 100 standard
    /// deviations; no forgetting (alpha 1; River: 0.9999). Measured on the
    /// shared streams' progressive errors (docs/drift.md): the SMS label
    /// swap found after 18 messages, SpamAssassin followed by SMS after 28,
    /// nothing on the four unchanged streams; on steady synthetic streams
    /// at 2-30 % errors, one alarm in 25,000-100,000 examples (150: none,
    /// but a swap early in a young model's stream went unseen). With forgetting the sum decays
    /// toward an equilibrium, and after the error rate falls (a model
    /// learning) that alone lifts it above its minimum: a false signal on
    /// every stream that starts cold (`a_falling_error_rate_is_not_a_drift`).
    fn default() -> Self {
        PageHinkley::new(0.005, 100.0, 1.0, 30)
    }
}

impl PageHinkley {
    pub(crate) fn new(delta: f64, threshold: f64, alpha: f64, min_instances: u64) -> Self {
        PageHinkley {
            delta,
            threshold,
            alpha,
            min_instances,
            n: 0,
            mean: 0.0,
            sum: 0.0,
            min_sum: 0.0,
        }
    }

    /// Adds one observation; true when it completes a drift (the test
    /// then starts over).
    pub(crate) fn update(&mut self, error: bool) -> bool {
        let x = if error { 1.0 } else { 0.0 };
        self.n += 1;
        self.mean += (x - self.mean) / self.n as f64;
        self.sum = self.alpha * self.sum + (x - self.mean - self.delta);
        self.min_sum = self.min_sum.min(self.sum);
        if self.n >= self.min_instances && self.statistic() > self.threshold {
            *self = PageHinkley::new(self.delta, self.threshold, self.alpha, self.min_instances);
            return true;
        }
        false
    }

    /// How far the cumulative rise is above its minimum, in standard
    /// deviations of the errors (signals past the threshold).
    pub(crate) fn statistic(&self) -> f64 {
        let sd = (self.mean * (1.0 - self.mean)).sqrt().max(0.05);
        (self.sum - self.min_sum) / sd
    }
}

#[cfg(test)]
mod tests {
    use super::PageHinkley;

    /// A stream of errors at `rate` (a fixed pseudo-random sequence).
    fn errors(rate: f64, n: usize, seed: u64) -> impl Iterator<Item = bool> {
        let mut s = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (0..n).map(move |_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) < rate
        })
    }

    #[test]
    fn a_rise_of_the_error_rate_is_signalled_soon_and_once() {
        for (before, after) in [(0.02, 0.5), (0.02, 0.15), (0.1, 0.4), (0.2, 0.4)] {
            let mut ph = PageHinkley::default();
            let stable: Vec<usize> = (errors(before, 20_000, 1).enumerate())
                .filter_map(|(i, e)| ph.update(e).then_some(i))
                .collect();
            // False alarms are rare (one in 25,000-100,000 examples at
            // these rates), not absent.
            assert!(
                stable.len() <= 2,
                "{before}: signalled at {stable:?} on a steady stream"
            );
            let changed: Vec<usize> = (errors(after, 5_000, 2).enumerate())
                .filter_map(|(i, e)| ph.update(e).then_some(i))
                .collect();
            assert!(
                changed.first().is_some_and(|&i| i < 500),
                "{before} -> {after}: {changed:?}"
            );
            // A lasting change at a high, noisy rate may be found again
            // now and then, never at every step.
            assert!(changed.len() <= 4, "{before} -> {after}: a lasting change, {changed:?}");
        }
    }

    /// Each stream has its own test and counts; the progressive one's
    /// detections are kept by example count.
    #[test]
    fn the_watch_keeps_the_streams_apart() {
        let mut w = super::DriftWatch::default();
        for e in errors(0.02, 2_000, 6) {
            w.observe(super::Watched::Published, e);
            w.observe(super::Watched::Progressive, e);
        }
        let before = w.detections;
        let hits = (0..200).filter(|_| w.observe(super::Watched::Published, true)).count();
        assert_eq!(hits, 1);
        assert_eq!(w.detections[1], before[1] + 1);
        assert_eq!(w.detections[0], before[0]);
        assert!(w.last_unix_ms[1] > 0);
        assert!(w.progressive_at.len() as u64 == w.detections[0]);
    }

    #[test]
    fn a_falling_error_rate_is_not_a_drift() {
        let mut ph = PageHinkley::default();
        let learning = errors(0.5, 500, 3)
            .chain(errors(0.1, 2_000, 4))
            .chain(errors(0.01, 20_000, 5));
        assert_eq!(learning.filter(|&e| ph.update(e)).count(), 0);
        assert!(ph.statistic() < ph.threshold);
    }
}

/// The two error streams watched: the progressive one (every labeled
/// message, scored before it is learned) and the published predictions
/// judged by their late labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watched {
    Progressive,
    Published,
}

impl Watched {
    pub const ALL: [Watched; 2] = [Watched::Progressive, Watched::Published];

    pub fn as_str(self) -> &'static str {
        match self {
            Watched::Progressive => "progressive",
            Watched::Published => "published",
        }
    }
}

/// Most detections remembered by example count (for `eval`'s report).
const KEPT_DETECTIONS: usize = 100;

/// A Page-Hinkley test on each watched stream and what they found. Not
/// checkpointed: after a restart the tests start over.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DriftWatch {
    tests: [PageHinkley; 2],
    /// Observations and detections per stream.
    seen: [u64; 2],
    pub detections: [u64; 2],
    /// When each stream's last detection came (Unix ms; 0: never).
    pub last_unix_ms: [u64; 2],
    /// The progressive stream's detections, as the number of labeled
    /// examples seen then (the first hundred).
    pub progressive_at: Vec<u64>,
}

impl DriftWatch {
    /// Counts one outcome of stream `w`; true when it completes a drift.
    pub fn observe(&mut self, w: Watched, error: bool) -> bool {
        let i = w as usize;
        self.seen[i] += 1;
        if !self.tests[i].update(error) {
            return false;
        }
        self.detections[i] += 1;
        self.last_unix_ms[i] = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        if w == Watched::Progressive && self.progressive_at.len() < KEPT_DETECTIONS {
            self.progressive_at.push(self.seen[i]);
        }
        tracing::warn!(
            stream = w.as_str(),
            after = self.seen[i],
            "drift: the error rate rose (Page-Hinkley test); the stream may have changed"
        );
        true
    }

    /// The test's statistic on stream `w` (it signals past its threshold).
    pub fn statistic(&self, w: Watched) -> f64 {
        self.tests[w as usize].statistic()
    }
}
