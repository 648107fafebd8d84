//! Raw e-mail (RFC 5322 and MIME) into the text the model reads.
//!
//! mail-parser decodes the message: the MIME tree, base64 and
//! quoted-printable, charsets, RFC 2047 words, HTML to text. The document
//! it becomes has three views, each measured (docs/accuracy.md):
//!
//! 1. **raw**: the first [`RAW_PREFIX_BYTES`] of the message as it came
//!    (lossy UTF-8), headers and all. The character n-grams read the head
//!    of the document, so they see what the TREC filters' byte n-grams saw.
//! 2. **headers**: one namespaced token per fact (`from_domain__example_com`,
//!    `received_host__mail_example_com`, `list_id__...`, `content_type__...`,
//!    the names of the headers present, ...), written so the tokenizer keeps
//!    each whole: `field__value`, the value lowercased with every other
//!    character than a letter or a digit made `_`.
//! 3. **body**: `Subject: ` and the decoded subject, then the text parts
//!    (HTML converted), and each attachment's type and file extension
//!    (never its bytes).
//!
//! Bounded: at most [`MAX_BODY_BYTES`] of decoded text, [`MAX_PARTS`]
//! parts and [`MAX_HEADER_TOKENS`] header tokens; a message past a bound is
//! cut there (and says so in [`Rendered::cut`]). mail-parser itself stops
//! at three levels of encapsulated messages.

use std::borrow::Cow;

use mail_parser::decoders::html::html_to_text;
use mail_parser::{Host, MessageParser, MimeHeaders, PartType};

/// The id a raw e-mail is learned and checked under by every endpoint
/// (spamd, rspamd, a console's scan): its Message-ID, else `mail-` and a
/// hash of its bytes (so that the same bytes told again, or forgotten,
/// name the same message).
pub fn message_key(raw: &[u8]) -> String {
    let head = &raw[..head_end(raw).unwrap_or(raw.len())];
    MessageParser::default()
        .parse_headers(head)
        .and_then(|m| m.message_id().map(str::to_string))
        .filter(|id| !id.is_empty() && id.len() <= 998)
        .unwrap_or_else(|| format!("mail-{:032x}", xxhash_rust::xxh3::xxh3_128(raw)))
}

/// Where a head ends in `buf`: the index just past its blank line, if
/// `buf` holds it (`\r\n\r\n`, or bare `\n\n` as some clients send).
pub fn head_end(buf: &[u8]) -> Option<usize> {
    let mut at = 0;
    while let Some(n) = buf[at..].iter().position(|&b| b == b'\n') {
        let line_end = at + n;
        let line = &buf[at..line_end];
        if line.is_empty() || line == b"\r" {
            return Some(line_end + 1);
        }
        at = line_end + 1;
    }
    None
}

/// Bytes of the raw message at the head of the document.
pub const RAW_PREFIX_BYTES: usize = 3000;
/// Most bytes of decoded text (subject, text parts) kept.
pub const MAX_BODY_BYTES: usize = 64 << 10;
/// Most bytes of a raw message parsed: past them it is cut (a large
/// attachment is not decoded whole; `--max-message-bytes` refuses larger
/// input before it gets here, at 1 MiB by default).
pub const MAX_PARSE_BYTES: usize = 4 << 20;
/// Most MIME parts looked at.
pub const MAX_PARTS: usize = 64;
/// Most header tokens written.
pub const MAX_HEADER_TOKENS: usize = 256;
/// Longest value in a header token, in bytes.
const MAX_TOKEN_VALUE: usize = 64;

/// Which views of a message the document holds (`--email-views`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Views {
    pub raw: bool,
    pub headers: bool,
    pub body: bool,
}

impl Default for Views {
    fn default() -> Self {
        Views {
            raw: true,
            headers: true,
            body: true,
        }
    }
}

impl Views {
    /// Parses a comma-separated list of `raw`, `headers`, `body` (or `all`).
    pub fn parse(s: &str) -> Result<Views, String> {
        let mut v = Views {
            raw: false,
            headers: false,
            body: false,
        };
        for part in s.split(',').map(str::trim) {
            match part {
                "raw" => v.raw = true,
                "headers" => v.headers = true,
                "body" => v.body = true,
                "all" => v = Views::default(),
                other => return Err(format!("unknown e-mail view {other:?} (raw, headers, body, all)")),
            }
        }
        if !(v.raw || v.headers || v.body) {
            return Err("no e-mail view chosen".into());
        }
        Ok(v)
    }
}

/// A message made into text.
#[derive(Debug, PartialEq)]
pub struct Rendered {
    pub text: String,
    /// A bound was reached and the message cut there.
    pub cut: bool,
    /// Its Message-ID, if it has one (an id when the input gives none).
    pub message_id: Option<String>,
}

/// Why a message could not be read as e-mail at all.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("not an e-mail message: {0}")]
pub struct NotEmail(pub &'static str);

/// Renders the raw message `raw` with `views` into the document the model reads.
pub fn render(raw: &[u8], views: Views) -> Result<Rendered, NotEmail> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Err(NotEmail("the message is empty"));
    }
    let whole = raw;
    let raw = &raw[..raw.len().min(MAX_PARSE_BYTES)];
    let msg = MessageParser::default()
        .parse(raw)
        .ok_or(NotEmail("no header or body could be parsed"))?;
    if !msg.headers().iter().any(|h| is_field_name(h.name())) {
        return Err(NotEmail("no header field"));
    }
    let mut out = Rendered {
        text: String::with_capacity(raw.len().min(RAW_PREFIX_BYTES + MAX_BODY_BYTES) + 1024),
        cut: whole.len() > raw.len(),
        message_id: msg.message_id().map(str::to_string),
    };
    if views.raw {
        let end = raw.len().min(RAW_PREFIX_BYTES);
        out.text.push_str(&String::from_utf8_lossy(&raw[..end]));
        out.text.push('\n');
    }
    if views.headers {
        let mut tokens = Tokens::new(&mut out.text);
        header_tokens(&msg, &mut tokens);
        out.cut |= tokens.cut;
        out.text.push('\n');
    }
    if views.body {
        out.cut |= body(&msg, &mut out.text);
    }
    Ok(out)
}

/// An RFC 5322 field name: printable ASCII but the colon, no space.
fn is_field_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| (33..=126).contains(&b) && b != b':')
}

/// Writes namespaced tokens into a document, at most [`MAX_HEADER_TOKENS`].
struct Tokens<'a> {
    out: &'a mut String,
    n: usize,
    cut: bool,
}

impl<'a> Tokens<'a> {
    fn new(out: &'a mut String) -> Self {
        Tokens { out, n: 0, cut: false }
    }

    /// Writes `field__value` (see the module's doc).
    fn push(&mut self, field: &str, value: &str) {
        if self.n >= MAX_HEADER_TOKENS {
            self.cut = true;
            return;
        }
        self.n += 1;
        self.out.push(' ');
        self.out.push_str(field);
        self.out.push_str("__");
        let mut written = 0;
        for c in value.trim().chars().flat_map(char::to_lowercase) {
            if written >= MAX_TOKEN_VALUE {
                break;
            }
            self.out.push(if c.is_alphanumeric() { c } else { '_' });
            written += c.len_utf8();
        }
    }

    /// An address's full form and its domain.
    fn address(&mut self, field: &str, addr: Option<&str>) {
        let Some(addr) = addr.filter(|a| !a.is_empty()) else {
            return;
        };
        self.push(&format!("{field}_addr"), addr);
        if let Some((_, domain)) = addr.rsplit_once('@') {
            self.push(&format!("{field}_domain"), domain);
            let org = registered(domain);
            if org.len() < domain.len() {
                self.push(&format!("{field}_org"), org);
            }
        }
    }
}

/// The header facts of `msg` as tokens.
fn header_tokens(msg: &mail_parser::Message<'_>, t: &mut Tokens<'_>) {
    t.address("from", msg.from().and_then(|a| a.first()).and_then(|a| a.address()));
    t.address(
        "reply_to",
        msg.reply_to().and_then(|a| a.first()).and_then(|a| a.address()),
    );
    t.address("return_path", msg.return_address());
    t.address("sender", msg.sender().and_then(|a| a.first()).and_then(|a| a.address()));
    if let Some(domain) = msg.message_id().and_then(|id| id.rsplit_once('@')).map(|(_, d)| d) {
        t.push("message_id_domain", domain);
    }
    for r in msg.received_all().take(8) {
        for host in [&r.from, &r.by].into_iter().flatten() {
            match host {
                Host::Name(name) => {
                    t.push("received_host", name);
                    t.push("received_domain", registered(name));
                }
                Host::IpAddr(ip) => t.push("received_net", &network(*ip)),
            }
        }
        if let Some(ip) = r.from_ip {
            t.push("received_net", &network(ip));
        }
    }
    for header in msg.headers() {
        let name = header.name();
        t.push("header", name);
        let value = header.value().as_text();
        match name.to_ascii_lowercase().as_str() {
            "x-mailer" | "user-agent" => {
                if let Some(v) = value {
                    t.push("mailer", v.split_whitespace().next().unwrap_or(v));
                }
            }
            "list-id" => {
                let raw = msg.header_raw(name).unwrap_or("");
                // `Name <id>`: the id is what names the list.
                let id = raw
                    .rsplit_once('<')
                    .map_or(raw, |(_, rest)| rest.trim_end_matches(['>', ' ']));
                t.push("list_id", id);
            }
            "precedence" => t.push("precedence", msg.header_raw(name).unwrap_or("")),
            "authentication-results" | "received-spf" => {
                for verdict in header_raw_words(msg, name)
                    .into_iter()
                    .filter(|w| w.contains('='))
                    .take(8)
                {
                    t.push("auth", &verdict);
                }
            }
            _ => {}
        }
    }
    if let Some(ct) = msg.root_part().content_type() {
        t.push(
            "content_type",
            &format!("{}_{}", ct.ctype(), ct.subtype().unwrap_or("")),
        );
        if let Some(charset) = ct.attribute("charset") {
            t.push("charset", charset);
        }
    }
}

/// The whitespace-separated words of header `name`'s raw value.
fn header_raw_words(msg: &mail_parser::Message<'_>, name: &str) -> Vec<String> {
    msg.header_raw(name)
        .map(|v| {
            v.split_whitespace()
                .map(|w| w.trim_end_matches(';').to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A host name's last two labels (`mail3.lists.example.org` ->
/// `example.org`): what a relay or a sender's many hosts share.
fn registered(host: &str) -> &str {
    let host = host.trim_end_matches('.');
    match host.rmatch_indices('.').nth(1) {
        Some((i, _)) => &host[i + 1..],
        None => host,
    }
}

/// The /24 (IPv4) or /48 (IPv6) network an address belongs to.
fn network(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            format!("{a}_{b}_{c}")
        }
        std::net::IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{:x}_{:x}_{:x}", s[0], s[1], s[2])
        }
    }
}

/// Writes the subject, the text parts and the attachments' types into
/// `out`; true when a bound cut them.
fn body(msg: &mail_parser::Message<'_>, out: &mut String) -> bool {
    let start = out.len();
    out.push_str("Subject: ");
    out.push_str(msg.subject().unwrap_or(""));
    out.push_str("\n\n");
    let mut cut = false;
    let texts = msg.text_body_count();
    for i in 0..texts.min(MAX_PARTS) {
        let Some(part) = msg.text_part(i as u32) else {
            continue;
        };
        let text: Cow<'_, str> = match &part.body {
            PartType::Text(text) => Cow::Borrowed(text.as_ref()),
            PartType::Html(html) => Cow::Owned(html_to_text(html)),
            _ => continue,
        };
        let room = MAX_BODY_BYTES.saturating_sub(out.len() - start);
        if text.len() > room {
            out.push_str(&text[..text.floor_char_boundary(room)]);
            cut = true;
            break;
        }
        out.push_str(&text);
        out.push('\n');
    }
    cut |= texts > MAX_PARTS;
    let mut tokens = Tokens::new(out);
    for part in msg.attachments().take(MAX_PARTS) {
        if let Some(ct) = part.content_type() {
            tokens.push(
                "attachment_type",
                &format!("{}_{}", ct.ctype(), ct.subtype().unwrap_or("")),
            );
        }
        if let Some(ext) = part.attachment_name().and_then(|n| n.rsplit_once('.')).map(|(_, e)| e) {
            tokens.push("attachment_ext", ext);
        }
    }
    cut | tokens.cut | (msg.attachment_count() > MAX_PARTS)
}

#[cfg(test)]
mod tests;
