//! Tests of the mail module: the score scale, who may TELL, a message's key.

use super::*;

fn prediction(labels: &[&str], margins: &[(&str, f32)]) -> Prediction {
    Prediction {
        id: "m".into(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        scores: Vec::new(),
        margins: margins.iter().map(|&(c, m)| (c.to_string(), m)).collect(),
        multilabel: false,
        model_version: 3,
        explanation: None,
        members: None,
        uncertain: false,
        review: None,
        user: None,
    }
}

#[test]
fn points_are_the_required_score_plus_the_spam_margin() {
    let c = Checked::of(&prediction(&["spam"], &[("ham", -2.5), ("spam", 2.5)]), "spam", 5.0);
    assert!(c.spam);
    assert_eq!((c.points, c.margin, c.model_version), (7.5, 2.5, 3));
    assert_eq!(c.id, "m");
    assert_eq!(c.symbol(), "CLASSIFYD_SPAM");
    let c = Checked::of(&prediction(&["ham"], &[("ham", 4.0), ("spam", -4.0)]), "spam", 6.0);
    assert!(!c.spam);
    assert_eq!(c.points, 2.0);
    // Only ham known yet: against spam by ham's margin.
    let c = Checked::of(&prediction(&["ham"], &[("ham", 0.7)]), "spam", 5.0);
    assert_eq!((c.spam, c.points), (false, 4.3));
    // Nothing known: not spam, under the required score by the gap, and
    // said so in words.
    let c = Checked::of(&prediction(&[], &[]), "spam", 5.0);
    assert_eq!((c.spam, c.points), (false, 5.0 - HAM_GAP));
    assert_eq!(c.verdict(), "not spam (nothing learned yet)");
    let c = Checked::of(&prediction(&["ham"], &[("spam", f32::NEG_INFINITY)]), "spam", 5.0);
    assert_eq!(c.points, 5.0 - HAM_GAP);
}

/// SpamAssassin's rule is `points >= required`: at 0 and the smallest
/// margins either side, the points, as spamd prints them (two decimals in
/// the header, one in the report), reach the verdict the answer names.
#[test]
fn the_points_are_on_the_verdicts_side_of_the_required_score() {
    for margin in [0.0, f32::MIN_POSITIVE, -f32::MIN_POSITIVE, 1e-7, -1e-7, 0.04, -0.04] {
        for (label, spam) in [("spam", true), ("ham", false)] {
            let c = Checked::of(
                &prediction(&[label], &[("ham", -margin), ("spam", margin)]),
                "spam",
                5.0,
            );
            assert_eq!(c.spam, spam);
            for printed in [format!("{:.2}", c.points), format!("{:.1}", c.points)] {
                let read: f32 = printed.parse().unwrap();
                assert_eq!(read >= 5.0, spam, "{label} at {margin}: {printed}");
            }
        }
    }
}

#[test]
fn address_blocks_hold_what_they_say() {
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let lo = Cidr::loopback();
    assert!(lo.iter().any(|c| c.contains(ip("127.0.0.1"))));
    assert!(lo.iter().any(|c| c.contains(ip("127.255.0.9"))));
    assert!(lo.iter().any(|c| c.contains(ip("::1"))));
    assert!(
        lo.iter().any(|c| c.contains(ip("::ffff:127.0.0.1"))),
        "v4 mapped into v6"
    );
    assert!(!lo.iter().any(|c| c.contains(ip("10.0.0.1"))));
    let net = Cidr::parse("192.168.4.0/22").unwrap();
    assert!(net.contains(ip("192.168.7.255")));
    assert!(!net.contains(ip("192.168.8.0")));
    assert!(!net.contains(ip("fe80::1")));
    assert!(Cidr::parse("10.1.2.3").unwrap().contains(ip("10.1.2.3")));
    assert!(!Cidr::parse("10.1.2.3").unwrap().contains(ip("10.1.2.4")));
    assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
    assert!(Cidr::parse("10.0.0.0/33").is_err());
    assert!(Cidr::parse("::/129").is_err());
    assert!(Cidr::parse("localhost").is_err());
}

#[test]
fn a_message_is_keyed_by_its_message_id_else_by_its_bytes() {
    let with = b"Message-ID: <a1@example.org>\r\nSubject: hi\r\n\r\nbody";
    assert_eq!(message_key(with), "a1@example.org");
    let without = b"Subject: hi\r\n\r\nbody";
    let key = message_key(without);
    assert!(key.starts_with("mail-"), "{key}");
    assert_eq!(key, message_key(without), "the same bytes, the same key");
    assert_ne!(key, message_key(b"Subject: hi\r\n\r\nanother body"));
    assert!(message_key(b"").starts_with("mail-"));
}
