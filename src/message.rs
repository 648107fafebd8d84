//! The input contract: parsing raw message bytes into an example, a
//! prediction request or a feedback label, and the bounded set of reasons a
//! message can be refused for.

use std::fmt;

use serde::Deserialize;

use crate::email;

/// Default cap on a message's size in bytes.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The longest reporter name, in bytes.
pub const MAX_REPORTER_BYTES: usize = 128;

/// Why a message was refused: a bounded set, used as a metric label and in
/// dead-letter records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BadReason {
    InvalidUtf8,
    TooLarge,
    BadJson,
    WrongType,
    MissingText,
    BadLabel,
    TooManyClasses,
    BadReporter,
    BadEmail,
    BadUser,
}

impl BadReason {
    pub const ALL: [BadReason; 10] = [
        BadReason::InvalidUtf8,
        BadReason::TooLarge,
        BadReason::BadJson,
        BadReason::WrongType,
        BadReason::MissingText,
        BadReason::BadLabel,
        BadReason::TooManyClasses,
        BadReason::BadReporter,
        BadReason::BadEmail,
        BadReason::BadUser,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BadReason::InvalidUtf8 => "invalid_utf8",
            BadReason::TooLarge => "too_large",
            BadReason::BadJson => "bad_json",
            BadReason::WrongType => "wrong_type",
            BadReason::MissingText => "missing_text",
            BadReason::BadLabel => "bad_label",
            BadReason::TooManyClasses => "too_many_classes",
            BadReason::BadReporter => "bad_reporter",
            BadReason::BadEmail => "bad_email",
            BadReason::BadUser => "bad_user",
        }
    }

    pub fn index(self) -> usize {
        BadReason::ALL.iter().position(|&r| r == self).unwrap_or(0)
    }

    pub fn from_str_opt(s: &str) -> Option<BadReason> {
        BadReason::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl fmt::Display for BadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused message: the reason and a human-readable detail.
#[derive(Clone, Debug, PartialEq)]
pub struct Bad {
    pub reason: BadReason,
    pub detail: String,
}

impl Bad {
    pub fn new(reason: BadReason, detail: impl Into<String>) -> Self {
        Bad {
            reason,
            detail: detail.into(),
        }
    }
}

/// Gold labels of a message.
#[derive(Clone, Debug, PartialEq)]
pub enum Gold {
    /// `"label": "spam"`.
    One(String),
    /// `"labels": ["grain", "wheat"]` (possibly empty).
    Set(Vec<String>),
}

impl Gold {
    pub fn as_slice(&self) -> &[String] {
        match self {
            Gold::One(l) => std::slice::from_ref(l),
            Gold::Set(v) => v,
        }
    }

    pub fn into_vec(self) -> Vec<String> {
        match self {
            Gold::One(l) => vec![l],
            Gold::Set(v) => v,
        }
    }
}

/// Which part of a split data set a line belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Train,
    Test,
}

/// A parsed message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// Text with or without gold labels.
    Example {
        id: Option<String>,
        text: String,
        gold: Option<Gold>,
        split: Option<Split>,
        /// Who gave the label (`"reporter"`), if anyone said.
        reporter: Option<String>,
        /// A raw e-mail cut at one of its bounds ([`crate::email`]).
        cut: bool,
        /// It came as a raw e-mail (`"email"`, `"email_base64"`, or a
        /// raw e-mail record), not as text.
        email: bool,
        /// Who it is for (`"user"`), if anyone said: their own evidence
        /// joins the shared model's (docs/model.md).
        user: Option<String>,
    },
    /// A late gold label for an earlier message, who gave it, and who the
    /// message is for (when the message itself did not say).
    Feedback {
        id: String,
        gold: Gold,
        reporter: Option<String>,
        user: Option<String>,
    },
    /// `{"id": ..., "forget": true}`: undo what an earlier message's label
    /// taught, and drop its record (docs/feedback.md).
    Forget { id: String, reporter: Option<String> },
    /// `{"forget_reporter": R}`: undo every label of reporter R's that the
    /// record still holds (an operator taking a reporter back;
    /// docs/feedback.md); `reporter` is who asks.
    ForgetReporter { of: String, reporter: Option<String> },
}

impl Message {
    /// Whether it carries a label (a training example or a late label),
    /// or takes one back.
    pub fn has_label(&self) -> bool {
        matches!(
            self,
            Message::Example { gold: Some(_), .. }
                | Message::Feedback { .. }
                | Message::Forget { .. }
                | Message::ForgetReporter { .. }
        )
    }

    /// Names `reporter` as the one who gave this message's label (a Kafka
    /// record header, which wins over the JSON field: the producer that
    /// sets it knows who sent the label); an unlabeled message has none.
    pub fn set_reporter(&mut self, name: String) {
        match self {
            Message::Example {
                gold: Some(_),
                reporter,
                ..
            }
            | Message::Feedback { reporter, .. }
            | Message::Forget { reporter, .. }
            | Message::ForgetReporter { reporter, .. } => *reporter = Some(name),
            Message::Example { gold: None, .. } => {}
        }
    }

    /// Names `user` as the one the message is for (a Kafka record header,
    /// which wins over the JSON field).
    pub fn set_user(&mut self, name: String) {
        match self {
            Message::Example { user, .. } | Message::Feedback { user, .. } => *user = Some(name),
            Message::Forget { .. } | Message::ForgetReporter { .. } => {}
        }
    }
}

/// Checks a user's name: a non-empty string of at most
/// [`MAX_REPORTER_BYTES`] without control characters (as a reporter's).
pub fn check_user(name: &str) -> Result<(), Bad> {
    check_reporter(name).map_err(|_| {
        let shown: String = name.chars().take(40).collect();
        Bad::new(
            BadReason::BadUser,
            format!("user {shown:?} is empty, longer than {MAX_REPORTER_BYTES} bytes or has control characters"),
        )
    })
}

/// A user header's bytes as a checked name.
pub fn user_from_header(bytes: &[u8]) -> Result<String, Bad> {
    let name = std::str::from_utf8(bytes).map_err(|_| Bad::new(BadReason::BadUser, "the user header is not UTF-8"))?;
    check_user(name)?;
    Ok(name.to_string())
}

/// Checks a reporter's name: a non-empty string of at most
/// [`MAX_REPORTER_BYTES`] without control characters.
pub fn check_reporter(name: &str) -> Result<(), Bad> {
    if name.is_empty() || name.len() > MAX_REPORTER_BYTES || name.chars().any(char::is_control) {
        let shown: String = name.chars().take(40).collect();
        return Err(Bad::new(
            BadReason::BadReporter,
            format!("reporter {shown:?} is empty, longer than {MAX_REPORTER_BYTES} bytes or has control characters"),
        ));
    }
    Ok(())
}

/// A reporter header's bytes as a checked name.
pub fn reporter_from_header(bytes: &[u8]) -> Result<String, Bad> {
    let name =
        std::str::from_utf8(bytes).map_err(|_| Bad::new(BadReason::BadReporter, "the reporter header is not UTF-8"))?;
    check_reporter(name)?;
    Ok(name.to_string())
}

/// An id or a label: a string, an integer or a boolean, kept as its text.
/// Read by a visitor of its own rather than `#[serde(untagged)]`, which
/// buffers every value before trying each variant (an allocation and a
/// second pass for each id and label).
struct Scalar(String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, an integer or a boolean")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Scalar, E> {
                Ok(Scalar(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
                // As `#[serde(untagged)]` over i64 had it: past i64, no integer.
                i64::try_from(v)
                    .map(|v| Scalar(v.to_string()))
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Scalar {
    fn into_string(self) -> String {
        self.0
    }
}

#[derive(Deserialize)]
#[serde(expecting = "a JSON object with a \"text\" string")]
struct Raw {
    id: Option<Scalar>,
    /// `None`: absent; `Some(None)`: `null`, which is not a string (the
    /// input contract requires one) and must not pass for an absent text,
    /// which would make the message a late label.
    #[serde(default, deserialize_with = "present")]
    text: Option<Option<String>>,
    label: Option<Scalar>,
    labels: Option<Vec<Scalar>>,
    split: Option<String>,
    /// `None`: absent; `Some(None)`: present but not a string.
    #[serde(default, deserialize_with = "present")]
    reporter: Option<AnyString>,
    /// `true`: a feedback line that takes its message's label back.
    forget: Option<bool>,
    /// A feedback line that takes back every label of this reporter's.
    /// `None`: absent; `Some(None)`: not a string.
    #[serde(default, deserialize_with = "present")]
    forget_reporter: Option<AnyString>,
    /// Who the message is for. `None`: absent; `Some(None)`: not a string.
    #[serde(default, deserialize_with = "present")]
    user: Option<AnyString>,
    /// A raw RFC 5322 message in place of "text": as a string ...
    email: Option<String>,
    /// ... or as its bytes in base64 (8-bit mail).
    email_base64: Option<String>,
}

/// How messages are read: the size cap and the views of a raw e-mail.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    pub max_bytes: usize,
    pub email_views: email::Views,
}

impl Reading {
    pub fn new(max_bytes: usize) -> Self {
        Reading {
            max_bytes,
            email_views: email::Views::default(),
        }
    }
}

/// A message's document, and what its e-mail (if it was one) said.
struct Document {
    text: Option<String>,
    email: bool,
    cut: bool,
    message_id: Option<String>,
}

/// The document of a message's `"text"`, `"email"` or `"email_base64"`
/// (exactly one of them; none: `None`), whether it was an e-mail and one
/// cut, and an e-mail's Message-ID.
fn document(raw: &mut Raw, views: email::Views) -> Result<Document, Bad> {
    let text = match raw.text.take() {
        Some(None) => return Err(Bad::new(BadReason::WrongType, "\"text\" is null; it must be a string")),
        Some(Some(text)) => Some(text),
        None => None,
    };
    let bytes = match (text, raw.email.take(), raw.email_base64.take()) {
        (text, None, None) => {
            return Ok(Document {
                text,
                email: false,
                cut: false,
                message_id: None,
            });
        }
        (None, Some(e), None) => e.into_bytes(),
        (None, None, Some(b)) => {
            use base64::Engine as _;
            let compact: String = b.split_ascii_whitespace().collect();
            base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map_err(|e| Bad::new(BadReason::BadEmail, format!("\"email_base64\" is not base64: {e}")))?
        }
        _ => {
            return Err(Bad::new(
                BadReason::WrongType,
                "a message has one of \"text\", \"email\" and \"email_base64\"",
            ));
        }
    };
    let r = email::render(&bytes, views).map_err(|e| Bad::new(BadReason::BadEmail, e.to_string()))?;
    Ok(Document {
        text: Some(r.text),
        email: true,
        cut: r.cut,
        message_id: r.message_id,
    })
}

/// A field that must be a string: any other JSON value is kept as `None`
/// (and refused by the caller with a reason of its own), not a parse error.
struct AnyString(Option<String>);

impl<'de> Deserialize<'de> for AnyString {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Ok(AnyString(match v {
            serde_json::Value::String(s) => Some(s),
            _ => None,
        }))
    }
}

/// A field that is present, `null` or not: absent fields take the default.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The refusal of a message of `length` bytes over the cap of `max_bytes`.
pub fn too_large(length: u64, max_bytes: usize) -> Bad {
    Bad::new(
        BadReason::TooLarge,
        format!("message of {length} bytes is over the cap of {max_bytes}"),
    )
}

/// The `"reporter"` field, checked: absent, or a valid name.
/// A forget line: an id and nothing that a label or a message carries.
fn forget(mut raw: Raw, labeled: bool) -> Result<Message, Bad> {
    if labeled {
        return Err(Bad::new(
            BadReason::BadLabel,
            "\"forget\": true takes a label back; it carries none",
        ));
    }
    if raw.text.is_some() || raw.email.is_some() || raw.email_base64.is_some() {
        return Err(Bad::new(
            BadReason::WrongType,
            "\"forget\": true names an earlier message by its \"id\"; it carries no text",
        ));
    }
    let Some(id) = raw.id.take().map(Scalar::into_string) else {
        return Err(Bad::new(
            BadReason::MissingText,
            "\"forget\": true needs the message's \"id\"",
        ));
    };
    let reporter = reporter_field(raw.reporter.take())?;
    Ok(Message::Forget { id, reporter })
}

/// A line that forgets a reporter: its name and who asks, nothing else.
fn forget_reporter(mut raw: Raw, of: AnyString, labeled: bool) -> Result<Message, Bad> {
    if labeled || raw.id.is_some() || raw.text.is_some() || raw.email.is_some() || raw.email_base64.is_some() {
        return Err(Bad::new(
            BadReason::WrongType,
            "\"forget_reporter\" names a reporter whose labels to take back; it carries no id, label or text",
        ));
    }
    let Some(of) = reporter_field(Some(of))? else {
        return Err(Bad::new(BadReason::WrongType, "\"forget_reporter\" must be a string"));
    };
    let reporter = reporter_field(raw.reporter.take())?;
    Ok(Message::ForgetReporter { of, reporter })
}

/// The `"label"` or `"labels"` field, checked: absent, or valid labels.
fn gold_field(raw: &mut Raw) -> Result<Option<Gold>, Bad> {
    let gold = match (raw.label.take(), raw.labels.take()) {
        (Some(_), Some(_)) => {
            return Err(Bad::new(
                BadReason::BadLabel,
                "both \"label\" and \"labels\" are present",
            ));
        }
        (Some(l), None) => Some(Gold::One(l.into_string())),
        (None, Some(ls)) => Some(Gold::Set(ls.into_iter().map(Scalar::into_string).collect())),
        (None, None) => None,
    };
    if let Some(g) = &gold {
        check_labels(g.as_slice())?;
    }
    Ok(gold)
}

/// The `"user"` field, checked: absent, or a valid name.
fn user_field(field: Option<AnyString>) -> Result<Option<String>, Bad> {
    match field {
        None => Ok(None),
        Some(AnyString(None)) => Err(Bad::new(BadReason::BadUser, "\"user\" must be a string")),
        Some(AnyString(Some(name))) => check_user(&name).map(|()| Some(name)),
    }
}

fn reporter_field(field: Option<AnyString>) -> Result<Option<String>, Bad> {
    match field {
        None => Ok(None),
        Some(AnyString(None)) => Err(Bad::new(BadReason::BadReporter, "\"reporter\" must be a string")),
        Some(AnyString(Some(name))) => check_reporter(&name).map(|()| Some(name)),
    }
}

/// A raw e-mail record (Kafka `--input-format email`): the bytes are the
/// message; `id` (the record key) names it, else its Message-ID; `label`
/// (a record header) makes it a training example, from `reporter`.
pub fn parse_email(bytes: &[u8], id: Option<String>, label: Option<&[u8]>, reading: &Reading) -> Result<Message, Bad> {
    if bytes.len() > reading.max_bytes {
        return Err(too_large(bytes.len() as u64, reading.max_bytes));
    }
    let gold = match label {
        None => None,
        Some(l) => {
            let l =
                std::str::from_utf8(l).map_err(|_| Bad::new(BadReason::BadLabel, "the label header is not UTF-8"))?;
            check_labels(std::slice::from_ref(&l.to_string()))?;
            Some(Gold::One(l.to_string()))
        }
    };
    let r = email::render(bytes, reading.email_views).map_err(|e| Bad::new(BadReason::BadEmail, e.to_string()))?;
    Ok(Message::Example {
        id: id.or(r.message_id),
        text: r.text,
        gold,
        split: None,
        reporter: None,
        cut: r.cut,
        email: true,
        user: None,
    })
}

/// Labels must be non-empty, at most 256 bytes, without control characters.
pub fn check_labels(labels: &[String]) -> Result<(), Bad> {
    match labels
        .iter()
        .find(|l| l.is_empty() || l.len() > 256 || l.chars().any(char::is_control))
    {
        Some(bad) => Err(Bad::new(
            BadReason::BadLabel,
            format!("label {bad:?} is empty, longer than 256 bytes or has control characters"),
        )),
        None => Ok(()),
    }
}

/// Parses one message. `max_bytes` caps its size.
pub fn parse(bytes: &[u8], max_bytes: usize) -> Result<Message, Bad> {
    parse_with(bytes, &Reading::new(max_bytes))
}

/// Parses one message as `reading` says.
pub fn parse_with(bytes: &[u8], reading: &Reading) -> Result<Message, Bad> {
    let max_bytes = reading.max_bytes;
    if bytes.len() > max_bytes {
        return Err(too_large(bytes.len() as u64, max_bytes));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Bad::new(
            BadReason::InvalidUtf8,
            format!("invalid UTF-8 at byte {}", e.valid_up_to()),
        )
    })?;
    let mut raw: Raw = serde_json::from_str(text).map_err(|e| {
        use serde_json::error::Category;
        let reason = match e.classify() {
            Category::Data => BadReason::WrongType,
            _ => BadReason::BadJson,
        };
        Bad::new(reason, e.to_string())
    })?;
    let gold = gold_field(&mut raw)?;
    if raw.forget == Some(true) {
        return forget(raw, gold.is_some());
    }
    if let Some(of) = raw.forget_reporter.take() {
        return forget_reporter(raw, of, gold.is_some());
    }
    let split = match raw.split.as_deref() {
        None => None,
        Some("train") => Some(Split::Train),
        Some("test") => Some(Split::Test),
        Some(other) => {
            return Err(Bad::new(
                BadReason::WrongType,
                format!("split must be \"train\" or \"test\", got {other:?}"),
            ));
        }
    };
    let Document {
        text,
        email,
        cut,
        message_id,
    } = document(&mut raw, reading.email_views)?;
    let id = raw.id.take().map(Scalar::into_string).or(message_id);
    let reporter = reporter_field(raw.reporter.take())?;
    let user = user_field(raw.user.take())?;
    match (text, gold, id) {
        (Some(text), gold, id) => {
            // An unlabeled message's reporter names no label's source.
            let reporter = reporter.filter(|_| gold.is_some());
            Ok(Message::Example {
                id,
                text,
                gold,
                split,
                reporter,
                cut,
                email,
                user,
            })
        }
        (None, Some(gold), Some(id)) => Ok(Message::Feedback {
            id,
            gold,
            reporter,
            user,
        }),
        (None, Some(_), None) => Err(Bad::new(
            BadReason::MissingText,
            "no \"text\", and a feedback label needs an \"id\"",
        )),
        (None, None, _) => Err(Bad::new(BadReason::MissingText, "no \"text\" field")),
    }
}

#[cfg(test)]
mod tests;
