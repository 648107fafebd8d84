//! Tests of the parent module.

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
            reporter: None,
            cut: false,
            email: false,
            user: None
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
            reporter: None,
            cut: false,
            email: false,
            user: None
        })
    );
    assert_eq!(
        parse(br#"{"id": "m-43", "label": 1}"#, 1000),
        Ok(Message::Feedback {
            id: "m-43".into(),
            gold: Gold::One("1".into()),
            reporter: None,
            user: None
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
            reporter: Some("u-17".into()),
            user: None
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

/// A raw e-mail stands in for "text", as a string or as base64 bytes; its
/// Message-ID names it when no "id" does; junk is `bad_email`.
#[test]
fn raw_email_in_place_of_text() {
    use base64::Engine as _;
    let raw = "From: ann@example.org\r\nSubject: lunch\r\nMessage-ID: <m1@example.org>\r\n\r\nAt noon?\r\n";
    let as_string = serde_json::json!({"email": raw, "label": "ham"}).to_string();
    let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
    let as_base64 = serde_json::json!({"id": "e-1", "email_base64": b64}).to_string();
    let Ok(Message::Example { id, text, gold, .. }) = parse(as_string.as_bytes(), 10_000) else {
        panic!("not an example")
    };
    assert_eq!(id.as_deref(), Some("m1@example.org"));
    assert_eq!(gold, Some(Gold::One("ham".into())));
    assert!(
        text.contains("from_domain__example_org") && text.contains("At noon?"),
        "{text}"
    );
    let Ok(Message::Example { id, text: same, .. }) = parse(as_base64.as_bytes(), 10_000) else {
        panic!("not an example")
    };
    assert_eq!(id.as_deref(), Some("e-1"));
    assert_eq!(same, text, "the same document either way");
    for bad in [
        r#"{"email": ""}"#,
        r#"{"email_base64": "not base64!"}"#,
        r#"{"email": "no header at all, just words"}"#,
    ] {
        assert_eq!(
            parse(bad.as_bytes(), 1000).unwrap_err().reason,
            BadReason::BadEmail,
            "{bad}"
        );
    }
    for wrong in [r#"{"text": "a", "email": "From: a@b\r\n\r\nx"}"#, r#"{"email": 5}"#] {
        assert_eq!(
            parse(wrong.as_bytes(), 1000).unwrap_err().reason,
            BadReason::WrongType,
            "{wrong}"
        );
    }
}

/// `"forget": true` takes back an earlier message's label: it needs the
/// id and carries neither text nor label; `false` is no forget at all.
#[test]
fn a_forget_line_names_its_message_and_nothing_else() {
    assert_eq!(
        parse(br#"{"id": "m3", "forget": true, "reporter": "u-1"}"#, 1000),
        Ok(Message::Forget {
            id: "m3".into(),
            reporter: Some("u-1".into())
        })
    );
    assert_eq!(
        parse(br#"{"id": 3, "forget": true}"#, 1000),
        Ok(Message::Forget {
            id: "3".into(),
            reporter: None
        })
    );
    assert!(matches!(
        parse(br#"{"id": "m3", "label": "ham", "forget": false}"#, 1000),
        Ok(Message::Feedback { .. })
    ));
    assert_eq!(reason(br#"{"forget": true}"#), BadReason::MissingText);
    assert_eq!(
        reason(br#"{"id": "m3", "forget": true, "label": "ham"}"#),
        BadReason::BadLabel
    );
    assert_eq!(
        reason(br#"{"id": "m3", "forget": true, "text": "hi"}"#),
        BadReason::WrongType
    );
    assert_eq!(reason(br#"{"id": "m3", "forget": "yes"}"#), BadReason::WrongType);
    assert_eq!(
        reason(br#"{"id": "m3", "forget": true, "reporter": 5}"#),
        BadReason::BadReporter
    );
}

/// `"user"` names who a message or a label is for: a checked name like a
/// reporter's; anything else is bad input of its own reason.
#[test]
fn a_user_is_a_checked_name() {
    let Ok(Message::Example { user, .. }) = parse(br#"{"text": "hi", "user": "u-1"}"#, 1000) else {
        panic!("a message");
    };
    assert_eq!(user.as_deref(), Some("u-1"));
    let Ok(Message::Feedback { user, .. }) = parse(br#"{"id": "m", "label": "spam", "user": "u-2"}"#, 1000) else {
        panic!("a late label");
    };
    assert_eq!(user.as_deref(), Some("u-2"));
    assert_eq!(reason(br#"{"text": "hi", "user": 7}"#), BadReason::BadUser);
    assert_eq!(reason(br#"{"text": "hi", "user": ""}"#), BadReason::BadUser);
    assert_eq!(reason(br#"{"text": "hi", "user": "a\u0000b"}"#), BadReason::BadUser);
    assert_eq!(user_from_header(b"\xff").unwrap_err().reason, BadReason::BadUser);
}
