//! Tests of rspamd's protocol: the action ladder, the envelope's user, the answers.

use super::*;
use crate::mail::Checked;

/// A check of `margin` that the model calls spam or not.
fn check(margin: f32, spam: bool) -> Checked {
    Checked {
        id: "m".into(),
        spam,
        points: 0.0,
        required: 5.0,
        margin,
        label: if spam { "spam" } else { "ham" }.into(),
        model_version: 1,
        features: Vec::new(),
    }
}

#[test]
fn a_score_earns_the_strongest_action_it_reaches() {
    let a = Actions::default();
    assert_eq!(a.score(&check(0.5, true)), 6.5);
    assert_eq!(a.action(a.score(&check(-3.0, false))), "no action");
    assert_eq!(
        a.action(a.score(&check(0.0, true))),
        "add header",
        "the model's spam is marked"
    );
    assert_eq!(a.action(a.score(&check(8.9, true))), "add header");
    assert_eq!(a.action(a.score(&check(9.0, true))), "reject");
    // At 0 and the smallest margins either side, the action follows the
    // verdict: a ham is never marked, a spam always is.
    for margin in [0.0, f32::MIN_POSITIVE, -f32::MIN_POSITIVE, 1e-7, -1e-7, 0.05, -0.05] {
        assert_eq!(a.action(a.score(&check(margin, false))), "no action", "{margin}");
        assert_eq!(a.action(a.score(&check(margin, true))), "add header", "{margin}");
    }
    let all = Actions {
        reject: 15.0,
        soft_reject: Some(12.0),
        rewrite_subject: Some(9.0),
        add_header: 6.0,
        greylist: Some(4.0),
    };
    let actions: Vec<&str> = [3.0, 4.0, 6.0, 9.5, 12.0, 20.0]
        .iter()
        .map(|&s| all.action(s))
        .collect();
    assert_eq!(
        actions,
        [
            "no action",
            "greylist",
            "add header",
            "rewrite subject",
            "soft reject",
            "reject"
        ]
    );
}

#[test]
fn the_user_is_deliver_to_else_user_else_the_first_recipient() {
    assert_eq!(user_of(Some("a@x"), Some("b"), Some("<c@x>")), Ok(Some("a@x".into())));
    assert_eq!(user_of(None, Some("b"), Some("<c@x>")), Ok(Some("b".into())));
    assert_eq!(user_of(None, None, Some(" <c@x> ")), Ok(Some("c@x".into())));
    assert_eq!(user_of(None, None, None), Ok(None));
    assert!(user_of(Some("<>"), None, None).is_err(), "an empty name");
    assert!(user_of(None, Some("a\u{1}b"), None).is_err());
}

#[test]
fn a_check_answers_with_rspamds_fields() {
    let c = Checked {
        id: "m@x".into(),
        spam: true,
        points: 0.0,
        required: 6.0,
        margin: 2.5,
        label: "spam".into(),
        model_version: 9,
        features: vec![crate::pipeline::Contribution {
            feature: "free".into(),
            contribution: 0.7,
        }],
    };
    let v: serde_json::Value = serde_json::from_slice(&checked_json(&c, &Actions::default())).unwrap();
    assert_eq!(v["action"], "add header");
    assert_eq!(v["score"], 8.5);
    assert_eq!(v["required_score"], 15.0);
    assert_eq!(v["is_skipped"], false);
    assert_eq!(v["message-id"], "m@x");
    assert_eq!(v["symbols"]["CLASSIFYD_SPAM"]["options"][0], "free");
    assert_eq!(v["symbols"]["CLASSIFYD_SPAM"]["score"], 8.5);
    let e: serde_json::Value = serde_json::from_slice(&error_json("no \"such\"")).unwrap();
    assert_eq!(e["error"], "no \"such\"");
    assert_eq!(success_json(), br#"{"success":true}"#);
}
