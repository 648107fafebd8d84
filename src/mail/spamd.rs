//! SpamAssassin's spamd protocol, as spamc speaks it: a request's head
//! (`CHECK SPAMC/1.5`, then `Name: value` lines, then a blank line) read
//! into a [`Request`], and the answers written as spamd writes them
//! (`SPAMD/1.1 0 EX_OK`, `Spam: True ; 12.3 / 5.0`, a body). Pure: no
//! socket, no model; `server` reads and writes the bytes, and the fuzz
//! target `spamd_head` feeds this parser anything.

use std::fmt::Write as _;

use super::Checked;

/// The longest head (request line and headers) read; past it the request
/// is refused. spamc's heads are under 200 bytes.
pub const MAX_HEAD_BYTES: usize = 8 << 10;

/// What a spamd client asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Whether the message is spam: `Spam:` only.
    Check,
    /// And the names of the rules that fired (here, classifyd's symbol).
    Symbols,
    /// And a report naming the strongest features.
    Report,
    /// The report only when the message is spam.
    ReportIfSpam,
    /// The message back with `X-Spam-*` headers added.
    Process,
    /// Only the message's headers, with `X-Spam-*` added.
    Headers,
    /// Alive?
    Ping,
    /// A connection made in error: closed at once.
    Skip,
    /// Learn (`Set:`) or forget (`Remove:`) the message as `Message-class:`.
    Tell,
}

impl Command {
    fn parse(word: &str) -> Option<Command> {
        Some(match word {
            "CHECK" => Command::Check,
            "SYMBOLS" => Command::Symbols,
            "REPORT" => Command::Report,
            "REPORT_IFSPAM" => Command::ReportIfSpam,
            "PROCESS" => Command::Process,
            "HEADERS" => Command::Headers,
            "PING" => Command::Ping,
            "SKIP" => Command::Skip,
            "TELL" => Command::Tell,
            _ => return None,
        })
    }
}

/// A message class a `TELL` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Spam,
    Ham,
}

/// A request's head, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub command: Command,
    /// `Content-length:` (required of a command with a body).
    pub content_length: Option<usize>,
    /// `User:`: who the message is for, and who tells.
    pub user: Option<String>,
    /// `Message-class:` of a `TELL`.
    pub class: Option<Class>,
    /// `Set:`: the databases named (`local`, `remote`; classifyd has one
    /// model for both), said back in `DidSet:`.
    pub set: Option<String>,
    /// `Remove:`: the databases named, said back in `DidRemove:`.
    pub remove: Option<String>,
    /// `Compress:` was sent (not supported: refused).
    pub compressed: bool,
}

/// A spamd error status: its code and name (sysexits.h, as spamd uses them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Usage,
    DataErr,
    Unavailable,
    Software,
    TempFail,
    Protocol,
    NoPerm,
    Timeout,
}

impl Status {
    pub fn code(self) -> u8 {
        match self {
            Status::Usage => 64,
            Status::DataErr => 65,
            Status::Unavailable => 69,
            Status::Software => 70,
            Status::TempFail => 75,
            Status::Protocol => 76,
            Status::NoPerm => 77,
            Status::Timeout => 79,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Status::Usage => "EX_USAGE",
            Status::DataErr => "EX_DATAERR",
            Status::Unavailable => "EX_UNAVAILABLE",
            Status::Software => "EX_SOFTWARE",
            Status::TempFail => "EX_TEMPFAIL",
            Status::Protocol => "EX_PROTOCOL",
            Status::NoPerm => "EX_NOPERM",
            Status::Timeout => "EX_TIMEOUT",
        }
    }
}

/// A request refused: the status, and why (said in the answer's first line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub status: Status,
    pub detail: String,
    /// The metric label it is counted under.
    pub reason: &'static str,
}

impl Refusal {
    pub fn new(status: Status, reason: &'static str, detail: impl Into<String>) -> Self {
        Refusal {
            status,
            detail: detail.into(),
            reason,
        }
    }
}

pub use crate::email::head_end;

/// Whether the request whose head starts `buf` is a `TELL` (a lesson),
/// read before (or without) a head that parses.
pub fn is_tell(buf: &[u8]) -> bool {
    buf.starts_with(b"TELL ")
}

/// Reads a head (the bytes before and including its blank line).
pub fn parse_head(head: &[u8]) -> Result<Request, Refusal> {
    let text = std::str::from_utf8(head).map_err(|_| protocol("bad_head", "the request's head is not UTF-8"))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let first = lines.next().unwrap_or("");
    let (word, version) = first
        .split_once(' ')
        .ok_or_else(|| protocol("bad_head", format!("bad request line {first:?}")))?;
    let Some(command) = Command::parse(word) else {
        return Err(protocol("bad_command", format!("unknown command {word:?}")));
    };
    if !version.starts_with("SPAMC/") {
        return Err(protocol(
            "bad_head",
            format!("bad protocol {version:?}, expected SPAMC/1.x"),
        ));
    }
    let mut req = Request {
        command,
        content_length: None,
        user: None,
        class: None,
        set: None,
        remove: None,
        compressed: false,
    };
    for line in lines.take_while(|l| !l.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| protocol("bad_head", format!("bad header line {line:?}")))?;
        header(&mut req, name.trim(), value.trim())?;
    }
    Ok(req)
}

fn header(req: &mut Request, name: &str, value: &str) -> Result<(), Refusal> {
    match name.to_ascii_lowercase().as_str() {
        "content-length" => {
            let n = value
                .parse::<usize>()
                .map_err(|_| protocol("bad_length", format!("Content-length {value:?} is not a number")))?;
            req.content_length = Some(n);
        }
        "user" => {
            crate::message::check_user(value).map_err(|bad| Refusal::new(Status::Usage, "bad_user", bad.detail))?;
            req.user = Some(value.to_string());
        }
        "message-class" => {
            req.class = Some(match value.to_ascii_lowercase().as_str() {
                "spam" => Class::Spam,
                "ham" => Class::Ham,
                _ => return Err(protocol("bad_class", format!("Message-class {value:?}: spam or ham"))),
            });
        }
        "set" => req.set = databases(value)?,
        "remove" => req.remove = databases(value)?,
        "compress" => req.compressed = true,
        // Unknown headers are ignored, as the protocol says.
        _ => {}
    }
    Ok(())
}

/// `local`, `remote` or both (classifyd has one model for both), as
/// `DidSet:` and `DidRemove:` say them back.
fn databases(value: &str) -> Result<Option<String>, Refusal> {
    let mut named: Vec<&str> = Vec::new();
    for d in value.split(',').map(str::trim) {
        let d = match d.to_ascii_lowercase().as_str() {
            "local" => "local",
            "remote" => "remote",
            _ => return Err(protocol("bad_head", format!("{value:?}: local, remote or both"))),
        };
        if !named.contains(&d) {
            named.push(d);
        }
    }
    Ok(Some(named.join(",")))
}

fn protocol(reason: &'static str, detail: impl Into<String>) -> Refusal {
    Refusal::new(Status::Protocol, reason, detail)
}

/// The answer to a refused request.
pub fn refusal(r: &Refusal) -> Vec<u8> {
    // The detail goes on the status line: no line breaks in it.
    let detail: String = r.detail.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    format!("SPAMD/1.1 {} {} {detail}\r\n\r\n", r.status.code(), r.status.name()).into_bytes()
}

/// `PING`'s answer.
pub fn pong() -> Vec<u8> {
    b"SPAMD/1.1 0 PONG\r\n".to_vec()
}

/// A `TELL`'s answer: `DidSet` / `DidRemove` with the databases done, when
/// the model changed (spamc says "already learned" without them).
pub fn told(did_set: Option<&str>, did_remove: Option<&str>) -> Vec<u8> {
    let mut out = String::from("SPAMD/1.1 0 EX_OK\r\n");
    if let Some(d) = did_set {
        let _ = write!(out, "DidSet: {d}\r\n");
    }
    if let Some(d) = did_remove {
        let _ = write!(out, "DidRemove: {d}\r\n");
    }
    out.push_str("Content-length: 0\r\n\r\n");
    out.into_bytes()
}

/// The answer to a checking command for `message` (its raw bytes).
pub fn checked(command: Command, v: &Checked, message: &[u8]) -> Vec<u8> {
    let body: Vec<u8> = match command {
        Command::Check => return answer(v, None),
        Command::Symbols => v.symbol().as_bytes().to_vec(),
        Command::Report => report(v).into_bytes(),
        Command::ReportIfSpam if v.spam => report(v).into_bytes(),
        Command::ReportIfSpam => Vec::new(),
        Command::Process => with_headers(v, message, false),
        Command::Headers => with_headers(v, message, true),
        Command::Ping | Command::Skip | Command::Tell => Vec::new(),
    };
    answer(v, Some(&body))
}

fn answer(v: &Checked, body: Option<&[u8]>) -> Vec<u8> {
    let mut head = String::from("SPAMD/1.1 0 EX_OK\r\n");
    let _ = write!(
        head,
        "Spam: {} ; {:.2} / {:.1}\r\n",
        if v.spam { "True" } else { "False" },
        v.points,
        v.required
    );
    if let Some(body) = body {
        let _ = write!(head, "Content-length: {}\r\n", body.len());
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body.unwrap_or_default());
    out
}

/// A report as SpamAssassin's reads: the points, then a table of what
/// made them (the model's verdict, then the strongest features).
pub fn report(v: &Checked) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Content analysis details:   ({:.1} points, {:.1} required)",
        v.points, v.required
    );
    out.push('\n');
    out.push_str(" pts rule name              description\n");
    out.push_str("---- ---------------------- --------------------------------------------------\n");
    let _ = writeln!(
        out,
        "{:>4.1} {:<22} classifyd: {} (margin {:.6}, model version {})",
        v.points - v.required,
        v.symbol(),
        v.verdict(),
        v.margin,
        v.model_version
    );
    // A feature's points: what it added to the label's score, as spam's
    // (negative when it pushed toward ham).
    let sign = if v.spam { 1.0 } else { -1.0 };
    for f in &v.features {
        let name: String = f
            .feature
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let _ = writeln!(
            out,
            "{:>4.1} {:<22} feature ({:+.4})",
            sign * f.contribution,
            name,
            sign * f.contribution
        );
    }
    out
}

/// `message` with the `X-Spam-*` headers first (`headers_only`: its header
/// block alone, through its blank line).
fn with_headers(v: &Checked, message: &[u8], headers_only: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 256);
    if v.spam {
        out.extend_from_slice(b"X-Spam-Flag: YES\r\n");
    }
    let stars = "*".repeat(v.points.clamp(0.0, 50.0) as usize);
    let status = format!(
        "X-Spam-Status: {}, score={:.1} required={:.1} tests={} version=classifyd-{}\r\nX-Spam-Level: {stars}\r\nX-Spam-Checker-Version: classifyd {}\r\n",
        if v.spam { "Yes" } else { "No" },
        v.points,
        v.required,
        v.symbol(),
        env!("CARGO_PKG_VERSION"),
        env!("CARGO_PKG_VERSION"),
    );
    out.extend_from_slice(status.as_bytes());
    let end = if headers_only {
        head_end(message).unwrap_or(message.len())
    } else {
        message.len()
    };
    out.extend_from_slice(&message[..end]);
    out
}

#[cfg(test)]
mod tests;
