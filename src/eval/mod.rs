//! Progressive (test-then-train) metrics: each labeled example is predicted
//! by the model as it stands, counted here, and only then learned.
//!
//! Kept both cumulatively and over a sliding window of the last N examples:
//! accuracy (subset accuracy for multi-label), per-class precision, recall
//! and F1, micro and macro averages, the confusion matrix (single-label),
//! and ROC AUC for binary tasks (spam filters report 1-ROCA %).
//!
//! The metrics keep their own label universe, in discovery order, so a gold
//! label the model has never seen (a test-only topic) still counts.

use std::collections::VecDeque;

use foldhash::HashMap;

use serde::Serialize;

/// Most (score, is-positive) pairs kept for the cumulative ROC AUC; beyond
/// it a deterministic reservoir sample keeps the estimate unbiased.
pub(crate) const ROC_CAP: usize = 1 << 20;

/// Default length of the sliding window.
pub(crate) const DEFAULT_WINDOW: usize = 1000;

/// Per-class counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClassCounts {
    pub tp: u64,
    pub fp: u64,
    #[serde(rename = "fn")]
    pub fn_: u64,
}

impl ClassCounts {
    fn add(&mut self, o: &ClassCounts, sign: i64) {
        let f = |a: u64, b: u64| (a as i64 + sign * b as i64) as u64;
        self.tp = f(self.tp, o.tp);
        self.fp = f(self.fp, o.fp);
        self.fn_ = f(self.fn_, o.fn_);
    }
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }
    pub fn f1(&self) -> f64 {
        ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn_)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// One counted example, as kept in the window.
#[derive(Clone, Debug, PartialEq)]
pub struct Counted {
    pub gold: Vec<u32>,
    pub predicted: Vec<u32>,
    /// The positive class's score (binary single-label tasks).
    pub score: Option<f32>,
}

/// Most classes a confusion matrix is kept for: it costs classes squared
/// (with 4,096 classes, 134 MB a matrix, six per pipeline) and nobody reads
/// one that large; past it, per-class counts remain.
pub(crate) const CONFUSION_MAX_CLASSES: usize = 64;

/// Counters over a set of examples (the whole stream, or the window).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub examples: u64,
    /// Examples whose predicted set equals the gold set.
    pub exact: u64,
    pub per_class: Vec<ClassCounts>,
    /// `confusion[gold][pred]`, single-label only; column `len` is "no
    /// prediction"; empty past [`CONFUSION_MAX_CLASSES`].
    pub confusion: Vec<Vec<u64>>,
}

impl Tally {
    fn grow(&mut self, n: usize) {
        while self.per_class.len() < n {
            self.per_class.push(ClassCounts::default());
        }
        if n > CONFUSION_MAX_CLASSES {
            self.confusion = Vec::new();
            return;
        }
        for row in &mut self.confusion {
            // The last column counts "no prediction": it stays last.
            let none = row.pop().unwrap_or(0);
            row.resize(n, 0);
            row.push(none);
        }
        while self.confusion.len() < n {
            self.confusion.push(vec![0; n + 1]);
        }
    }

    fn count(&mut self, o: &Counted, single: bool, sign: i64) {
        let n = self.per_class.len();
        let bump = |x: &mut u64| *x = (*x as i64 + sign) as u64;
        // The common case, one gold label and at most one predicted, without
        // sorting or allocating: the same counts as the general way below.
        if let ([g], pred @ ([] | [_])) = (&o.gold[..], &o.predicted[..]) {
            bump(&mut self.examples);
            let g = *g as usize;
            let p = pred.first().map(|&p| p as usize);
            let unit = |tp, fp, fn_| ClassCounts { tp, fp, fn_ };
            if p == Some(g) {
                bump(&mut self.exact);
                self.per_class[g].add(&unit(1, 0, 0), sign);
            } else {
                self.per_class[g].add(&unit(0, 0, 1), sign);
                if let Some(p) = p {
                    self.per_class[p].add(&unit(0, 1, 0), sign);
                }
            }
            if single && let Some(row) = self.confusion.get_mut(g) {
                bump(&mut row[p.unwrap_or(n)]);
            }
            return;
        }
        self.count_general(o, single, sign);
    }

    fn count_general(&mut self, o: &Counted, single: bool, sign: i64) {
        let n = self.per_class.len();
        let bump = |x: &mut u64| *x = (*x as i64 + sign) as u64;
        bump(&mut self.examples);
        let mut gold = o.gold.clone();
        gold.sort_unstable();
        let mut pred = o.predicted.clone();
        pred.sort_unstable();
        if gold == pred {
            bump(&mut self.exact);
        }
        let mut delta = vec![ClassCounts::default(); n];
        for &g in &gold {
            if pred.binary_search(&g).is_ok() {
                delta[g as usize].tp += 1;
            } else {
                delta[g as usize].fn_ += 1;
            }
        }
        for &p in &pred {
            if gold.binary_search(&p).is_err() {
                delta[p as usize].fp += 1;
            }
        }
        for (c, d) in self.per_class.iter_mut().zip(&delta) {
            c.add(d, sign);
        }
        if single
            && let Some(&g) = gold.first()
            && let Some(row) = self.confusion.get_mut(g as usize)
        {
            bump(&mut row[pred.first().map_or(n, |&p| p as usize)]);
        }
    }

    pub fn accuracy(&self) -> f64 {
        ratio(self.exact, self.examples)
    }

    pub fn micro(&self) -> ClassCounts {
        let mut m = ClassCounts::default();
        for c in &self.per_class {
            m.add(c, 1);
        }
        m
    }

    /// Mean F1 over classes that occur (as gold or prediction) in the tally.
    pub fn macro_f1(&self) -> f64 {
        let used: Vec<f64> = self
            .per_class
            .iter()
            .filter(|c| c.tp + c.fp + c.fn_ > 0)
            .map(ClassCounts::f1)
            .collect();
        if used.is_empty() {
            0.0
        } else {
            used.iter().sum::<f64>() / used.len() as f64
        }
    }
}

/// What a checkpoint keeps of a [`Progressive`]: what
/// [`Progressive::restore`] takes (and checks), and what
/// [`Progressive::state`] lends.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProgressiveState<L, R, O> {
    /// Label names in discovery order.
    pub labels: L,
    /// Single-label stream (a confusion matrix and, for two classes, ROC).
    pub single: bool,
    /// The configured positive class name for ROC, if any.
    pub positive_name: Option<String>,
    pub total: Tally,
    pub window: Tally,
    /// The window's examples, oldest first.
    pub recent: R,
    pub window_size: usize,
    /// (score, is positive) pairs for the cumulative ROC AUC.
    pub roc: O,
    /// Pairs offered to `roc` (for reservoir sampling beyond [`ROC_CAP`]).
    pub roc_seen: u64,
}

/// A checkpoint's [`ProgressiveState`], owned.
pub(crate) type ProgressiveParts = ProgressiveState<Vec<String>, Vec<Counted>, Vec<(f32, bool)>>;

/// A [`Progressive`]'s [`ProgressiveState`], lent.
pub(crate) type ProgressiveView<'a> = ProgressiveState<&'a [String], &'a VecDeque<Counted>, &'a [(f32, bool)]>;

/// Progressive metrics over a stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Progressive {
    /// Label names in discovery order.
    labels: Vec<String>,
    index: HashMap<String, u32>,
    /// Single-label stream (a confusion matrix and, for two classes, ROC).
    single: bool,
    /// The configured positive class name for ROC, if any.
    positive_name: Option<String>,
    total: Tally,
    window: Tally,
    recent: VecDeque<Counted>,
    window_size: usize,
    /// (score, is positive) pairs for the cumulative ROC AUC.
    roc: Vec<(f32, bool)>,
    /// Pairs offered to `roc` (for reservoir sampling beyond [`ROC_CAP`]).
    roc_seen: u64,
    /// Each stack member's ranking alone (`eval` only: not checkpointed).
    pub(crate) members: Option<members::Members>,
}

impl Progressive {
    pub fn new(window_size: usize, positive_name: Option<String>) -> Self {
        Progressive {
            labels: Vec::new(),
            index: HashMap::default(),
            single: true,
            positive_name,
            total: Tally::default(),
            window: Tally::default(),
            recent: VecDeque::new(),
            window_size: window_size.max(1),
            roc: Vec::new(),
            roc_seen: 0,
            members: None,
        }
    }

    /// Rebuilds the metrics a checkpoint kept, checking that they hold
    /// together (tallies and window entries of the labels named).
    pub fn restore(p: ProgressiveParts) -> Result<Self, String> {
        let n = p.labels.len();
        for (what, t) in [("total", &p.total), ("window", &p.window)] {
            if t.per_class.len() != n {
                return Err(format!("{} {what} per-class counts for {n} labels", t.per_class.len()));
            }
        }
        if (p.recent.iter()).any(|o| o.gold.iter().chain(&o.predicted).any(|&c| c as usize >= n)) {
            return Err("window entry names an unknown label".into());
        }
        let mut out = Progressive::new(p.window_size, p.positive_name);
        for l in &p.labels {
            out.intern(l);
        }
        out.single = p.single;
        out.total = p.total;
        out.window = p.window;
        out.recent = p.recent.into();
        out.roc = p.roc;
        out.roc_seen = p.roc_seen;
        Ok(out)
    }

    /// What a checkpoint keeps of it ([`Progressive::restore`]'s input).
    pub fn state(&self) -> ProgressiveView<'_> {
        ProgressiveState {
            labels: &self.labels,
            single: self.single,
            positive_name: self.positive_name.clone(),
            total: self.total.clone(),
            window: self.window.clone(),
            recent: &self.recent,
            window_size: self.window_size,
            roc: &self.roc,
            roc_seen: self.roc_seen,
        }
    }

    /// From now on, ranks each member of a binary model's stack alone
    /// (what `eval` reports as `members`).
    pub fn track_members(&mut self) {
        self.members.get_or_insert_with(Default::default);
    }

    /// Counts a message the stack served from its members' log-odds of the
    /// model's class 1 (named `class_one`), by member name, as `served`
    /// (its margin of the positive class), of gold classes `gold`; nothing
    /// unless tracked.
    pub fn record_members<G: AsRef<str>>(
        &mut self,
        inputs: &[(&'static str, f32)],
        served: Option<f32>,
        class_one: &str,
        gold: &[G],
    ) {
        let (Some(served), Some(p)) = (served, self.positive()) else {
            return;
        };
        let (one_positive, is_pos) = (class_one == p, matches!(gold, [g] if g.as_ref() == p));
        if let Some(m) = &mut self.members {
            m.record(inputs, served, one_positive, is_pos);
        }
    }

    /// Whether it ranks each stack member alone ([`Progressive::track_members`]).
    pub fn tracks_members(&self) -> bool {
        self.members.is_some()
    }

    /// The id of label `name` in this universe (added if new).
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = self.labels.len() as u32;
        self.labels.push(name.to_string());
        self.index.insert(name.to_string(), id);
        self.total.grow(self.labels.len());
        self.window.grow(self.labels.len());
        id
    }

    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// The positive class of a binary task: the configured name, else
    /// "spam", else the second label discovered.
    pub fn positive(&self) -> Option<&str> {
        if let Some(p) = &self.positive_name {
            return Some(p);
        }
        if self.index.contains_key("spam") {
            return Some("spam");
        }
        self.labels.get(1).map(String::as_str)
    }

    /// Whether this is (so far) a binary single-label task.
    pub fn is_binary(&self) -> bool {
        self.single && self.labels.len() <= 2
    }

    /// Counts one example. `score` is the positive class's score (binary tasks).
    pub fn record<G: AsRef<str>, P: AsRef<str>>(&mut self, gold: &[G], predicted: &[P], score: Option<f32>) {
        if gold.len() != 1 {
            self.single = false;
        }
        let gold: Vec<u32> = gold.iter().map(|g| self.intern(g.as_ref())).collect();
        let predicted: Vec<u32> = predicted.iter().map(|p| self.intern(p.as_ref())).collect();
        let is_pos = self
            .positive()
            .is_some_and(|p| self.index.get(p).is_some_and(|&id| gold == [id]));
        let score = score.filter(|_| self.is_binary());
        if let Some(s) = score {
            self.push_roc(s, is_pos);
        }
        let o = Counted { gold, predicted, score };
        let single = self.single;
        self.total.count(&o, single, 1);
        self.window.count(&o, single, 1);
        self.recent.push_back(o);
        if self.recent.len() > self.window_size
            && let Some(old) = self.recent.pop_front()
        {
            self.window.count(&old, single, -1);
        }
    }

    fn push_roc(&mut self, score: f32, positive: bool) {
        self.roc_seen += 1;
        if self.roc.len() < ROC_CAP {
            self.roc.push((score, positive));
        } else {
            // Reservoir sampling with a fixed hash of the count: reproducible.
            let j = (splitmix64(self.roc_seen) % self.roc_seen) as usize;
            if j < ROC_CAP {
                self.roc[j] = (score, positive);
            }
        }
    }

    pub fn total(&self) -> &Tally {
        &self.total
    }

    pub fn window(&self) -> &Tally {
        &self.window
    }

    /// Cumulative ROC AUC (binary tasks with both classes seen).
    pub fn roc_auc(&self) -> Option<f64> {
        if !self.is_binary() {
            return None;
        }
        roc_auc(&self.roc)
    }

    /// ROC AUC over the window.
    pub fn window_roc_auc(&self) -> Option<f64> {
        if !self.is_binary() {
            return None;
        }
        let pos = *self.index.get(self.positive()?)?;
        let pairs: Vec<(f32, bool)> = self
            .recent
            .iter()
            .filter_map(|o| o.score.map(|s| (s, o.gold == [pos])))
            .collect();
        roc_auc(&pairs)
    }

    /// A summary for reports and `--json`.
    pub fn report(&self) -> Report {
        let labels = &self.labels;
        let per_class = labels
            .iter()
            .zip(&self.total.per_class)
            .map(|(name, c)| {
                (
                    name.clone(),
                    ClassReport {
                        precision: c.precision(),
                        recall: c.recall(),
                        f1: c.f1(),
                        support: c.tp + c.fn_,
                    },
                )
            })
            .collect();
        let auc = self.roc_auc();
        let micro = self.total.micro();
        let members = self.members.as_ref().and_then(members::Members::report);
        Report {
            examples: self.total.examples,
            accuracy: self.total.accuracy(),
            micro_f1: micro.f1(),
            macro_f1: self.total.macro_f1(),
            micro_precision: micro.precision(),
            micro_recall: micro.recall(),
            roc_auc: auc,
            one_minus_roca_percent: auc.map(|a| (1.0 - a) * 100.0),
            positive_label: if self.is_binary() {
                self.positive().map(str::to_string)
            } else {
                None
            },
            per_class,
            confusion: (self.single && !self.total.confusion.is_empty()).then(|| Confusion {
                labels: labels.clone(),
                matrix: self.total.confusion.clone(),
            }),
            window: WindowReport {
                size: self.window_size,
                examples: self.window.examples,
                accuracy: self.window.accuracy(),
                micro_f1: self.window.micro().f1(),
                macro_f1: self.window.macro_f1(),
                roc_auc: self.window_roc_auc(),
            },
            ranking: if self.is_binary() {
                ranking::ranking(&self.roc)
            } else {
                None
            },
            member_regret: members.as_ref().and_then(members::regret),
            members,
        }
    }
}

/// Metrics of one class.
#[derive(Clone, Debug, Serialize)]
pub struct ClassReport {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub support: u64,
}

/// The confusion matrix: `matrix[gold][pred]`, the last column counting
/// examples the model gave no prediction (it knew no class yet).
#[derive(Clone, Debug, Serialize)]
pub struct Confusion {
    pub labels: Vec<String>,
    pub matrix: Vec<Vec<u64>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct WindowReport {
    pub size: usize,
    pub examples: u64,
    pub accuracy: f64,
    pub micro_f1: f64,
    pub macro_f1: f64,
    pub roc_auc: Option<f64>,
}

/// The summary of a [`Progressive`] tally.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub examples: u64,
    /// Accuracy (single-label) or subset accuracy (multi-label).
    pub accuracy: f64,
    pub micro_f1: f64,
    pub macro_f1: f64,
    pub micro_precision: f64,
    pub micro_recall: f64,
    pub roc_auc: Option<f64>,
    pub one_minus_roca_percent: Option<f64>,
    pub positive_label: Option<String>,
    pub per_class: Vec<(String, ClassReport)>,
    pub confusion: Option<Confusion>,
    pub window: WindowReport,
    /// Binary tasks: the operating points and the costliest mistakes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranking: Option<ranking::Ranking>,
    /// A stacked binary model (`eval`): each member's ranking alone and
    /// the stack's, over the messages the stack served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) members: Option<std::collections::BTreeMap<&'static str, members::MemberReport>>,
    /// The stack's 1-ROCA over its best member's (over 1: worse).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) member_regret: Option<f64>,
}

impl Report {
    /// A readable multi-line report (the `eval` command without `--json`).
    pub fn render(&self, title: &str) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "{title}: {} examples", self.examples);
        let _ = writeln!(
            s,
            "  accuracy {:.4}   micro-F1 {:.4}   macro-F1 {:.4}",
            self.accuracy, self.micro_f1, self.macro_f1
        );
        if let (Some(auc), Some(p)) = (self.roc_auc, &self.positive_label) {
            let _ = writeln!(
                s,
                "  ROC AUC {auc:.5}   1-ROCA {:.3} %   (positive class {p:?})",
                (1.0 - auc) * 100.0
            );
        }
        if let Some(r) = &self.ranking {
            let _ = writeln!(
                s,
                "  positives missed at 0.1 % / 0.01 % false positives: {:.3} % / {:.3} %   lam {:.3} %",
                r.missed_at_0_1_percent_fp, r.missed_at_0_01_percent_fp, r.lam_percent
            );
        }
        if let Some(members) = &self.members {
            let _ = writeln!(s, "  each member alone (1-ROCA %, spam missed at 0.1 % FP, errors):");
            for (name, r) in members {
                let pct = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.4}"));
                let (roca, missed) = (pct(r.one_minus_roca_percent), pct(r.missed_at_0_1_percent_fp));
                let _ = writeln!(s, "    {name:<12} {roca:>8} {missed:>8} {:>6}", r.errors);
            }
            if let Some(regret) = self.member_regret {
                let _ = writeln!(s, "  regret: the stack ranks at {regret:.2}x its best member");
            }
        }
        let _ = writeln!(
            s,
            "  last {} examples: accuracy {:.4}   macro-F1 {:.4}",
            self.window.examples, self.window.accuracy, self.window.macro_f1
        );
        let width = self
            .per_class
            .iter()
            .map(|(n, _)| n.chars().count())
            .max()
            .unwrap_or(5)
            .clamp(5, 32);
        let _ = writeln!(s, "  {:<width$}  precision  recall     F1  support", "class");
        for (name, c) in &self.per_class {
            let _ = writeln!(
                s,
                "  {:<width$}     {:.4}  {:.4} {:.4}  {:>7}",
                truncate(name, width),
                c.precision,
                c.recall,
                c.f1,
                c.support
            );
        }
        if let Some(conf) = &self.confusion
            && conf.labels.len() <= 25
        {
            let _ = writeln!(s, "  confusion (rows gold, columns predicted; '-' = no prediction):");
            let cw = 7;
            let _ = write!(s, "  {:<width$}", "");
            for l in &conf.labels {
                let _ = write!(s, " {:>cw$}", truncate(l, cw));
            }
            let _ = writeln!(s, " {:>cw$}", "-");
            for (l, row) in conf.labels.iter().zip(&conf.matrix) {
                let _ = write!(s, "  {:<width$}", truncate(l, width));
                for v in row {
                    let _ = write!(s, " {v:>cw$}");
                }
                let _ = writeln!(s);
            }
        }
        s
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// ROC AUC by the rank-sum (Mann-Whitney) statistic, ties counted half.
/// `None` unless both classes occur.
pub(crate) fn roc_auc(pairs: &[(f32, bool)]) -> Option<f64> {
    let pos = pairs.iter().filter(|p| p.1).count() as f64;
    let neg = pairs.len() as f64 - pos;
    if pos == 0.0 || neg == 0.0 {
        return None;
    }
    let mut sorted: Vec<(f32, bool)> = pairs
        .iter()
        .map(|&(s, p)| (if s.is_nan() { f32::MIN } else { s }, p))
        .collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j < sorted.len() && sorted[j].0 == sorted[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j share their mean.
        let mean_rank = (i + 1 + j) as f64 / 2.0;
        rank_sum += mean_rank * sorted[i..j].iter().filter(|p| p.1).count() as f64;
        i = j;
    }
    Some((rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg))
}

pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub(crate) mod drift;
pub(crate) mod members;
pub(crate) mod noise;
pub(crate) mod ranking;
pub(crate) mod users;

#[cfg(test)]
mod tests;
