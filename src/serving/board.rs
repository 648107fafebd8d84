//! What a screen shows of the daemon (the console, `--console-addr`): the
//! daemon's status as the loop last posted it, a bounded series of its
//! figures over time, and the last predictions made (by the stream and by
//! requests: the history), each with what a person needs to judge it.
//! Written by the loop and by the copies, read by the console's requests;
//! every part is bounded (`--console-history`), and nothing of it is
//! checkpointed: a restart starts a fresh screen.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::lock;
use crate::eval::drift::Watched;
use crate::model::stack::Member;
use crate::pipeline::{Contribution, Pipeline, Prediction, Raw};
use crate::pool::Instance;

/// How often the loop posts its status (and a point of the series).
pub(crate) const POST_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Points kept in the series: an hour of posts (the oldest dropped first).
pub(crate) const SERIES_POINTS: usize = 1800;

/// The longest text a history entry keeps (a message's start).
pub(crate) const ENTRY_TEXT_BYTES: usize = 4096;

/// What a screen shows of a message as its source gave it, read once:
/// its text (a JSON message's "text", or a raw e-mail's start), and
/// whether it is a raw e-mail, with its bytes when they are within a
/// history entry's cut (a longer one is never decoded or copied: its row
/// teaches by id).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Shown<'a> {
    pub text: Option<Cow<'a, str>>,
    /// `Some` for a raw e-mail; within it, the e-mail whole when it fits.
    pub mail: Option<Option<Cow<'a, [u8]>>>,
}

impl<'a> Shown<'a> {
    /// What a screen shows of `raw`; its text only when `text` asks for it
    /// (a JSON message is parsed only when its text is asked for or it
    /// carries an e-mail).
    pub(crate) fn of(raw: Raw<'a>, text: bool) -> Shown<'a> {
        #[derive(serde::Deserialize)]
        struct Fields<'a> {
            #[serde(borrow)]
            text: Option<Cow<'a, str>>,
            #[serde(borrow)]
            email: Option<Cow<'a, str>>,
            #[serde(borrow)]
            email_base64: Option<Cow<'a, str>>,
        }
        let fits = |n: usize| n <= ENTRY_TEXT_BYTES;
        let json = match raw {
            Raw::Email { raw, .. } => {
                let head = &raw[..raw.len().min(ENTRY_TEXT_BYTES)];
                return Shown {
                    text: text.then(|| String::from_utf8_lossy(head)),
                    mail: Some(fits(raw.len()).then_some(Cow::Borrowed(raw))),
                };
            }
            Raw::Json { raw, .. } => raw,
        };
        if !text && memchr::memmem::find(json, b"\"email").is_none() {
            return Shown::default();
        }
        let Ok(f) = serde_json::from_slice::<Fields<'a>>(json) else {
            return Shown::default();
        };
        let mail = match (f.email, f.email_base64) {
            (Some(e), _) => Some(fits(e.len()).then(|| match e {
                Cow::Borrowed(e) => Cow::Borrowed(e.as_bytes()),
                Cow::Owned(e) => Cow::Owned(e.into_bytes()),
            })),
            // Decoded only when its decoded length may fit.
            (None, Some(b64)) => Some((b64.len() / 4 * 3 <= ENTRY_TEXT_BYTES).then(|| decode(&b64)).flatten()),
            (None, None) => None,
        };
        Shown {
            text: f.text.filter(|_| text),
            mail,
        }
    }
}

/// A base64 e-mail's bytes, if they decode.
fn decode(b64: &str) -> Option<Cow<'static, [u8]>> {
    use base64::Engine as _;
    let compact: String = b64.split_ascii_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .ok()
        .map(Cow::Owned)
}

/// The daemon's status, as the loop last posted it.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Status {
    pub role: String,
    pub model_version: u64,
    /// When the model's version last changed (ms since the epoch; 0:
    /// not since the start).
    pub model_changed_ms: u64,
    pub classes: Vec<String>,
    /// The stack's members and their weights (the bias as "bias").
    pub members: Vec<(String, f32)>,
    pub messages: u64,
    pub learned: u64,
    /// Labels taken: learned with their message, joined late, or held.
    pub labels: u64,
    pub predicted: u64,
    pub bad: u64,
    pub labels_forgotten: u64,
    pub progressive_examples: u64,
    pub progressive_accuracy: Option<f64>,
    pub window_accuracy: Option<f64>,
    pub roc_auc: Option<f64>,
    pub published_examples: u64,
    pub published_accuracy: Option<f64>,
    pub review_band: f64,
    pub uncertain: u64,
    /// Users' labeled messages by band of their labels: (band, examples,
    /// correct).
    pub user_bands: Vec<(String, u64, u64)>,
    /// Each drift test: (stream, statistic, detections).
    pub drift: Vec<(String, f64, u64)>,
    /// The reporters heard from most lately, at most [`REPORTERS_SHOWN`].
    pub reporters: Vec<ReporterRow>,
    pub at_ms: u64,
}

/// Reporters a status lists (the most lately heard from).
pub(crate) const REPORTERS_SHOWN: usize = 200;
/// A reporter's latest lessons a status names.
const LATEST_SHOWN: usize = 3;

/// One reporter, as the Reporters view lists it.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct ReporterRow {
    /// Its name ("" for labels that named nobody).
    pub name: String,
    pub trust: f32,
    /// Trusted outright (`--trusted-reporter`).
    pub trusted: bool,
    pub labels: u64,
    pub held: u64,
    pub overridden: u64,
    /// Its labels the record still holds: what forgetting it takes back.
    pub in_record: u64,
    /// The ids of its latest lessons the record holds, newest first.
    pub latest: Vec<String>,
}

/// `p`'s reporters heard from most lately, with what the record holds of
/// each (one pass over the record, newest first).
fn reporters_of(p: &Pipeline) -> Vec<ReporterRow> {
    let heard: Vec<(&str, &crate::pipeline::Reporter)> = p.reporters().iter().collect();
    let mut rows: Vec<ReporterRow> = (heard.iter().rev().take(REPORTERS_SHOWN))
        .map(|&(name, r)| ReporterRow {
            name: name.to_string(),
            trust: r.trust(),
            trusted: p.config().trust.trusts(name),
            labels: r.labels,
            held: r.held,
            overridden: r.overridden,
            ..ReporterRow::default()
        })
        .collect();
    let at: std::collections::HashMap<String, usize> =
        (rows.iter().enumerate()).map(|(i, r)| (r.name.clone(), i)).collect();
    for (id, e) in p.cache().entries().into_iter().rev() {
        let by = (e.taught.as_ref().map(|t| t.reporter.as_str())).or(e.held.as_ref().map(|h| h.reporter.as_str()));
        if let Some(row) = by.and_then(|b| at.get(b)).map(|&i| &mut rows[i]) {
            row.in_record += 1;
            if row.latest.len() < LATEST_SHOWN {
                row.latest.push(id.to_string());
            }
        }
    }
    rows
}

impl Status {
    /// `p`'s status, `messages` handled by this run.
    pub(crate) fn of(p: &Pipeline, messages: u64) -> Status {
        let c = p.counters();
        let m = p.model();
        let ratio = |examples: u64, v: f64| (examples > 0).then_some(v);
        let progressive = p.progressive();
        let (n, published) = (progressive.total().examples, p.published());
        let members = m.stack().map_or_else(Vec::new, |s| {
            let weights = Member::ALL.iter().map(|&m| (m.name().to_string(), s.weight(m)));
            weights.chain([("bias".to_string(), s.bias())]).collect()
        });
        let drift = Watched::ALL.iter().map(|&w| {
            let i = w as usize;
            (w.as_str().to_string(), p.drift().statistic(w), p.drift().detections[i])
        });
        Status {
            role: p.config().role.to_string(),
            model_version: m.version(),
            model_changed_ms: 0,
            classes: m.labels().names().to_vec(),
            members,
            messages,
            learned: c.learned,
            labels: c.labels_in_full + c.labels_down_weighted + c.labels_held,
            predicted: c.predicted,
            bad: c.bad_total(),
            labels_forgotten: c.labels_forgotten,
            progressive_examples: n,
            progressive_accuracy: ratio(n, progressive.total().accuracy()),
            window_accuracy: ratio(n, progressive.window().accuracy()),
            roc_auc: progressive.roc_auc(),
            published_examples: published.total().examples,
            published_accuracy: ratio(published.total().examples, published.total().accuracy()),
            review_band: p.review().band(),
            uncertain: c.uncertain,
            user_bands: p.user_bands().tallies().collect(),
            drift: drift.collect(),
            reporters: reporters_of(p),
            at_ms: crate::clock::now_ms(),
        }
    }
}

/// One point of the series: when, and the figures a chart draws (counts
/// are since the start: a chart draws their rates).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Point {
    pub at_ms: u64,
    pub messages: u64,
    pub learned: u64,
    /// Labels taken (learned or held): the stream's and every lesson's.
    pub labels: u64,
    /// Bad input, dead-lettered.
    pub bad: u64,
    pub progressive_accuracy: Option<f64>,
    pub window_accuracy: Option<f64>,
    pub published_accuracy: Option<f64>,
    pub roc_auc: Option<f64>,
    /// Predictions made, by predicted label (the stream's and requests').
    pub verdicts: Vec<(String, u64)>,
}

/// A message the stream dead-lettered, as the console lists it.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Dead {
    pub at_ms: u64,
    pub reason: &'static str,
    /// Its detail, cut to [`DEAD_DETAIL_BYTES`].
    pub detail: String,
}

/// Dead letters the board keeps (the oldest dropped first).
pub(crate) const DEAD_KEPT: usize = 100;
/// The longest detail a dead letter keeps.
const DEAD_DETAIL_BYTES: usize = 300;
/// Classes whose predictions the board counts apart (the rest: "other").
const VERDICTS_COUNTED: usize = 32;

/// A prediction the history keeps.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Seen {
    /// Its place in the history (grows by one a prediction).
    pub seq: u64,
    pub at_ms: u64,
    pub id: String,
    pub user: Option<String>,
    pub label: String,
    /// The predicted label's margin.
    pub margin: f32,
    pub uncertain: bool,
    /// Who asked: "stream", "request" (HTTP, spamd, rspamd), "scan" (the
    /// console's: kept apart from the review queue).
    pub source: &'static str,
    pub explanation: Vec<Contribution>,
    /// The message's start, or with `--console-keep-text false` its
    /// subject or first line only.
    pub text: String,
    /// What a person taught of it since: a label (`None` again once
    /// forgotten).
    pub taught: Option<String>,
    /// Who taught it (the reporter: a named reviewer, "console", a mail
    /// user).
    pub taught_by: Option<String>,
    /// It came as a raw e-mail: a lesson from its row carries [`Seen::email`]
    /// or, without it, names the message by id (never its shown text,
    /// which is the e-mail rendered).
    pub mail: bool,
    /// The raw e-mail whole, when it is UTF-8 within the entry's cut and
    /// the history keeps texts.
    pub email: Option<String>,
}

/// The history: the last predictions, at most `cap`. Entries are shared,
/// so that a console's search runs on a snapshot outside the lock, never
/// holding up the loop that records predictions.
#[derive(Debug, Default)]
struct History {
    entries: VecDeque<Arc<Seen>>,
    next: u64,
}

/// The screen's data (see the module's doc).
#[derive(Debug)]
pub(crate) struct Board {
    status: Mutex<Arc<Status>>,
    series: Mutex<VecDeque<Point>>,
    history: Mutex<History>,
    /// Predictions by predicted label, since the start.
    verdicts: Mutex<Vec<(String, u64)>>,
    /// The last dead letters, oldest first.
    dead: Mutex<VecDeque<Dead>>,
    /// The pool's instances as they last reported (none: no pool topic).
    pool: Mutex<Option<Vec<Instance>>>,
    /// Most predictions the history keeps.
    cap: usize,
    /// Whether a history entry keeps the message's start (else its first
    /// line).
    keep_text: bool,
}

impl Board {
    /// A board keeping `cap` predictions, their text when `keep_text`.
    pub(crate) fn new(cap: usize, keep_text: bool) -> Self {
        Board {
            status: Mutex::new(Arc::new(Status::default())),
            series: Mutex::new(VecDeque::new()),
            history: Mutex::new(History::default()),
            verdicts: Mutex::new(Vec::new()),
            dead: Mutex::new(VecDeque::new()),
            pool: Mutex::new(None),
            cap,
            keep_text,
        }
    }

    /// The loop posts `status`; a point of the series goes with it.
    pub(crate) fn post(&self, mut status: Status) {
        let before = lock(&self.status).clone();
        status.model_changed_ms = if status.model_version == before.model_version {
            before.model_changed_ms
        } else {
            status.at_ms
        };
        let point = Point {
            at_ms: status.at_ms,
            messages: status.messages,
            learned: status.learned,
            labels: status.labels,
            bad: status.bad,
            progressive_accuracy: status.progressive_accuracy,
            window_accuracy: status.window_accuracy,
            published_accuracy: status.published_accuracy,
            roc_auc: status.roc_auc,
            verdicts: lock(&self.verdicts).clone(),
        };
        *lock(&self.status) = Arc::new(status);
        let mut series = lock(&self.series);
        if series.len() >= SERIES_POINTS {
            series.pop_front();
        }
        series.push_back(point);
    }

    /// The status as last posted.
    pub(crate) fn status(&self) -> Arc<Status> {
        Arc::clone(&lock(&self.status))
    }

    /// The series, oldest first.
    pub(crate) fn series(&self) -> Vec<Point> {
        lock(&self.series).iter().cloned().collect()
    }

    /// Keeps a message the stream dead-lettered, and why.
    pub(crate) fn dead(&self, bad: &crate::message::Bad) {
        let detail = &bad.detail[..bad.detail.floor_char_boundary(DEAD_DETAIL_BYTES)];
        let mut dead = lock(&self.dead);
        if dead.len() >= DEAD_KEPT {
            dead.pop_front();
        }
        dead.push_back(Dead {
            at_ms: crate::clock::now_ms(),
            reason: bad.reason.as_str(),
            detail: detail.to_string(),
        });
    }

    /// The pool as its instances last reported, newest first.
    pub(crate) fn set_pool(&self, members: Vec<Instance>) {
        *lock(&self.pool) = Some(members);
    }

    /// The pool, if this process reads one.
    pub(crate) fn pool(&self) -> Option<Vec<Instance>> {
        lock(&self.pool).clone()
    }

    /// The last dead letters, newest first.
    pub(crate) fn dead_letters(&self) -> Vec<Dead> {
        lock(&self.dead).iter().rev().cloned().collect()
    }

    /// Counts a prediction of `label`.
    fn count_verdict(&self, label: &str) {
        let mut v = lock(&self.verdicts);
        let known = v.len() >= VERDICTS_COUNTED;
        let name = if known && !v.iter().any(|(l, _)| l == label) {
            "other"
        } else {
            label
        };
        match v.iter_mut().find(|(l, _)| l == name) {
            Some((_, n)) => *n += 1,
            None => v.push((name.to_string(), 1)),
        }
    }

    /// Keeps `p`, made for `source` from `text` (when known), in the
    /// history (the oldest entry goes past the bound); `mail`: it was a
    /// raw e-mail, with its bytes when they fit an entry ([`Shown::mail`]).
    pub(crate) fn saw(&self, p: &Prediction, text: Option<&str>, mail: Option<Option<&[u8]>>, source: &'static str) {
        let label = p.labels.first().map_or("", String::as_str);
        self.count_verdict(label);
        if self.cap == 0 {
            return;
        }
        let whole = (mail.flatten())
            .filter(|e| self.keep_text && e.len() <= ENTRY_TEXT_BYTES)
            .and_then(|e| std::str::from_utf8(e).ok())
            .map(str::to_string);
        let label = p.labels.first().cloned().unwrap_or_default();
        let margin = (p.margins.iter()).find(|(c, _)| *c == label).map_or(0.0, |&(_, m)| m);
        let text = text.map(|t| self.kept(t)).unwrap_or_default();
        let mut h = lock(&self.history);
        let seq = h.next;
        h.next += 1;
        if h.entries.len() >= self.cap {
            h.entries.pop_front();
        }
        h.entries.push_back(Arc::new(Seen {
            seq,
            at_ms: crate::clock::now_ms(),
            id: p.id.clone(),
            user: p.user.clone(),
            label,
            margin: if margin.is_finite() { margin } else { 0.0 },
            uncertain: p.uncertain,
            source,
            explanation: p.explanation.clone().unwrap_or_default(),
            text,
            taught: None,
            taught_by: None,
            mail: mail.is_some(),
            email: whole,
        }));
    }

    /// What of `text` an entry keeps.
    fn kept(&self, text: &str) -> String {
        let t = if self.keep_text {
            text
        } else {
            text.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
        };
        t[..t.floor_char_boundary(ENTRY_TEXT_BYTES)].to_string()
    }

    /// The entries, oldest first, as they stand: shared, taken in an
    /// instant.
    fn snapshot(&self) -> Vec<Arc<Seen>> {
        lock(&self.history).entries.iter().cloned().collect()
    }

    /// The entries that `keep` keeps, newest first, at most `limit`.
    pub(crate) fn history(&self, limit: usize, keep: impl Fn(&Seen) -> bool) -> Vec<Seen> {
        let all = self.snapshot();
        let kept = all.iter().rev().filter(|e| keep(e));
        kept.take(limit).map(|e| Seen::clone(e)).collect()
    }

    /// The entries that `keep` keeps, oldest first, at most `limit`, and
    /// how many it keeps in all (a queue and its length).
    pub(crate) fn oldest(&self, limit: usize, keep: impl Fn(&Seen) -> bool) -> (Vec<Seen>, usize) {
        let all = self.snapshot();
        let mut kept = all.iter().filter(|e| keep(e));
        let first: Vec<Seen> = kept.by_ref().take(limit).map(|e| Seen::clone(e)).collect();
        let n = first.len() + kept.count();
        (first, n)
    }

    /// The newest entry for message `id`.
    pub(crate) fn entry(&self, id: &str) -> Option<Seen> {
        let h = lock(&self.history);
        h.entries.iter().rev().find(|e| e.id == id).map(|e| Seen::clone(e))
    }

    /// Marks what reporter `by` taught of message `id` (a label, or
    /// `None`: taken back, so that it waits for review again).
    pub(crate) fn taught(&self, id: &str, what: Option<String>, by: &str) {
        let mut h = lock(&self.history);
        for e in h.entries.iter_mut().filter(|e| e.id == id) {
            let e = Arc::make_mut(e);
            e.taught.clone_from(&what);
            e.taught_by = what.is_some().then(|| by.to_string());
        }
    }

    /// Entries in the history.
    pub(crate) fn len(&self) -> usize {
        lock(&self.history).entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prediction(id: &str, label: &str, margin: f32) -> Prediction {
        Prediction {
            id: id.into(),
            labels: vec![label.into()],
            scores: Vec::new(),
            margins: vec![(label.into(), margin)],
            multilabel: false,
            model_version: 1,
            explanation: None,
            members: None,
            uncertain: margin < 1.0,
            review: None,
            user: None,
        }
    }

    /// A message is read once for the screen: its text when asked for,
    /// and an e-mail's bytes only when they fit an entry (a long base64
    /// e-mail is not decoded).
    #[test]
    fn a_message_is_shown_as_text_and_an_email_whole_only_within_the_cut() {
        use base64::Engine as _;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let json = |v: serde_json::Value| v.to_string();
        let short = b"Subject: hi\r\n\r\nbody".to_vec();
        let long = vec![b'x'; ENTRY_TEXT_BYTES + 10];
        let plain = json(serde_json::json!({"id": "a", "text": "hello there"}));
        assert_eq!(
            Shown::of(Raw::json(plain.as_bytes()), false),
            Shown::default(),
            "nothing read"
        );
        let shown = Shown::of(Raw::json(plain.as_bytes()), true);
        assert_eq!((shown.text.as_deref(), shown.mail), (Some("hello there"), None));
        for (line, whole) in [
            (
                json(serde_json::json!({"id": "b", "email": "Subject: hi\r\n\r\nbody"})),
                true,
            ),
            (json(serde_json::json!({"id": "c", "email_base64": b64(&short)})), true),
            (json(serde_json::json!({"id": "d", "email_base64": b64(&long)})), false),
        ] {
            let mail = Shown::of(Raw::json(line.as_bytes()), false).mail.expect("an e-mail");
            assert_eq!(mail.as_deref(), whole.then_some(&short[..]), "{line:.60}");
        }
        let raw = Shown::of(Raw::email(&long, "e", None), true);
        assert_eq!(
            (raw.mail, raw.text.map(|t| t.len())),
            (Some(None), Some(ENTRY_TEXT_BYTES))
        );
    }

    /// The history keeps the newest `cap` predictions, newest first, with
    /// the text's start or (privacy) its first line only, cut on a
    /// character.
    #[test]
    fn the_history_is_bounded_and_keeps_what_it_is_told() {
        let board = Board::new(3, true);
        for i in 0..5 {
            board.saw(
                &prediction(&format!("m{i}"), "spam", i as f32),
                Some("Subject\nbody"),
                None,
                "stream",
            );
        }
        let all = board.history(10, |_| true);
        assert_eq!(
            all.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
            ["m4", "m3", "m2"]
        );
        assert_eq!(
            (all[0].seq, all[0].margin, all[0].text.as_str()),
            (4, 4.0, "Subject\nbody")
        );
        let uncertain = board.history(10, |e| e.uncertain);
        assert!(uncertain.is_empty(), "margins 2 to 4 are certain");
        let (first, n) = board.oldest(1, |e| e.margin > 2.5);
        assert_eq!(
            (first[0].id.as_str(), n),
            ("m3", 2),
            "the oldest first, and how many in all"
        );
        board.taught("m3", Some("ham".into()), "ann");
        let m3 = board.entry("m3").unwrap();
        assert_eq!(
            (m3.taught.as_deref(), m3.taught_by.as_deref()),
            (Some("ham"), Some("ann"))
        );
        board.taught("m3", None, "ann");
        assert_eq!(
            board.oldest(10, |e| e.taught.is_none() && e.margin > 2.5).1,
            2,
            "forgotten, it waits again"
        );

        let mails = Board::new(2, true);
        let short = b"Subject: hi\r\n\r\nbody";
        mails.saw(
            &prediction("e1", "ham", 0.0),
            Some("hi body"),
            Some(Some(short)),
            "request",
        );
        mails.saw(&prediction("e2", "ham", 0.0), Some("big"), Some(None), "request");
        let (e1, e2) = (mails.entry("e1").unwrap(), mails.entry("e2").unwrap());
        assert_eq!((e1.mail, e1.email.as_deref()), (true, Some("Subject: hi\r\n\r\nbody")));
        assert_eq!((e2.mail, e2.email), (true, None), "past the cut: taught by id");

        let private = Board::new(3, false);
        let long = format!("\n  \nfirst line é\n{}", "x".repeat(10_000));
        private.saw(&prediction("p", "ham", 0.0), Some(&long), None, "request");
        assert_eq!(private.entry("p").unwrap().text, "first line é");
        let kept = Board::new(1, true);
        kept.saw(&prediction("k", "ham", 0.0), Some(&"é".repeat(5000)), None, "request");
        let text = kept.entry("k").unwrap().text;
        assert!(text.len() <= ENTRY_TEXT_BYTES && text.chars().all(|c| c == 'é'));
    }
}
