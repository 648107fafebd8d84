//! The input contract: parsing raw message bytes into an example, a
//! prediction request or a feedback label, and the bounded set of reasons a
//! message can be refused for.

use std::fmt;

use serde::Deserialize;

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
}

impl BadReason {
    pub const ALL: [BadReason; 8] = [
        BadReason::InvalidUtf8,
        BadReason::TooLarge,
        BadReason::BadJson,
        BadReason::WrongType,
        BadReason::MissingText,
        BadReason::BadLabel,
        BadReason::TooManyClasses,
        BadReason::BadReporter,
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
    },
    /// A late gold label for an earlier message, and who gave it.
    Feedback {
        id: String,
        gold: Gold,
        reporter: Option<String>,
    },
}

impl Message {
    /// Whether it carries a label (a training example or a late label).
    pub fn has_label(&self) -> bool {
        matches!(self, Message::Example { gold: Some(_), .. } | Message::Feedback { .. })
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
            | Message::Feedback { reporter, .. } => *reporter = Some(name),
            Message::Example { gold: None, .. } => {}
        }
    }
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
fn reporter_field(field: Option<AnyString>) -> Result<Option<String>, Bad> {
    match field {
        None => Ok(None),
        Some(AnyString(None)) => Err(Bad::new(BadReason::BadReporter, "\"reporter\" must be a string")),
        Some(AnyString(Some(name))) => check_reporter(&name).map(|()| Some(name)),
    }
}

/// Parses one message. `max_bytes` caps its size.
pub fn parse(bytes: &[u8], max_bytes: usize) -> Result<Message, Bad> {
    if bytes.len() > max_bytes {
        return Err(too_large(bytes.len() as u64, max_bytes));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Bad::new(
            BadReason::InvalidUtf8,
            format!("invalid UTF-8 at byte {}", e.valid_up_to()),
        )
    })?;
    let raw: Raw = serde_json::from_str(text).map_err(|e| {
        use serde_json::error::Category;
        let reason = match e.classify() {
            Category::Data => BadReason::WrongType,
            _ => BadReason::BadJson,
        };
        Bad::new(reason, e.to_string())
    })?;
    let gold = match (raw.label, raw.labels) {
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
    if let Some(bad) = gold.as_ref().and_then(|g| {
        g.as_slice()
            .iter()
            .find(|l| l.is_empty() || l.len() > 256 || l.chars().any(char::is_control))
    }) {
        return Err(Bad::new(
            BadReason::BadLabel,
            format!("label {bad:?} is empty, longer than 256 bytes or has control characters"),
        ));
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
    let id = raw.id.map(Scalar::into_string);
    let reporter = reporter_field(raw.reporter)?;
    let text = match raw.text {
        Some(None) => return Err(Bad::new(BadReason::WrongType, "\"text\" is null; it must be a string")),
        Some(Some(text)) => Some(text),
        None => None,
    };
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
            })
        }
        (None, Some(gold), Some(id)) => Ok(Message::Feedback { id, gold, reporter }),
        (None, Some(_), None) => Err(Bad::new(
            BadReason::MissingText,
            "no \"text\", and a feedback label needs an \"id\"",
        )),
        (None, None, _) => Err(Bad::new(BadReason::MissingText, "no \"text\" field")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(s: &[u8]) -> BadReason {
        parse(s, 100).unwrap_err().reason
    }

    #[test]
    fn parses_the_contract() {
        assert_eq!(
            parse(
                br#"{"id": "m-42", "text": "Free entry", "label": "spam", "extra": 1}"#,
                1000
            ),
            Ok(Message::Example {
                id: Some("m-42".into()),
                text: "Free entry".into(),
                gold: Some(Gold::One("spam".into())),
                split: None,
                reporter: None
            })
        );
        assert_eq!(
            parse(
                br#"{"text": "x", "labels": ["grain", "wheat"], "split": "test", "id": 7}"#,
                1000
            ),
            Ok(Message::Example {
                id: Some("7".into()),
                text: "x".into(),
                gold: Some(Gold::Set(vec!["grain".into(), "wheat".into()])),
                split: Some(Split::Test),
                reporter: None
            })
        );
        assert_eq!(
            parse(br#"{"id": "m-43", "label": 1}"#, 1000),
            Ok(Message::Feedback {
                id: "m-43".into(),
                gold: Gold::One("1".into()),
                reporter: None
            })
        );
    }

    /// A label may name its reporter, a checked string; a reporter on an
    /// unlabeled message names nothing and is dropped.
    #[test]
    fn reporters_are_strings_within_the_cap() {
        assert_eq!(
            parse(br#"{"id": "m-43", "label": "ham", "reporter": "u-17"}"#, 1000),
            Ok(Message::Feedback {
                id: "m-43".into(),
                gold: Gold::One("ham".into()),
                reporter: Some("u-17".into())
            })
        );
        assert!(matches!(
            parse(br#"{"text": "a", "label": "spam", "reporter": "u-1"}"#, 1000),
            Ok(Message::Example { reporter: Some(r), .. }) if r == "u-1"
        ));
        assert!(matches!(
            parse(br#"{"text": "a", "reporter": "u-1"}"#, 1000),
            Ok(Message::Example { reporter: None, .. })
        ));
        let long = format!(
            r#"{{"id": "m", "label": "ham", "reporter": "{}"}}"#,
            "r".repeat(MAX_REPORTER_BYTES + 1)
        );
        for bad in [
            r#"{"id": "m", "label": "ham", "reporter": 17}"#,
            r#"{"id": "m", "label": "ham", "reporter": null}"#,
            r#"{"id": "m", "label": "ham", "reporter": ["a"]}"#,
            r#"{"id": "m", "label": "ham", "reporter": ""}"#,
            r#"{"id": "m", "label": "ham", "reporter": "a\u0000b"}"#,
            &long,
        ] {
            assert_eq!(
                parse(bad.as_bytes(), 1000).unwrap_err().reason,
                BadReason::BadReporter,
                "{bad}"
            );
        }
        let mut m = parse(br#"{"id": "m", "label": "ham", "reporter": "u-1"}"#, 1000).unwrap();
        m.set_reporter(reporter_from_header(b"mail-frontend:u-9").unwrap());
        assert!(matches!(m, Message::Feedback { reporter: Some(r), .. } if r == "mail-frontend:u-9"));
        assert_eq!(
            reporter_from_header(b"\xff").unwrap_err().reason,
            BadReason::BadReporter
        );
    }

    /// Ids and labels may be strings, integers or booleans, kept as text;
    /// anything else is the wrong type.
    #[test]
    fn scalars_become_text() {
        let label = |json: &str| match parse(format!(r#"{{"text": "a", "label": {json}}}"#).as_bytes(), 1000) {
            Ok(Message::Example {
                gold: Some(Gold::One(l)),
                ..
            }) => Ok(l),
            Ok(other) => panic!("not a labeled example: {other:?}"),
            Err(bad) => Err(bad.reason),
        };
        assert_eq!(label(r#""spam""#), Ok("spam".into()));
        assert_eq!(label(r#""sp\u00e4m\n""#), Err(BadReason::BadLabel));
        assert_eq!(label(r#""sp\u00e4m""#), Ok("späm".into()));
        assert_eq!(label("-3"), Ok("-3".into()));
        assert_eq!(label("9223372036854775807"), Ok(i64::MAX.to_string()));
        assert_eq!(label("true"), Ok("true".into()));
        for wrong in ["1.5", "18446744073709551615", "[1]", r#"{"a": 1}"#] {
            assert_eq!(label(wrong), Err(BadReason::WrongType), "{wrong}");
        }
        assert!(matches!(
            parse(br#"{"text": "a", "id": 12}"#, 1000),
            Ok(Message::Example { id: Some(id), gold: None, .. }) if id == "12"
        ));
        assert!(matches!(
            parse(br#"{"text": "a", "id": null}"#, 1000),
            Ok(Message::Example { id: None, .. })
        ));
    }

    #[test]
    fn refuses_bad_input_with_a_reason() {
        assert_eq!(reason(b"{\"text\": \"\xff\"}"), BadReason::InvalidUtf8);
        assert_eq!(reason(&[b' '; 101]), BadReason::TooLarge);
        assert_eq!(reason(b"{not json"), BadReason::BadJson);
        assert_eq!(reason(b"[1, 2]"), BadReason::WrongType);
        assert_eq!(reason(br#"{"text": 5}"#), BadReason::WrongType);
        // A null text is not an absent one: not a late label, but bad input.
        assert_eq!(
            reason(br#"{"id": "p3", "text": null, "label": "spam"}"#),
            BadReason::WrongType
        );
        assert_eq!(reason(br#"{"text": null}"#), BadReason::WrongType);
        // Not an object: the error says what is expected, not a Rust type's name.
        let not_object = parse(b"42", 1000).unwrap_err();
        assert_eq!(not_object.reason, BadReason::WrongType);
        assert!(not_object.detail.contains("a JSON object"), "{}", not_object.detail);
        assert!(!not_object.detail.contains("Raw"), "{}", not_object.detail);
        assert_eq!(reason(br#"{"id": "a"}"#), BadReason::MissingText);
        assert_eq!(reason(br#"{"label": "a"}"#), BadReason::MissingText);
        assert_eq!(reason(br#"{"text": "a", "label": ""}"#), BadReason::BadLabel);
        assert_eq!(
            reason(br#"{"text": "a", "label": "x", "labels": []}"#),
            BadReason::BadLabel
        );
        assert_eq!(reason(br#"{"text": "a", "split": "dev"}"#), BadReason::WrongType);
    }
}
