//! Tests of the parent module.

use super::*;

#[test]
fn push_lower_is_to_lowercase() {
    let mut out = String::new();
    for c in (0x80..=0x10FFFFu32).filter_map(char::from_u32) {
        out.clear();
        push_lower(c.encode_utf8(&mut [0; 4]), &mut out);
        assert_eq!(out, c.to_lowercase().collect::<String>(), "U+{:04X}", c as u32);
    }
}

#[test]
fn kept_symbols_are_symbols_not_letters() {
    for c in ['!', '$', '£', '€', '→', '✓', '😀'] {
        assert!(is_kept_symbol(c), "{c}");
    }
    for c in ['a', '.', '’', 'é', 'ж', '\u{2003}', 'ⓐ', 'Ⓐ'] {
        assert!(!is_kept_symbol(c), "{c}");
    }
}

#[test]
fn is_alnum_is_is_alphanumeric() {
    for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
        assert_eq!(is_alnum(c), c.is_alphanumeric(), "{c:?} U+{:04X}", c as u32);
    }
}

/// The tokenizer as first written (char by char): the fast path must agree with it.
mod reference {
    use super::super::{char_at, email_end, is_kept_symbol, push_lower, url_end};

    /// Calls `emit` with every token of `text`, lowercased, in order.
    ///
    /// `scratch` is reused between calls to avoid allocation.
    pub(super) fn tokenize(text: &str, scratch: &mut String, mut emit: impl FnMut(&str)) {
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
}

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

fn reference_toks(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut scratch = String::new();
    reference::tokenize(s, &mut scratch, |t| out.push(t.to_string()));
    out
}

#[test]
fn agrees_with_the_reference_on_real_messages() {
    let data = include_str!("../../../tests/data/sms_head1000.jsonl");
    for line in data.lines() {
        assert_eq!(toks(line), reference_toks(line), "{line}");
    }
    for s in [
        "DON'T Stop",
        "A.B 1,000.5X http://X.com/Y WWW.A.B foo@BAR.com_x _x_ x_Y",
        "a-b@x.com a+b@x.com a.b@x.com a_b@x.com 1,2@x.com don't@x.com",
    ] {
        assert_eq!(toks(s), reference_toks(s), "{s}");
    }
}

proptest::proptest! {
    /// The fast path agrees with the char-by-char tokenizer, on text
    /// dense in the bytes its rules turn on.
    #[test]
    fn agrees_with_the_reference(s in "([a-zA-Z0-9_@.,':/?!$+\\- \\n\t]|http://|www\\.|ÜB|ß|é|😀|€|ǅ|Σ){0,80}") {
        proptest::prop_assert_eq!(toks(&s), reference_toks(&s));
    }

    /// Addresses and URLs among words: every byte an address may hold
    /// before its '@' (the fast path only tries one after such a byte).
    #[test]
    fn agrees_with_the_reference_on_addresses(
        s in "(([a-zA-Z0-9_]{1,4}[-+._]?){1,3}@[a-z0-9-]{1,4}(\\.[a-z]{1,3}){1,2}|https?://[a-z.]{1,6}|www\\.[a-z]{1,4}|[a-zA-Z0-9_]{1,5}|[ ,.@<>:'-]){0,20}"
    ) {
        proptest::prop_assert_eq!(toks(&s), reference_toks(&s));
    }

    #[test]
    fn agrees_with_the_reference_on_any_text(s in "\\PC{0,200}") {
        proptest::prop_assert_eq!(toks(&s), reference_toks(&s));
    }

    /// Long enough for the 64-byte windows, with every rule's bytes near
    /// their edges: words running over them, capitals, inner
    /// separators, addresses, URLs and non-ASCII letters.
    #[test]
    fn agrees_with_the_reference_across_windows(
        s in "([a-zA-Z0-9_]{1,70}|[ .,'@+\\-!?$_/:]{1,3}|http://a.b/c|www\\.x\\.y|a@b\\.co|1,000\\.5|ÜB|é|😀|€|\n){0,60}"
    ) {
        proptest::prop_assert_eq!(toks(&s), reference_toks(&s));
    }
}

/// The window's masks say of every byte what `CLASS` says.
#[cfg(target_arch = "x86_64")]
#[test]
fn window_masks_agree_with_the_class_table() {
    let all: Vec<u8> = (0..=255).collect();
    for (k, chunk) in all.chunks_exact(64).enumerate() {
        let w = Window::at(chunk, 0).expect("64 bytes");
        for (j, &b) in chunk.iter().enumerate() {
            let c = class(b);
            let bit = |m: u64| m >> j & 1 == 1;
            let at = format!("byte {:#04x} (window {k})", b);
            assert_eq!(bit(w.word), c & WORD_CONT != 0, "word, {at}");
            assert_eq!(bit(w.alnum), c & WORD_START != 0, "alnum, {at}");
            assert_eq!(bit(w.url), url_may_start(b), "url, {at}");
            assert_eq!(bit(w.kept), c & KEPT != 0, "kept, {at}");
            assert_eq!(bit(w.high), c & HIGH != 0, "high, {at}");
        }
    }
    assert_eq!(Window::at(&all[..63], 0), None);
}

#[test]
fn emoji_are_kept_as_symbols() {
    assert_eq!(toks("hi 😀"), ["hi", "😀"]);
}
