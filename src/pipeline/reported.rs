//! Reported messages: a bounded memory, by fingerprint, of the labels
//! that reporters in good standing gave each message, consulted before the
//! model, so that one report corrects the message's exact copies at once
//! (as rspamd's fuzzy storage and Razor do for the copies of a reported
//! spam), however far the linear model has still to move, and even while
//! label trust down-weights that label in it.
//!
//! Each message keeps a majority vote of its labels (Boyer and Moore's:
//! the leading class and its lead), so a stream that repeats a text holds
//! its copies to what most of their labels say: one flipped label among a
//! text's many does not turn its copies (the random flips of
//! `scripts/feedback_noise.py` cost SMS a fifth more errors when the
//! latest label won). A copy takes the leading class only where the model
//! disagrees with it.
//!
//! Owns the memory and the fingerprint; the pipeline decides what votes
//! and how a recalled label moves a prediction ([`recalled`]).
//! Single-label tasks only: a label set has no one side to move to.

use hashlink::LinkedHashMap;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::Pipeline;
use super::trust::ANONYMOUS;
use crate::model::{Scored, argmax};

/// The fingerprint's seed. Fingerprints are checkpointed: changing the
/// seed or the hash forgets every report of older checkpoints.
const SEED: u64 = 0x636c_6173_7369_6679;

/// The fingerprint of a message: xxh3-64 of its text as the model reads
/// it (for an e-mail, the document its views render).
pub(super) fn fingerprint(text: &str) -> u64 {
    xxh3_64_with_seed(text.as_bytes(), SEED)
}

/// A message's fingerprints: its text's, which every user's labels vote
/// on, and for a message for a named user, its text's for that user,
/// which only that user's labels vote on. A copy for a user takes their
/// own vote first: one user's "spam" on a newsletter does not turn the
/// copy of another user who labelled it otherwise, while spam one user
/// reported still protects everyone who did not say.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Print {
    shared: u64,
    personal: Option<u64>,
}

impl Print {
    /// The prints of a text of fingerprint `shared`, for the user of key
    /// `user` if any.
    pub(super) fn new(shared: u64, user: Option<u64>) -> Self {
        Print {
            shared,
            personal: user.map(|u| crate::features::splitmix(shared ^ u.rotate_left(17))),
        }
    }

    /// Both prints, the user's first.
    pub(super) fn each(self) -> impl Iterator<Item = u64> {
        self.personal.into_iter().chain(std::iter::once(self.shared))
    }
}

/// A message's vote: the leading class and how many labels it leads by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Vote {
    pub class: u32,
    pub lead: u32,
}

/// The memory: fingerprint to vote, the least recently labeled first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reported {
    map: LinkedHashMap<u64, Vote, foldhash::fast::FixedState>,
    /// Entries dropped to keep to the cap.
    pub evicted: u64,
}

impl Reported {
    /// Rebuilds a memory from its entries, oldest first.
    pub fn from_entries(entries: impl IntoIterator<Item = (u64, Vote)>, evicted: u64) -> Self {
        let mut r = Reported {
            evicted,
            ..Self::default()
        };
        r.map.extend(entries.into_iter().filter(|(_, v)| v.lead > 0));
        r
    }

    /// The class most labels of the message of fingerprint `fp` gave.
    pub fn recall(&self, fp: u64) -> Option<usize> {
        self.map.get(&fp).map(|v| v.class as usize)
    }

    /// Counts a label `class` for `fp`, which becomes the newest entry; a
    /// label against the leading class takes one from its lead, and a lead
    /// of 0 forgets the message. Drops the oldest past `cap` (0: nothing
    /// is remembered).
    pub fn vote(&mut self, fp: u64, class: usize, cap: usize) {
        if cap == 0 {
            return;
        }
        let class = class as u32;
        let vote = match self.map.remove(&fp) {
            None => Vote { class, lead: 1 },
            Some(v) if v.class == class => Vote {
                lead: v.lead.saturating_add(1),
                ..v
            },
            Some(v) if v.lead > 1 => Vote { lead: v.lead - 1, ..v },
            Some(_) => return,
        };
        self.map.insert(fp, vote);
        while self.map.len() > cap {
            self.map.pop_front();
            self.evicted += 1;
        }
    }

    /// Takes back a label `class` that [`Reported::vote`] counted for
    /// `fp` (a label replaced or forgotten): the lead it gave, or the lead
    /// it took from another class. A message whose vote had tied (and was
    /// forgotten) or left the memory is left as it is.
    pub fn unvote(&mut self, fp: u64, class: usize) {
        let class = class as u32;
        let Some(v) = self.map.get_mut(&fp) else {
            return;
        };
        if v.class != class {
            v.lead = v.lead.saturating_add(1);
        } else if v.lead > 1 {
            v.lead -= 1;
        } else {
            self.map.remove(&fp);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The entries, oldest first (for checkpoints).
    pub fn entries(&self) -> impl Iterator<Item = (u64, Vote)> + '_ {
        self.map.iter().map(|(&fp, &v)| (fp, v))
    }
}

/// Moves a single-label prediction to the reported `class`: the class
/// takes the predicted class's raw score (and probability) and gives it
/// its own, so the model's confidence is kept and set on the reported
/// side. A prediction already on that side is left as it is.
pub(super) fn recalled(scored: &mut Scored, class: usize) {
    if class >= scored.raw.len() {
        return;
    }
    let top = argmax(&scored.raw);
    if top != class {
        scored.raw.swap(top, class);
        scored.scores.swap(top, class);
    }
    scored.labels.clear();
    scored.labels.push(class);
}

impl Pipeline {
    /// Takes back the vote of a label `class` for the message of
    /// fingerprints `fp` (a label replaced or forgotten).
    pub(super) fn unvote(&mut self, fp: Print, class: usize) {
        for p in fp.each() {
            self.predictor.reported.unvote(p, class);
        }
    }

    /// Counts the label `gold` of the message of fingerprint `fp`, learned
    /// with `weight` from `reporter`, in the message's vote: single-label
    /// tasks, reporters trusted or in good standing
    /// ([`super::Reporter::in_good_standing`]), labels not held. Returns
    /// whether it voted.
    pub(super) fn note_report(
        &mut self,
        fp: Option<Print>,
        gold: &[usize],
        weight: Option<f32>,
        reporter: Option<&str>,
    ) -> bool {
        let (Some(fp), &[class], Some(_)) = (fp, gold, weight) else {
            return false;
        };
        let name = reporter.unwrap_or(ANONYMOUS);
        let votes = self.cfg.trust.trusts(name)
            || self
                .ledger
                .reporters()
                .get(name)
                .is_none_or(super::Reporter::in_good_standing);
        if votes {
            for p in fp.each() {
                self.predictor.reported.vote(p, class, self.cfg.trust.reported);
            }
        }
        votes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_keeps_its_majority_and_the_newest_are_kept() {
        let mut r = Reported::default();
        for fp in 0..5 {
            r.vote(fp, 1, 3);
        }
        assert_eq!((r.len(), r.evicted), (3, 2));
        assert_eq!(r.recall(1), None);
        assert_eq!(r.recall(4), Some(1));
        // Three labels of 0 against one of 1: 0 leads by 2 (the first
        // label against the lead of 1 forgets it).
        for c in [0, 0, 0] {
            r.vote(2, c, 3);
        }
        assert_eq!(r.recall(2), Some(0));
        r.vote(2, 1, 3);
        assert_eq!(r.recall(2), Some(0));
        // A tie forgets it; the next label leads again.
        r.vote(2, 1, 3);
        assert_eq!(r.recall(2), None);
        r.vote(2, 1, 3);
        assert_eq!(r.recall(2), Some(1));
        let back = Reported::from_entries(r.entries(), r.evicted);
        assert_eq!(back, r);
        r.vote(9, 1, 0);
        assert_eq!(r.recall(9), None);
    }

    use super::super::tests::pipeline;
    use super::super::{DEFAULT_REPORTED, Outcome, PipelineConfig, Prediction, TrustConfig};

    fn predict(p: &mut super::Pipeline, id: &str, text: &str) -> Prediction {
        let line = serde_json::json!({"id": id, "text": text}).to_string();
        match p.handle(line.as_bytes(), &|| String::new(), 0) {
            Outcome::Predicted(pred) => pred,
            other => panic!("{other:?}"),
        }
    }

    /// A pipeline sure that anything with "prize" in it is spam.
    fn confident(reported: usize) -> super::Pipeline {
        let trust = TrustConfig {
            reported,
            ..TrustConfig::default()
        };
        let mut p = pipeline(PipelineConfig {
            trust,
            ..PipelineConfig::default()
        });
        for i in 0..200 {
            let (text, label) = match i % 2 {
                0 => (format!("win a cash prize now {i}"), "spam"),
                _ => (format!("lunch at noon tomorrow {i}"), "ham"),
            };
            let line = serde_json::json!({"text": text, "label": label}).to_string();
            p.handle(line.as_bytes(), &|| String::new(), 0);
        }
        p
    }

    /// One label of a confident mistake, from a reporter in good
    /// standing, puts the message's exact copy on its side at once, with
    /// the model's own confidence; the linear model alone does not move
    /// that far (checked with the memory off); and the memory survives a
    /// checkpoint.
    #[test]
    fn one_report_corrects_the_copy_of_a_confident_mistake() {
        // Only words learned 100 times each: one more label moves it little.
        let text = "win a cash prize now, win a cash prize now";
        for reported in [0, DEFAULT_REPORTED] {
            let mut p = confident(reported);
            let first = predict(&mut p, "m-1", text);
            assert_eq!(first.labels, ["spam"]);
            let label = br#"{"id": "m-1", "label": "ham", "reporter": "u-1"}"#;
            assert!(matches!(
                p.handle(label, &|| String::new(), 0),
                Outcome::FeedbackMatched { .. }
            ));
            let copy = predict(&mut p, "c-1", text);
            if reported == 0 {
                // The model alone is still wrong on the copy: what the
                // memory corrects is not corrected without it.
                assert_eq!(copy.labels, ["spam"], "the model alone moved: the test shows nothing");
                continue;
            }
            assert_eq!(copy.labels, ["ham"]);
            let margin = |pred: &Prediction, c: &str| pred.margins.iter().find(|m| m.0 == c).unwrap().1;
            // The model's own (smaller, still wrong) confidence, set on
            // the reported side.
            assert!(margin(&copy, "ham") > 0.0 && margin(&copy, "ham") < margin(&first, "spam"));
            assert_eq!(margin(&copy, "spam"), -margin(&copy, "ham"));
            // Another message is untouched.
            assert_eq!(predict(&mut p, "x", "win a cash prize now 4").labels, ["spam"]);
            let (back, _) =
                crate::checkpoint::restore(crate::checkpoint::capture(&p, &Default::default()), p.config().clone())
                    .unwrap();
            assert_eq!(back.reported(), p.reported());
            assert_eq!(back.reported().recall(fingerprint(text)), Some(1));
        }
    }

    /// Per user (issue 49): one user's report protects everyone who did
    /// not say, but a user who labelled a copy otherwise keeps their own
    /// label, and so does the first user.
    #[test]
    fn a_users_own_label_wins_over_another_users_report() {
        let text = "win a cash prize now, win a cash prize now";
        let mut p = confident(DEFAULT_REPORTED);
        let for_user = |p: &mut super::Pipeline, id: &str, user: &str| {
            let line = serde_json::json!({"id": id, "text": text, "user": user}).to_string();
            match p.handle(line.as_bytes(), &|| String::new(), 0) {
                Outcome::Predicted(pred) => pred.labels,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(for_user(&mut p, "a-1", "a"), ["spam"]);
        p.handle(
            br#"{"id": "a-1", "label": "ham", "reporter": "u-1"}"#,
            &|| String::new(),
            0,
        );
        assert_eq!(for_user(&mut p, "c-1", "c"), ["ham"], "a's report protects c");
        assert_eq!(for_user(&mut p, "b-1", "b"), ["ham"]);
        p.handle(
            br#"{"id": "b-1", "label": "spam", "reporter": "u-2"}"#,
            &|| String::new(),
            0,
        );
        assert_eq!(for_user(&mut p, "b-2", "b"), ["spam"], "b's own label");
        assert_eq!(for_user(&mut p, "a-2", "a"), ["ham"], "a's own label");
    }

    #[test]
    fn a_recalled_class_takes_the_prediction_and_its_confidence() {
        let mut s = Scored {
            scores: vec![0.9, 0.1],
            raw: vec![3.0, -3.0],
            labels: vec![0],
            probabilities: true,
            fused: None,
            stacked: None,
        };
        recalled(&mut s, 1);
        assert_eq!(
            (s.raw.as_slice(), s.scores.as_slice(), s.labels.as_slice()),
            (&[-3.0, 3.0][..], &[0.1, 0.9][..], &[1][..])
        );
        recalled(&mut s, 1);
        assert_eq!(s.raw, [-3.0, 3.0]);
        assert_ne!(fingerprint("win cash"), fingerprint("win cash "));
    }
}
