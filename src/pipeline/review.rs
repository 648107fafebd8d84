//! Which messages to ask a person to label: the uncertainty review.
//!
//! A prediction's confidence is the gap between its best class's raw score
//! and the runner-up's (for multi-label, the nearest label's distance to the
//! decision threshold). Raw scores are margins or log-odds, whose scale
//! differs by learner, so the uncertain band is not a fixed number: it is
//! the `fraction`-quantile of the last predictions' confidences (200 of
//! them, or 2 / fraction if more; recomputed 25 times a window), so about
//! that fraction of predictions falls in the band and is marked uncertain.
//! Until the first window's first computation, all are; a confidence of 0
//! (no evidence either way) always is. Confidences tied at the band's
//! edge share what the fraction leaves: a model whose scores do not tell
//! messages apart yet (a fresh stack serves its bias alone until its
//! members' weights grow: every confidence the same) still has that
//! fraction marked, spread over the ties. A model that knows one class
//! ([`Review::consider_blind`]) is asked at the budget's rate, at random.
//!
//! A marked message is asked for (written to the review output, or in
//! `eval --label-budget`, learned) only while the budget allows: a token
//! bucket by traffic (`fraction` of the messages seen, bursts of at most
//! `max(1, fraction x 1,000)`) and, if set, one by wall time (`per_minute`,
//! bursts of a minute's worth). Over any n messages and t minutes, at most
//! `fraction x n + burst` and `per_minute x (t + 1)` are asked, whatever
//! the traffic. `--query random` asks at random at the same budget: the
//! baseline that uncertainty must beat.

use super::Pipeline;
use crate::model::{Scored, Task};

/// How to choose the messages to ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Query {
    /// The least confident predictions (the uncertain band).
    Uncertainty,
    /// Any message, at random at the same rate (a baseline).
    Random,
}

/// The review's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReviewConfig {
    /// The share of messages in the band and the traffic budget (0 to 1).
    pub fraction: f64,
    /// Most messages asked for per minute of wall time (None: no limit).
    pub per_minute: Option<u32>,
    pub query: Query,
    /// Seed of `Query::Random`.
    pub seed: u64,
}

impl Default for ReviewConfig {
    fn default() -> Self {
        ReviewConfig {
            fraction: 0.01,
            per_minute: None,
            query: Query::Uncertainty,
            seed: 0,
        }
    }
}

/// What the review made of one prediction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// In the uncertain band.
    pub uncertain: bool,
    /// Asked for (within the budget).
    pub ask: bool,
}

/// Fewest predictions whose confidences the band is the quantile of: a
/// window short enough to follow a stream whose mix changes (1,000 lost
/// 0.045 of accuracy on SpamAssassin at a 10 % budget, docs/review.md).
const MIN_WINDOW: usize = 200;
/// Windows of the band between two computations of it.
const REFRESHES_PER_WINDOW: usize = 25;
/// Most predictions in the window (a fraction under 1 in 5,000 keeps 10,000).
const MAX_WINDOW: usize = 10_000;
/// Messages whose fraction makes the traffic bucket's burst.
const BURST_MESSAGES: f64 = 1000.0;

/// The band, the budget and the counts of an uncertainty review.
#[derive(Clone, Debug)]
pub struct Review {
    cfg: ReviewConfig,
    /// Confidences below this are uncertain.
    band: f64,
    /// The share of confidences equal to `band` that are uncertain too
    /// (what the fraction leaves once those below it are counted).
    tie_share: f64,
    /// The last `window` confidences (a ring whose oldest, once full, is
    /// at `head`), and scratch to select in.
    recent: Vec<f32>,
    head: usize,
    window: usize,
    scratch: Vec<f32>,
    /// The traffic bucket: asks it allows now, and its size.
    tokens: f64,
    burst: f64,
    /// The wall-time bucket and when it was last filled.
    minute_tokens: f64,
    filled_ms: Option<u64>,
    /// Messages considered (the random query's stream position).
    seen: u64,
}

impl Review {
    pub fn new(cfg: ReviewConfig) -> Self {
        let burst = if cfg.fraction > 0.0 {
            (cfg.fraction * BURST_MESSAGES).max(1.0)
        } else {
            0.0
        };
        // Room for at least two confidences inside the band.
        let window = if cfg.fraction > 0.0 {
            ((2.0 / cfg.fraction) as usize).clamp(MIN_WINDOW, MAX_WINDOW)
        } else {
            MIN_WINDOW
        };
        Review {
            cfg,
            band: f64::INFINITY,
            tie_share: 0.0,
            recent: Vec::new(),
            head: 0,
            window,
            scratch: Vec::new(),
            tokens: burst,
            burst,
            minute_tokens: cfg.per_minute.map_or(0.0, f64::from),
            filled_ms: None,
            seen: 0,
        }
    }

    pub fn config(&self) -> &ReviewConfig {
        &self.cfg
    }

    /// The band's current width: confidences below it are uncertain.
    pub fn band(&self) -> f64 {
        self.band
    }

    /// Judges one prediction of `confidence` at wall time `now_ms`: marks
    /// it, moves the band, and asks for it if the query wants it and the
    /// budget allows (spending the budget). In the band: below its edge,
    /// one of the ties at it in their share, or no evidence (0).
    pub fn consider(&mut self, confidence: f32, now_ms: u64) -> Verdict {
        let c = f64::from(confidence);
        let tied = c == self.band && self.draw(0x7E1E) < self.tie_share;
        let uncertain = self.is_uncertain(confidence) || tied;
        self.remember(confidence);
        self.spend(uncertain, uncertain, now_ms)
    }

    /// Judges a prediction of a model that cannot tell its classes apart
    /// for this message (a single-label model that knows one class, or
    /// scores its best two alike): uncertain, but
    /// asked for at the budget's rate, at random, and kept out of the
    /// band's window. Asking for every one would spend the whole budget
    /// on a stream's opening run of one class (SpamAssassin's opens with
    /// 133 spam) and leave none for the other class's first messages; and
    /// their confidences of 0 in the window would hold the band at 0, so
    /// that nothing is asked for a window after (with both, `eval
    /// --label-budget 0.1` on SpamAssassin predicted spam for everything).
    pub fn consider_blind(&mut self, now_ms: u64) -> Verdict {
        let wanted = self.draw(0x0E0E) < self.cfg.fraction;
        self.spend(true, wanted, now_ms)
    }

    /// Counts a prediction, marked `uncertain`, and asks for it when the
    /// query wants it (`wanted`: by uncertainty) and the budget allows.
    fn spend(&mut self, uncertain: bool, wanted: bool, now_ms: u64) -> Verdict {
        let f = self.cfg.fraction;
        self.seen += 1;
        self.tokens = (self.tokens + f).min(self.burst);
        self.fill_minute(now_ms);
        let wanted = match self.cfg.query {
            Query::Uncertainty => wanted,
            // A uniform draw below f: with probability f.
            Query::Random => self.draw(0) <= f,
        };
        let ask = wanted && self.tokens >= 1.0 && (self.cfg.per_minute.is_none() || self.minute_tokens >= 1.0);
        if ask {
            self.tokens -= 1.0;
            self.minute_tokens -= 1.0;
        }
        Verdict { uncertain, ask }
    }

    /// A uniform draw in [0, 1) for the message at the stream position
    /// `seen`, one stream of them per `salt` (reproducible from the seed).
    fn draw(&self, salt: u64) -> f64 {
        let x = crate::eval::splitmix64(self.cfg.seed ^ salt ^ self.seen.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Whether `confidence` falls in today's uncertain band, without
    /// counting it or spending the budget (a prediction on request).
    pub fn is_uncertain(&self, confidence: f32) -> bool {
        uncertain_under(self.band, self.cfg.fraction > 0.0, confidence)
    }

    /// Keeps `confidence` in the window, and every window / 25 predictions
    /// sets the band to the window's `fraction`-quantile.
    fn remember(&mut self, confidence: f32) {
        let c = if confidence.is_nan() { 0.0 } else { confidence };
        if self.recent.len() < self.window {
            self.recent.push(c);
        } else {
            self.recent[self.head] = c;
            self.head = (self.head + 1) % self.window;
        }
        if !(self.seen + 1).is_multiple_of((self.window / REFRESHES_PER_WINDOW) as u64) {
            return;
        }
        self.scratch.clone_from(&self.recent);
        let k = ((self.cfg.fraction * self.scratch.len() as f64) as usize).min(self.scratch.len() - 1);
        let (_, kth, _) = self.scratch.select_nth_unstable_by(k, f32::total_cmp);
        let kth = *kth;
        // At a fraction of 0 nothing is uncertain; else the k-th smallest
        // is the first confidence outside the band, and the k - below
        // places left are shared by the confidences tied with it.
        if self.cfg.fraction > 0.0 {
            let below = self.scratch.iter().filter(|&&c| c < kth).count();
            let ties = self.scratch.iter().filter(|&&c| c == kth).count().max(1);
            self.band = f64::from(kth);
            self.tie_share = (k - below.min(k)) as f64 / ties as f64;
        } else {
            (self.band, self.tie_share) = (f64::NEG_INFINITY, 0.0);
        }
    }

    /// What a checkpoint keeps of it.
    pub fn state(&self) -> ReviewState {
        let (newer, older) = self.recent.split_at(self.head);
        ReviewState {
            recent: older.iter().chain(newer).copied().collect(),
            band: self.band,
            tokens: self.tokens,
            seen: self.seen,
        }
    }

    /// Resumes from [`Review::state`] (a window of another length keeps
    /// the newest confidences that fit).
    pub fn restore(&mut self, state: ReviewState) {
        let mut recent = state.recent;
        let extra = recent.len().saturating_sub(self.window);
        recent.drain(..extra);
        self.recent = recent;
        self.head = 0;
        self.band = state.band;
        self.tokens = state.tokens.clamp(0.0, self.burst);
        self.seen = state.seen;
    }

    /// Adds the per-minute tokens earned since the last fill.
    fn fill_minute(&mut self, now_ms: u64) {
        let Some(rate) = self.cfg.per_minute.map(f64::from) else {
            return;
        };
        if let Some(last) = self.filled_ms {
            let earned = now_ms.saturating_sub(last) as f64 * rate / 60_000.0;
            self.minute_tokens = (self.minute_tokens + earned).min(rate);
        }
        self.filled_ms = Some(now_ms.max(self.filled_ms.unwrap_or(0)));
    }
}

/// What a checkpoint keeps of the review: the window's confidences
/// (oldest first), the band, the traffic tokens and the predictions seen.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReviewState {
    pub recent: Vec<f32>,
    pub band: f64,
    pub tokens: f64,
    pub seen: u64,
}

/// Whether `confidence` is uncertain under `band`, for a review that
/// asks about something (`reviews`): no evidence either way (a gap of 0)
/// is uncertain whatever the band (but for a review of nothing).
pub(super) fn uncertain_under(band: f64, reviews: bool, confidence: f32) -> bool {
    f64::from(confidence) < band || (confidence <= 0.0 && reviews)
}

/// The confidence of a prediction: its best class's raw score over the
/// runner-up's, for multi-label the nearest label's distance to
/// `threshold`; 0 (no evidence) with fewer than two classes.
pub(super) fn confidence(scored: &Scored, task: Task, threshold: f32) -> f32 {
    let raw = &scored.raw;
    if task == Task::MultiLabel {
        return raw.iter().map(|&s| (s - threshold).abs()).fold(f32::INFINITY, f32::min);
    }
    if raw.len() < 2 {
        return 0.0;
    }
    let (mut first, mut second) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    for &s in raw {
        if s > first {
            (first, second) = (s, first);
        } else if s > second {
            second = s;
        }
    }
    let gap = first - second;
    if gap.is_finite() { gap } else { 0.0 }
}

impl Pipeline {
    /// Reviews a prediction (its `scored` values) and counts it; without
    /// an output to send it to (`sent` false), nothing is asked.
    pub(super) fn review_current(&mut self, scored: &Scored, sent: bool) -> Verdict {
        let task = self.predictor.model.task().unwrap_or(Task::SingleLabel);
        let c = confidence(scored, task, self.predictor.model.hyper().threshold);
        // The clock only matters to a per-minute budget.
        let now = match self.review.config().per_minute {
            Some(_) => crate::clock::now_ms(),
            None => 0,
        };
        // Fewer than two classes known, or no gap between the best two
        // (a fresh stack's bias at 0): no evidence to tell them apart.
        // (A multi-label confidence of 0 is one label at its threshold:
        // that message is worth asking for, as before.)
        let blind = task == Task::SingleLabel && (scored.raw.len() < 2 || c <= 0.0);
        let mut verdict = match blind {
            true => self.review.consider_blind(now),
            false => self.review.consider(c, now),
        };
        verdict.ask &= sent;
        let counters = &mut self.counters;
        counters.uncertain += u64::from(verdict.uncertain);
        counters.reviewed += u64::from(verdict.ask);
        counters.review_over_budget += u64::from(sent && verdict.uncertain && !verdict.ask);
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(fraction: f64, per_minute: Option<u32>, query: Query) -> Review {
        Review::new(ReviewConfig {
            fraction,
            per_minute,
            query,
            seed: 7,
        })
    }

    #[test]
    fn the_band_holds_the_fraction_of_least_confident() {
        // Confidences uniform on [0, 10): the 5 % quantile is 0.5.
        let mut r = review(0.05, None, Query::Uncertainty);
        let mut marked = 0;
        for i in 0..200_000u64 {
            let c = (crate::eval::splitmix64(i) % 10_000) as f32 / 1000.0;
            marked += u32::from(r.consider(c, 0).uncertain && i >= 100_000);
        }
        let share = f64::from(marked) / 100_000.0;
        assert!((0.04..0.06).contains(&share), "{share}");
        assert!((0.3..0.7).contains(&r.band()), "{}", r.band());
    }

    #[test]
    fn a_burst_of_uncertain_messages_gets_only_the_budget() {
        // Every message uncertain: the traffic bucket lets 1 % through,
        // after a first burst of 10.
        let mut r = review(0.01, None, Query::Uncertainty);
        let asked = (0..10_000).filter(|_| r.consider(0.0, 0).ask).count();
        assert!((100..=110).contains(&asked), "{asked}");
        // The minute bucket: 30 in the first minute whatever the traffic,
        // then 30 more a minute.
        let mut r = review(1.0, Some(30), Query::Uncertainty);
        let asked = (0..10_000).filter(|_| r.consider(0.0, 1_000).ask).count();
        assert_eq!(asked, 30);
        let later = (0..10_000).filter(|_| r.consider(0.0, 61_000).ask).count();
        assert_eq!(later, 30);
    }

    #[test]
    fn random_queries_ask_at_the_fraction_and_ignore_confidence() {
        let mut r = review(0.1, None, Query::Random);
        let asked = (0..100_000).filter(|_| r.consider(1e9, 0).ask).count();
        assert!((9_000..11_000).contains(&asked), "{asked}");
        // Uncertainty asks for all until the band is first computed (a
        // cold model knows nothing), then, of equally sure ones, the
        // fraction: the ties at the band's edge share it.
        let mut u = review(0.1, None, Query::Uncertainty);
        let first = (0..8).filter(|_| u.consider(1e9, 0).ask).count();
        assert_eq!(first, 8);
        assert!(
            !u.consider(1e9, 0).uncertain,
            "the band is computed: the next one is sure"
        );
        let ties = (0..1000).filter(|_| u.consider(1e9, 0).ask).count();
        assert!((60..=140).contains(&ties), "{ties} of 1,000 equally sure asked");
    }

    /// A model that cannot tell its classes apart is asked at the
    /// budget's rate (not for every message, which would spend the whole
    /// budget on a stream's opening run of one class), and its messages
    /// leave the band where it was.
    #[test]
    fn a_blind_model_is_asked_at_the_budgets_rate() {
        let mut u = review(0.1, None, Query::Uncertainty);
        for i in 0..400 {
            u.consider((i % 100) as f32, 0);
        }
        let band = u.band();
        let verdicts: Vec<Verdict> = (0..2000).map(|_| u.consider_blind(0)).collect();
        assert!(verdicts.iter().all(|v| v.uncertain), "each marked uncertain");
        let asked = verdicts.iter().filter(|v| v.ask).count();
        assert!(
            (150..=250).contains(&asked),
            "{asked} of 2,000 asked at a fraction of 0.1"
        );
        assert_eq!(u.band(), band, "the band's window takes none of them");
    }

    #[test]
    fn a_restored_review_goes_on_as_the_original() {
        let conf = |i: u64| (crate::eval::splitmix64(i) % 1000) as f32 / 100.0;
        let mut a = review(0.05, None, Query::Uncertainty);
        for i in 0..537 {
            a.consider(conf(i), 0);
        }
        let mut b = review(0.05, None, Query::Uncertainty);
        b.restore(a.state());
        assert_eq!(b.state(), a.state());
        for i in 537..2000 {
            assert_eq!(a.consider(conf(i), 0), b.consider(conf(i), 0), "{i}");
        }
        assert_eq!(a.band(), b.band());
    }

    #[test]
    fn confidence_is_the_gap_to_the_runner_up() {
        let s = |raw: &[f32]| Scored {
            raw: raw.to_vec(),
            ..Scored::default()
        };
        assert_eq!(confidence(&s(&[1.0, 3.0, -2.0]), Task::SingleLabel, 0.0), 2.0);
        assert_eq!(confidence(&s(&[1.0]), Task::SingleLabel, 0.0), 0.0);
        assert_eq!(confidence(&s(&[1.0, -0.25, 4.0]), Task::MultiLabel, 0.0), 0.25);
    }
}
