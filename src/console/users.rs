//! Who logs in to the console by name (`--console-users FILE`): named
//! reviewers, each a name, a role (`read` or `teach`) and a secret, one per
//! line. A named reviewer's lessons carry their name as the reporter, so
//! that trust is kept per reviewer (docs/feedback.md) and History shows who
//! taught what. The file is read once, at start; a line that cannot be
//! read stops the start with its number.

use crate::serving::same_secret;

/// What a reviewer may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Read,
    Teach,
}

/// One named reviewer.
#[derive(Clone, PartialEq, Eq)]
pub struct Reviewer {
    pub name: String,
    pub role: Role,
    secret: String,
}

/// The secret is never printed.
impl std::fmt::Debug for Reviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviewer")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

/// The reporter of the console's lessons that no reviewer named (the
/// single secrets', an address --learn-from allows): no reviewer's name.
pub(super) const ANONYMOUS: &str = "console";

/// The longest reviewer name (a reporter's name in metrics and records).
const MAX_NAME: usize = 64;

/// The named reviewers of a console.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reviewers(Vec<Reviewer>);

impl Reviewers {
    /// The reviewers of the file at `path` (a file every user of the
    /// machine may read is taken, with a warning: it holds secrets).
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        use std::os::unix::fs::PermissionsExt as _;
        let text = std::fs::read_to_string(path).map_err(|e| format!("--console-users {}: {e}", path.display()))?;
        if std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o004 != 0) {
            tracing::warn!(file = %path.display(), "--console-users is readable by every user of this machine; it holds secrets (chmod 600)");
        }
        Self::parse(&text).map_err(|e| format!("--console-users {}: {e}", path.display()))
    }

    /// Reviewers from lines of `name role secret` (the secret is the rest
    /// of the line, trimmed); blank lines and lines starting with `#` are
    /// skipped. Names and secrets are unique; a name is printable, without
    /// spaces, at most [`MAX_NAME`] bytes.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut all: Vec<Reviewer> = Vec::new();
        for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let r = reviewer(line).map_err(|e| format!("line {n}: {e}"))?;
            if all.iter().any(|o| o.name == r.name) {
                return Err(format!("line {n}: reviewer {:?} is named twice", r.name));
            }
            if all.iter().any(|o| o.secret == r.secret) {
                return Err(format!("line {n}: {:?} has the secret of another reviewer", r.name));
            }
            all.push(r);
        }
        Ok(Reviewers(all))
    }

    /// The reviewer whose secret `given` is (every secret compared, in
    /// time that depends on the lengths only).
    pub fn find(&self, given: &[u8]) -> Option<&Reviewer> {
        self.0.iter().fold(None, |found, r| {
            let same = same_secret(r.secret.as_bytes(), given);
            if same { Some(r) } else { found }
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn reviewer(line: &str) -> Result<Reviewer, String> {
    let mut parts = line.splitn(3, char::is_whitespace);
    let (Some(name), Some(role), Some(secret)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("a line is: name role secret (role: read or teach)".into());
    };
    let bidi = |c: char| matches!(c, '\u{200e}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if name.len() > MAX_NAME || name.chars().any(|c| c.is_control() || c.is_whitespace() || bidi(c)) {
        return Err(format!(
            "a name is at most {MAX_NAME} bytes, with no space, control or direction character"
        ));
    }
    if name == ANONYMOUS {
        return Err(format!(
            "{name:?} is the reporter of the single secrets' lessons; name the reviewer otherwise"
        ));
    }
    let role = match role {
        "read" => Role::Read,
        "teach" => Role::Teach,
        other => return Err(format!("role {other:?}: a role is read or teach")),
    };
    let secret = secret.trim();
    if secret.is_empty() {
        return Err(format!("{name:?} has no secret"));
    }
    Ok(Reviewer {
        name: name.to_string(),
        role,
        secret: secret.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_names_reviewers_and_a_bad_line_is_refused_with_its_number() {
        let r = Reviewers::parse("# who reviews\n\nann teach s3cret one\nbob read other-secret\n").unwrap();
        let ann = r.find(b"s3cret one").unwrap();
        assert_eq!((ann.name.as_str(), ann.role), ("ann", Role::Teach));
        assert_eq!(r.find(b" other-secret\r\n").map(|b| b.role), Some(Role::Read));
        assert!(r.find(b"s3cret").is_none());
        assert!(!format!("{ann:?}").contains("s3cret"), "the secret is never printed");
        for (bad, says) in [
            ("ann teach", "line 1: a line is"),
            ("ann admin s", "line 1: role \"admin\""),
            ("ann teach a\nann read b", "line 2: reviewer \"ann\" is named twice"),
            ("ann teach a\nbob read a", "line 2: \"bob\" has the secret"),
            ("a\u{202e}nn teach a", "line 1: a name is"),
            ("console teach a", "line 1: \"console\" is the reporter"),
        ] {
            let e = Reviewers::parse(bad).unwrap_err();
            assert!(e.starts_with(says), "{bad:?}: {e}");
        }
    }
}
