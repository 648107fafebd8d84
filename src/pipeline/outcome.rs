//! What the pipeline hands a transport for one message: an [`Outcome`], and
//! for an unlabeled message the [`Prediction`] to publish in the output
//! contract's JSON form. Owns that form; knows no transport.

use crate::message::Bad;

/// One feature of an explanation.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Contribution {
    /// The n-gram: words as they are tokenized ("free entry"), character
    /// n-grams quoted (`c:"ree "`).
    pub feature: String,
    /// What it adds to the label's score.
    pub contribution: f32,
}

/// What became of one message.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// A labeled example, counted; `taught` when it was learned, not when
    /// its label was held (its reporter's trust: docs/feedback.md) or
    /// declined (under `eval --label-budget`, learned only if the review
    /// asked for it: see [`super::Driver::budgets_labels`]).
    Learned { correct: bool, taught: bool },
    /// An unlabeled message's prediction, to publish.
    Predicted(Prediction),
    /// A test-split example, scored without learning (or held back for
    /// a driver: [`super::Driver::test`]).
    Test,
    /// A late label joined to its message; `taught` when it was learned,
    /// not when it was held (its reporter's trust), as for
    /// [`Outcome::Learned`]; `correction` when it replaced the message's
    /// label (or, held, would).
    FeedbackMatched {
        correct: Option<bool>,
        correction: bool,
        taught: bool,
    },
    /// A late label whose message is not (or no longer) in the cache.
    FeedbackUnmatched,
    /// A label that says again what was learned for its message (or
    /// held on it, from the same reporter): nothing learned.
    Repeated,
    /// A forget: `found` when its message was in the record (and its label
    /// taken back, unless its reporter may not).
    Forgotten { found: bool },
    /// Bad input, for the dead-letter output.
    Bad(Bad),
    /// A blank line.
    Skipped,
    /// A message this process's role leaves to another: a labeled one or
    /// feedback on a predictor, an unlabeled one on a learner (kept there
    /// for its late label).
    Passed,
}

/// A prediction to publish.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    pub id: String,
    pub labels: Vec<String>,
    pub scores: Vec<(String, f32)>,
    /// Per class, the model's raw margin, unrounded ([`crate::model::Model::margins`]).
    pub margins: Vec<(String, f32)>,
    pub multilabel: bool,
    pub model_version: u64,
    /// The features that pushed it to its label most (`--explain`).
    pub explanation: Option<Vec<Contribution>>,
    /// With an explanation, of a binary model's stack: each member's share
    /// of the margin toward the label, and the bias's, largest first
    /// ([`crate::model::Model::member_shares`]).
    pub members: Option<Vec<(String, f32)>>,
    /// In the uncertain band (see [`super::Review`]).
    pub uncertain: bool,
    /// The message's text, when it is to be reviewed (asked for within the
    /// review budget): the transport writes [`Prediction::write_review_json`].
    pub review: Option<String>,
    /// Who the message is for, when it said: written beside its id (a
    /// reviewer of personal mail needs to know whose it is).
    pub user: Option<String>,
}

impl Prediction {
    /// The JSON line of the output contract (without the newline); an
    /// uncertain prediction carries `"uncertain": true`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        self.write(out, None);
    }

    /// The JSON line of the review output (without the newline): the
    /// prediction's fields and the message's `"text"`, for a person to
    /// label (the label goes back as feedback, `{"id": ..., "label": ...}`).
    /// Nothing is written unless the prediction is to be reviewed.
    pub fn write_review_json(&self, out: &mut Vec<u8>) {
        if let Some(text) = &self.review {
            self.write(out, Some(text));
        }
    }

    fn write(&self, out: &mut Vec<u8>, text: Option<&str>) {
        use serde::ser::{SerializeMap, Serializer};
        struct Scores<'a>(&'a [(String, f32)]);
        impl serde::Serialize for Scores<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (k, v) in self.0 {
                    m.serialize_entry(k, &((*v as f64 * 1e6).round() / 1e6))?;
                }
                m.end()
            }
        }
        /// Unrounded: f32's shortest form, which reads back exactly.
        struct Margins<'a>(&'a [(String, f32)]);
        impl serde::Serialize for Margins<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (k, v) in self.0 {
                    // JSON has no infinities: a margin is finite unless the
                    // model's weights overflowed.
                    let v = if v.is_finite() { *v } else { v.signum() * f32::MAX };
                    m.serialize_entry(k, &v)?;
                }
                m.end()
            }
        }
        struct Explained<'a>(&'a [Contribution]);
        impl serde::Serialize for Explained<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeSeq;
                #[derive(serde::Serialize)]
                struct One<'a> {
                    feature: &'a str,
                    contribution: f64,
                }
                let mut seq = s.serialize_seq(Some(self.0.len()))?;
                for c in self.0 {
                    let contribution = (c.contribution as f64 * 1e6).round() / 1e6;
                    seq.serialize_element(&One {
                        feature: &c.feature,
                        contribution,
                    })?;
                }
                seq.end()
            }
        }
        #[derive(serde::Serialize)]
        struct Out<'a> {
            id: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            user: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            text: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            label: Option<Option<&'a str>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            labels: Option<&'a [String]>,
            scores: Scores<'a>,
            margins: Margins<'a>,
            model_version: u64,
            #[serde(skip_serializing_if = "Option::is_none")]
            explanation: Option<Explained<'a>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            members: Option<Scores<'a>>,
            #[serde(skip_serializing_if = "std::ops::Not::not")]
            uncertain: bool,
        }
        let o = Out {
            id: &self.id,
            user: self.user.as_deref(),
            text,
            label: (!self.multilabel).then(|| self.labels.first().map(String::as_str)),
            labels: self.multilabel.then_some(&self.labels[..]),
            scores: Scores(&self.scores),
            margins: Margins(&self.margins),
            model_version: self.model_version,
            explanation: self.explanation.as_deref().map(Explained),
            members: self.members.as_deref().map(Scores),
            uncertain: self.uncertain,
        };
        // Writing to a Vec cannot fail, and every key is a string.
        let _ = serde_json::to_writer(&mut *out, &o);
    }
}
