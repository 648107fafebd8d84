//! Tests of the parent module.

use super::*;

const PLAIN: &[u8] = b"Return-Path: <bounce@lists.example.org>\r\n\
Received: from mail.example.org (mail.example.org [192.0.2.17])\r\n\tby mx.example.net with ESMTP id 123\r\n\
From: \"Ann\" <ann@example.org>\r\n\
To: bob@example.net\r\n\
Subject: =?ISO-8859-1?Q?Caf=E9_tonight?=\r\n\
Message-ID: <abc@example.org>\r\n\
List-Id: Coffee lovers <coffee.lists.example.org>\r\n\
X-Mailer: Mutt 1.4\r\n\
Content-Type: text/plain; charset=iso-8859-1\r\n\
Content-Transfer-Encoding: quoted-printable\r\n\
\r\n\
See you at the caf=E9 at nine.\r\n";

#[test]
fn headers_body_and_raw_become_one_document() {
    let r = render(PLAIN, Views::default()).unwrap();
    assert!(!r.cut);
    assert_eq!(r.message_id.as_deref(), Some("abc@example.org"));
    let t = &r.text;
    // raw: the message as it came, first.
    assert!(t.starts_with("Return-Path: <bounce@lists.example.org>"), "{t}");
    for token in [
        "from_addr__ann_example_org",
        "from_domain__example_org",
        "return_path_domain__lists_example_org",
        "received_host__mail_example_org",
        "received_net__192_0_2",
        "message_id_domain__example_org",
        "list_id__coffee_lists_example_org",
        "mailer__mutt",
        "header__x_mailer",
        "content_type__text_plain",
        "charset__iso_8859_1",
    ] {
        assert!(t.contains(token), "{token} missing from\n{t}");
    }
    // body: RFC 2047 subject and quoted-printable Latin-1 decoded.
    assert!(t.contains("Subject: Café tonight"), "{t}");
    assert!(t.contains("See you at the café at nine."), "{t}");
}

#[test]
fn views_choose_what_goes_in() {
    let body = render(PLAIN, Views::parse("body").unwrap()).unwrap().text;
    assert!(body.starts_with("Subject: Café tonight"), "{body}");
    assert!(!body.contains("from_domain__"));
    let headers = render(PLAIN, Views::parse("headers").unwrap()).unwrap().text;
    assert!(headers.contains("from_domain__example_org"));
    assert!(!headers.contains("café"));
    assert_eq!(Views::parse("all"), Ok(Views::default()));
    assert!(Views::parse("raw,bytes").is_err());
}

#[test]
fn html_and_attachments_by_type_never_their_bytes() {
    let msg = b"From: a@spam.example\r\n\
Subject: offer\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"b\"\r\n\
\r\n\
--b\r\n\
Content-Type: text/html; charset=utf-8\r\n\
\r\n\
<html><body><p>Cheap <b>pills</b></p></body></html>\r\n\
--b\r\n\
Content-Type: application/pdf; name=\"invoice.pdf\"\r\n\
Content-Disposition: attachment; filename=\"invoice.pdf\"\r\n\
Content-Transfer-Encoding: base64\r\n\
\r\n\
U0VDUkVUU0VDUkVUU0VDUkVU\r\n\
--b--\r\n";
    let t = render(msg, Views::parse("body").unwrap()).unwrap().text;
    assert!(t.contains("Cheap pills") || t.contains("Cheap  pills"), "{t}");
    assert!(!t.contains("<b>"), "{t}");
    assert!(t.contains("attachment_type__application_pdf"), "{t}");
    assert!(t.contains("attachment_ext__pdf"), "{t}");
    assert!(!t.contains("SECRET"), "{t}");
}

#[test]
fn bounds_cut_and_junk_is_refused() {
    let mut big = b"From: a@b.example\r\nSubject: long\r\n\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'x', MAX_BODY_BYTES * 2));
    let r = render(&big, Views::default()).unwrap();
    assert!(r.cut);
    assert!(
        r.text.len() < RAW_PREFIX_BYTES + MAX_BODY_BYTES + 4096,
        "{}",
        r.text.len()
    );
    assert!(render(b"", Views::default()).is_err());
    assert!(render(b"   \r\n", Views::default()).is_err());
}

proptest::proptest! {
    /// Any bytes: a document or a refusal, never a panic, always bounded.
    #[test]
    fn any_bytes_render_or_are_refused(raw in proptest::collection::vec(proptest::num::u8::ANY, 0..2000)) {
        if let Ok(r) = render(&raw, Views::default()) {
            proptest::prop_assert!(r.text.len() <= RAW_PREFIX_BYTES * 4 + MAX_BODY_BYTES + MAX_HEADER_TOKENS * 200);
        }
    }
}
