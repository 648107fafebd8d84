//! rspamd's HTTP protocol, as rspamc and rspamd's proxy speak it: who a
//! `/checkv2` request's message is for (from its envelope headers), the
//! action its score earns (rspamd's ladder: no action, greylist, add
//! header, rewrite subject, soft reject, reject), and the JSON answers.
//! Pure: `rspamd_server` reads and writes the bytes.

use serde_json::json;

use super::Checked;

/// Default `--rspamd-reject-score`: rspamd's own.
pub const DEFAULT_REJECT: f32 = 15.0;
/// Default `--rspamd-add-header-score`: rspamd's own. A message the model
/// calls spam scores at least this (score = this + its spam margin).
pub const DEFAULT_ADD_HEADER: f32 = 6.0;

/// Where rspamd's protocol is served.
#[derive(Clone, Debug)]
pub struct RspamdSettings {
    /// The normal worker: `/checkv2`, `/ping`.
    pub addr: Option<String>,
    /// The controller: `/learnspam`, `/learnham`, `/forget`, `/ping`.
    pub controller_addr: Option<String>,
    pub actions: Actions,
}

/// The scores at which each action starts (none: never taken).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Actions {
    pub reject: f32,
    pub soft_reject: Option<f32>,
    pub rewrite_subject: Option<f32>,
    pub add_header: f32,
    pub greylist: Option<f32>,
}

impl Default for Actions {
    fn default() -> Self {
        Actions {
            reject: DEFAULT_REJECT,
            soft_reject: None,
            rewrite_subject: None,
            add_header: DEFAULT_ADD_HEADER,
            greylist: None,
        }
    }
}

impl Actions {
    /// The score a check earns: the add-header score plus its spam margin
    /// on the verdict's side of it (`super::score_on_side`), so that a
    /// message is marked exactly when the model says spam.
    pub fn score(&self, c: &Checked) -> f32 {
        super::score_on_side(self.add_header, c.margin, c.spam)
    }

    /// The strongest action `score` reaches.
    pub fn action(&self, score: f32) -> &'static str {
        let ladder = [
            (Some(self.reject), "reject"),
            (self.soft_reject, "soft reject"),
            (self.rewrite_subject, "rewrite subject"),
            (Some(self.add_header), "add header"),
            (self.greylist, "greylist"),
        ];
        ladder
            .iter()
            .find(|(at, _)| at.is_some_and(|at| score >= at))
            .map_or("no action", |&(_, name)| name)
    }
}

/// Who a message is for, from its envelope: `Deliver-To`, else `User`,
/// else the first `Rcpt` (angle brackets dropped). A name that is no valid
/// user is refused.
pub fn user_of<'a>(
    deliver_to: Option<&'a str>,
    user: Option<&'a str>,
    first_rcpt: Option<&'a str>,
) -> Result<Option<String>, String> {
    let Some(name) = deliver_to.or(user).or(first_rcpt) else {
        return Ok(None);
    };
    let name = name.trim();
    let name = name.strip_prefix('<').and_then(|n| n.strip_suffix('>')).unwrap_or(name);
    crate::message::check_user(name).map_err(|bad| bad.detail)?;
    Ok(Some(name.to_string()))
}

/// A `/checkv2` answer: rspamd's fields (rspamc prints them; the proxy acts
/// on `action`), the classifier's symbol with the strongest features as
/// its options.
pub fn checked_json(c: &Checked, actions: &Actions) -> Vec<u8> {
    let score = actions.score(c);
    let options: Vec<&str> = c.features.iter().map(|f| f.feature.as_str()).collect();
    let symbol = c.symbol();
    json!({
        "is_skipped": false,
        "score": score,
        "required_score": actions.reject,
        "action": actions.action(score),
        "symbols": {
            symbol: {
                "name": symbol,
                "score": score,
                "metric_score": score,
                "description": format!("classifyd: {} (margin {:.6}, model version {})", c.verdict(), c.margin, c.model_version),
                "options": options,
            }
        },
        "messages": {},
        "message-id": c.id,
    })
    .to_string()
    .into_bytes()
}

/// A learning request done.
pub fn success_json() -> Vec<u8> {
    br#"{"success":true}"#.to_vec()
}

/// An error answer, as rspamd writes them.
pub fn error_json(detail: &str) -> Vec<u8> {
    json!({ "error": detail }).to_string().into_bytes()
}

#[cfg(test)]
mod tests;
