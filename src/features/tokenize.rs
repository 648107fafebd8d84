//! A Unicode-aware tokenizer tuned for messages: words, numbers, URLs and
//! e-mail addresses become tokens, lowercased; symbols that carry signal in
//! spam ("!", "$", "£", "%", ...) are kept as one-character tokens.
//!
//! The tokenizer never allocates per token: it writes each lowercased token
//! into a scratch buffer and hands it to a callback.

/// Calls `emit` with every token of `text`, lowercased, in order.
///
/// `scratch` is reused between calls to avoid allocation.
pub fn tokenize(text: &str, scratch: &mut String, mut emit: impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let mut i = 0;
    // Where the next '@' is (e-mail addresses are only tried near one).
    let mut next_at = 0usize;
    // End of the URL or address just emitted whole; its parts follow as words.
    let mut special_end = 0usize;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if next_at < i {
            next_at = bytes[i..].iter().position(|&c| c == b'@').map_or(usize::MAX, |p| i + p);
        }
        // URLs and e-mail addresses: decided on the whitespace-delimited chunk.
        let email = || {
            if next_at - i <= 64 { email_end(bytes, i) } else { None }
        };
        if i >= special_end
            && let Some(end) = url_end(bytes, i).or_else(email)
        {
            scratch.clear();
            push_lower(&text[i..end], scratch);
            emit(scratch);
            // Then its parts ("example", "com", ...) as words, which generalise.
            special_end = end;
        }
        let c = char_at(text, i);
        if c.is_alphanumeric() {
            let end = word_end(text, i);
            scratch.clear();
            push_lower(&text[i..end], scratch);
            emit(scratch);
            i = end;
        } else {
            let len = c.len_utf8();
            if !c.is_whitespace() && is_kept_symbol(c) {
                scratch.clear();
                scratch.push(c);
                emit(scratch);
            }
            i += len;
        }
    }
}

/// The char starting at byte `i`, which must be a char boundary.
#[inline]
fn char_at(text: &str, i: usize) -> char {
    let b = text.as_bytes()[i];
    if b < 0x80 {
        return b as char;
    }
    // `i` is always a char boundary: callers only advance by whole chars.
    text[i..].chars().next().unwrap_or('\u{FFFD}')
}

/// Symbols kept as tokens: currency, punctuation that shouts, and the marks
/// that tend to mark spam. Plain sentence punctuation (. , ; : ' ") is dropped.
#[inline]
fn is_kept_symbol(c: char) -> bool {
    matches!(
        c,
        '!' | '?' | '$' | '£' | '€' | '¥' | '%' | '&' | '*' | '+' | '#' | '@' | '=' | '<' | '>'
    ) || (!c.is_ascii() && !c.is_alphanumeric() && !c.is_whitespace() && is_currency_or_symbol(c))
}

/// Non-ASCII symbols that are not letters or marks: emoji, currency, arrows.
#[inline]
fn is_currency_or_symbol(c: char) -> bool {
    let u = c as u32;
    (0x20A0..=0x20CF).contains(&u) // currency symbols
        || (0x2190..=0x2BFF).contains(&u) // arrows, math, dingbats
        || (0x1F000..=0x1FAFF).contains(&u) // emoji
}

/// End of a word or number starting at `i`: alphanumerics, with inner
/// apostrophes ("don't") and, between digits, "." and "," ("2.50", "1,000").
fn word_end(text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = start;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            if b.is_ascii_alphanumeric() || b == b'_' {
                i += 1;
                continue;
            }
            let inner = matches!(b, b'\'' | b'.' | b',');
            if inner && i > start && i + 1 < bytes.len() {
                let prev = bytes[i - 1];
                let next = bytes[i + 1];
                let ok = if b == b'\'' {
                    prev.is_ascii_alphabetic() && next.is_ascii_alphabetic()
                } else {
                    prev.is_ascii_digit() && next.is_ascii_digit()
                };
                if ok {
                    i += 2;
                    continue;
                }
            }
            break;
        }
        let c = char_at(text, i);
        if c.is_alphanumeric() {
            i += c.len_utf8();
        } else {
            break;
        }
    }
    i
}

/// Appends `s` lowercased to `out`, with an ASCII fast path.
#[inline]
fn push_lower(s: &str, out: &mut String) {
    if s.is_ascii() {
        let start = out.len();
        out.push_str(s);
        out[start..].make_ascii_lowercase();
    } else {
        for c in s.chars() {
            out.extend(c.to_lowercase());
        }
    }
}

/// End of the whitespace-delimited chunk starting at `i`.
fn chunk_end(bytes: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < bytes.len() && !bytes[j].is_ascii_whitespace() {
        j += 1;
    }
    j
}

/// Trims trailing punctuation that ends a sentence rather than the URL or address.
fn trim_trailing(bytes: &[u8], start: usize, mut end: usize) -> usize {
    while end > start
        && matches!(
            bytes[end - 1],
            b'.' | b',' | b';' | b':' | b'!' | b'?' | b')' | b']' | b'>' | b'"' | b'\''
        )
    {
        end -= 1;
    }
    end
}

/// If a URL starts at `i`, where it ends.
fn url_end(bytes: &[u8], i: usize) -> Option<usize> {
    if !matches!(bytes[i], b'h' | b'H' | b'w' | b'W') {
        return None;
    }
    let rest = &bytes[i..];
    let starts = |p: &[u8]| rest.len() > p.len() && rest[..p.len()].eq_ignore_ascii_case(p);
    if !(starts(b"http://") || starts(b"https://") || starts(b"www.")) {
        return None;
    }
    let end = trim_trailing(bytes, i, chunk_end(bytes, i));
    // A URL must have something after its scheme.
    (end > i + 4).then_some(end)
}

/// If an e-mail address starts at `i`, where it ends: `local@domain.tld`,
/// where every byte is ASCII alphanumeric or one of `.+-_` (and `@` once).
fn email_end(bytes: &[u8], i: usize) -> Option<usize> {
    if !bytes[i].is_ascii_alphanumeric() {
        return None;
    }
    let mut j = i;
    let mut at = None;
    while j < bytes.len() {
        let b = bytes[j];
        if b == b'@' {
            if at.is_some() {
                return None;
            }
            at = Some(j);
        } else if !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-' | b'_')) {
            break;
        }
        j += 1;
    }
    let at = at?;
    let end = trim_trailing(bytes, i, j);
    let domain = &bytes[at + 1..end];
    let dot = domain.iter().rposition(|&b| b == b'.')?;
    (at > i && dot > 0 && dot + 1 < domain.len()).then_some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut scratch = String::new();
        tokenize(s, &mut scratch, |t| out.push(t.to_string()));
        out
    }

    #[test]
    fn words_are_lowercased_and_split_on_punctuation() {
        assert_eq!(toks("Hello, World. Ok"), ["hello", "world", "ok"]);
    }

    #[test]
    fn spam_symbols_are_kept() {
        assert_eq!(toks("WIN $100!!"), ["win", "$", "100", "!", "!"]);
        assert_eq!(toks("£5 off"), ["£", "5", "off"]);
    }

    #[test]
    fn numbers_keep_inner_separators() {
        assert_eq!(
            toks("call 0800.123 or pay 1,000.50"),
            ["call", "0800.123", "or", "pay", "1,000.50"]
        );
        assert_eq!(toks("end 5."), ["end", "5"]);
    }

    #[test]
    fn apostrophes_inside_words() {
        assert_eq!(toks("don't 'quote'"), ["don't", "quote"]);
    }

    #[test]
    fn urls_and_emails_are_tokens_and_so_are_their_parts() {
        assert_eq!(
            toks("visit http://Example.com/x?a=1. or mail Bob.Smith@Mail.Example.org!"),
            [
                "visit",
                "http://example.com/x?a=1",
                "http",
                "example",
                "com",
                "x",
                "?",
                "a",
                "=",
                "1",
                "or",
                "mail",
                "bob.smith@mail.example.org",
                "bob",
                "smith",
                "@",
                "mail",
                "example",
                "org",
                "!"
            ]
        );
        assert_eq!(toks("www.win.co.uk"), ["www.win.co.uk", "www", "win", "co", "uk"]);
        assert_eq!(toks("a@b"), ["a", "@", "b"]);
    }

    #[test]
    fn unicode_words_are_lowercased() {
        assert_eq!(toks("ÜBER Straße Ελλάδα"), ["über", "straße", "ελλάδα"]);
        assert_eq!(toks("日本語です"), ["日本語です"]);
    }

    proptest::proptest! {
        /// Any string tokenizes without panicking, into non-empty lowercase tokens.
        #[test]
        fn any_text_tokenizes(s in "\\PC{0,300}") {
            for t in toks(&s) {
                proptest::prop_assert!(!t.is_empty());
            }
        }
    }

    #[test]
    fn emoji_are_kept_as_symbols() {
        assert_eq!(toks("hi 😀"), ["hi", "😀"]);
    }
}
