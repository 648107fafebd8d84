//! Tests of the spamd protocol's heads and answers.

use super::*;
use crate::mail::Checked;

fn head(s: &str) -> Result<Request, Refusal> {
    parse_head(s.as_bytes())
}

#[test]
fn a_head_ends_at_its_blank_line_with_or_without_carriage_returns() {
    assert_eq!(head_end(b"CHECK SPAMC/1.5\r\nContent-length: 3\r\n\r\nabc"), Some(38));
    assert_eq!(head_end(b"PING SPAMC/1.5\n\nrest"), Some(16));
    assert_eq!(head_end(b"CHECK SPAMC/1.5\r\nContent-length: 3\r\n"), None);
    assert_eq!(head_end(b""), None);
}

#[test]
fn spamcs_heads_are_read() {
    let r = head(
        "TELL SPAMC/1.5\r\nMessage-class: spam\r\nSet: local,remote\r\nUser: root\r\nContent-length: 1116\r\n\r\n",
    )
    .expect("spamc -C report's head");
    assert_eq!(r.command, Command::Tell);
    assert_eq!(r.class, Some(Class::Spam));
    assert_eq!(r.set.as_deref(), Some("local,remote"));
    assert_eq!(r.remove, None);
    assert_eq!(r.user.as_deref(), Some("root"));
    assert_eq!(r.content_length, Some(1116));
    // Header names in any case, values trimmed; unknown headers ignored.
    let r = head("CHECK SPAMC/1.2\ncontent-LENGTH:  7 \nX-Whatever: 1\n\n").expect("a check");
    assert_eq!((r.command, r.content_length), (Command::Check, Some(7)));
    let r = head("TELL SPAMC/1.5\r\nMessage-class: ham\r\nSet: local\r\nRemove: remote, remote\r\n\r\n").unwrap();
    assert_eq!((r.set.as_deref(), r.remove.as_deref()), (Some("local"), Some("remote")));
    assert!(head("CHECK SPAMC/1.5\r\nCompress: zlib\r\n\r\n").unwrap().compressed);
}

#[test]
fn bad_heads_are_refused_with_their_reason() {
    let reason = |s: &str| head(s).map(|_| ()).unwrap_err().reason;
    assert_eq!(reason("GET / HTTP/1.1\r\n\r\n"), "bad_command");
    assert_eq!(reason("CHECK\r\n\r\n"), "bad_head");
    assert_eq!(reason("CHECK HTTP/1.1\r\n\r\n"), "bad_head");
    assert_eq!(reason("CHECK SPAMC/1.5\r\nno colon here\r\n\r\n"), "bad_head");
    assert_eq!(reason("CHECK SPAMC/1.5\r\nContent-length: -1\r\n\r\n"), "bad_length");
    assert_eq!(
        reason("CHECK SPAMC/1.5\r\nContent-length: 99999999999999999999999\r\n\r\n"),
        "bad_length"
    );
    assert_eq!(reason("TELL SPAMC/1.5\r\nMessage-class: eggs\r\n\r\n"), "bad_class");
    assert_eq!(reason("TELL SPAMC/1.5\r\nSet: elsewhere\r\n\r\n"), "bad_head");
    assert_eq!(reason("CHECK SPAMC/1.5\r\nUser: \r\n\r\n"), "bad_user");
    assert_eq!(
        head("CHECK SPAMC/1.5\r\nUser: \u{7}\r\n\r\n").unwrap_err().status,
        Status::Usage
    );
    assert_eq!(
        parse_head(b"CHECK SPAMC/1.5\r\n\xff\r\n\r\n").unwrap_err().reason,
        "bad_head"
    );
}

fn checked(spam: bool, margin: f32) -> Checked {
    Checked {
        id: "m@x".into(),
        spam,
        points: 5.0 + margin,
        required: 5.0,
        margin,
        label: if spam { "spam" } else { "ham" }.into(),
        model_version: 7,
        features: vec![crate::pipeline::Contribution {
            feature: "free\nprize".into(),
            contribution: 1.25,
        }],
    }
}

#[test]
fn answers_read_as_spamds() {
    let spam = checked(true, 7.5);
    let a = String::from_utf8(super::checked(Command::Check, &spam, b"Subject: x\r\n\r\nbody")).unwrap();
    assert_eq!(a, "SPAMD/1.1 0 EX_OK\r\nSpam: True ; 12.50 / 5.0\r\n\r\n");
    let ham = checked(false, -3.0);
    let a = String::from_utf8(super::checked(Command::Symbols, &ham, b"")).unwrap();
    assert_eq!(
        a,
        "SPAMD/1.1 0 EX_OK\r\nSpam: False ; 2.00 / 5.0\r\nContent-length: 13\r\n\r\nCLASSIFYD_HAM"
    );
    // A report names the verdict and the features, one line each.
    let a = String::from_utf8(super::checked(Command::Report, &spam, b"")).unwrap();
    assert!(a.contains("(12.5 points, 5.0 required)"), "{a}");
    assert!(
        a.contains("CLASSIFYD_SPAM         classifyd: spam (margin 7.500000"),
        "{a}"
    );
    assert!(a.contains("free prize"), "no line break inside a feature's line: {a}");
    let body = &a[a.find("\r\n\r\n").unwrap() + 4..];
    assert!(a.contains(&format!("Content-length: {}\r\n", body.len())));
    // REPORT_IFSPAM: no report for ham.
    let a = String::from_utf8(super::checked(Command::ReportIfSpam, &ham, b"")).unwrap();
    assert!(a.ends_with("Content-length: 0\r\n\r\n"), "{a}");
    // PROCESS: the headers first, then the message as it came; HEADERS: its head only.
    let msg = b"Subject: x\r\n\r\nthe body";
    let a = super::checked(Command::Process, &spam, msg);
    let text = String::from_utf8(a).unwrap();
    assert!(
        text.contains("\r\n\r\nX-Spam-Flag: YES\r\nX-Spam-Status: Yes, score=12.5 required=5.0 tests=CLASSIFYD_SPAM")
    );
    assert!(text.contains("X-Spam-Level: ************\r\n"));
    assert!(text.ends_with("Subject: x\r\n\r\nthe body"));
    let text = String::from_utf8(super::checked(Command::Headers, &ham, msg)).unwrap();
    assert!(text.contains("X-Spam-Status: No, score=2.0"), "{text}");
    assert!(!text.contains("X-Spam-Flag"));
    assert!(text.ends_with("Subject: x\r\n\r\n"), "{text}");
}

#[test]
fn tells_and_refusals_answer_on_one_status_line() {
    assert_eq!(
        told(Some("local,remote"), None),
        b"SPAMD/1.1 0 EX_OK\r\nDidSet: local,remote\r\nContent-length: 0\r\n\r\n"
    );
    assert_eq!(
        told(Some("local"), Some("remote")),
        b"SPAMD/1.1 0 EX_OK\r\nDidSet: local\r\nDidRemove: remote\r\nContent-length: 0\r\n\r\n"
    );
    assert_eq!(told(None, None), b"SPAMD/1.1 0 EX_OK\r\nContent-length: 0\r\n\r\n");
    let r = Refusal::new(Status::NoPerm, "unauthenticated", "not from\r\nthere");
    assert_eq!(refusal(&r), b"SPAMD/1.1 77 EX_NOPERM not from  there\r\n\r\n");
    assert_eq!(pong(), b"SPAMD/1.1 0 PONG\r\n");
}
