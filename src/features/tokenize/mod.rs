//! A Unicode-aware tokenizer tuned for messages: words, numbers, URLs and
//! e-mail addresses become tokens, lowercased; symbols that carry signal in
//! spam ("!", "$", "£", "%", ...) are kept as one-character tokens.
//!
//! The tokenizer never allocates per token: it lowercases the text's ASCII
//! letters once into a scratch buffer and hands each token to a callback as
//! a slice of it (only tokens that need Unicode lowercasing are copied).

mod chars;

use chars::{char_at, is_alnum, is_kept_symbol, push_lower, two_byte, two_byte_at};

/// Byte classes for the ASCII fast path.
const WORD_START: u8 = 1; // ASCII letter or digit: a word may start here
const WORD_CONT: u8 = 2; // letter, digit or '_': a word goes on
const KEPT: u8 = 8; // a one-byte symbol token
const SPACE: u8 = 16; // ASCII whitespace
const HIGH: u8 = 32; // part of a multi-byte char

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = if c >= 0x80 {
            HIGH
        } else if c.is_ascii_alphanumeric() {
            WORD_START | WORD_CONT
        } else if c == b'_' {
            WORD_CONT
        } else if c.is_ascii_whitespace() {
            SPACE
        } else if matches!(
            c,
            b'!' | b'?' | b'$' | b'%' | b'&' | b'*' | b'+' | b'#' | b'@' | b'=' | b'<' | b'>'
        ) {
            KEPT
        } else {
            0
        };
        b += 1;
    }
    t
};

#[inline(always)]
fn class(b: u8) -> u8 {
    CLASS[b as usize]
}

/// Calls `emit` with every token of `text`, lowercased, in order.
///
/// `scratch` is reused between calls to avoid allocation: it holds the text
/// with its ASCII letters lowercased (the same byte offsets, still UTF-8),
/// which ASCII tokens are handed out from without copying; a token that
/// needs Unicode lowercasing is built after it and cut off again.
///
/// ASCII text takes a fast path that classifies 64 bytes at a time into bit
/// masks; whatever it cannot settle from the masks (non-ASCII chars, the
/// inner rules of words, a word running past the window) goes through
/// [`step`], the byte-at-a-time rules.
pub fn tokenize(text: &str, scratch: &mut String, mut emit: impl FnMut(&str)) {
    scratch.clear();
    scratch.push_str(text);
    scratch.make_ascii_lowercase();
    let mut at = Cursor::default();
    while at.i < text.len() {
        if let Some(w) = Window::at(text.as_bytes(), at.i)
            && window_tokens(text, &w, &mut at, scratch, &mut emit)
        {
            continue;
        }
        step(text, &mut at, scratch, &mut emit);
    }
}

/// Where the tokenizer is in a text.
#[derive(Default)]
struct Cursor {
    /// The next byte to look at.
    i: usize,
    /// Where the next '@' is (e-mail addresses are only tried near one).
    next_at: usize,
    /// End of the URL or address just emitted whole; its parts follow as words.
    special_end: usize,
}

/// One token's worth of the byte-at-a-time rules from `at.i`: emits the
/// token there (if any) and moves past it, or past a run of separators.
/// `lower` is `text` ASCII-lowercased (see [`tokenize`]).
fn step(text: &str, at: &mut Cursor, lower: &mut String, emit: &mut impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let n = bytes.len();
    let i = at.i;
    let b = bytes[i];
    let cls = class(b);
    if cls & WORD_START != 0 {
        let (end, high) = word_end(text, i);
        emit_word(text, i, end, high, true, at, lower, emit);
        at.i = end;
    } else if cls & KEPT != 0 {
        emit(&text[i..i + 1]);
        at.i = i + 1;
    } else if cls & HIGH == 0 {
        // Whitespace, a leading '_', or dropped punctuation: skip the run.
        let mut j = i + 1;
        while j < n && class(bytes[j]) & (WORD_START | KEPT | HIGH) == 0 {
            j += 1;
        }
        at.i = j;
    } else {
        // A multi-byte char: the Unicode rules.
        let c = char_at(text, i);
        if is_alnum(c) {
            let (end, _) = word_end(text, i);
            emit_lower(&text[i..end], lower, emit);
            at.i = end;
        } else {
            if !c.is_whitespace() && is_kept_symbol(c) {
                emit(&text[i..i + c.len_utf8()]);
            }
            at.i = i + c.len_utf8();
        }
    }
}

/// Emits the word `text[start..end]` (an ASCII one from `lower`), after the
/// URL or e-mail address that starts with it, if one does; `maybe_special`
/// false says the caller knows none does.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn emit_word(
    text: &str,
    start: usize,
    end: usize,
    high: bool,
    maybe_special: bool,
    at: &mut Cursor,
    lower: &mut String,
    emit: &mut impl FnMut(&str),
) {
    // URLs and e-mail addresses: decided on the whitespace-delimited chunk.
    if maybe_special
        && start >= at.special_end
        && let Some(special) = special_end_at(text.as_bytes(), start, end, &mut at.next_at)
    {
        emit_lower(&text[start..special], lower, emit);
        // Then its parts ("example", "com", ...) as words, which generalise.
        at.special_end = special;
    }
    if high {
        emit_lower(&text[start..end], lower, emit);
    } else {
        emit(&lower[start..end]);
    }
}

/// The 64 bytes from some position, classified: bit `k` of each mask is
/// about byte `k`.
#[derive(Debug, PartialEq)]
struct Window {
    /// Letters, digits and '_': what a word is made of.
    word: u64,
    /// ASCII letters and digits: where a word may start.
    alnum: u64,
    /// Where a URL may start (`url_may_start`).
    url: u64,
    /// One-byte symbol tokens.
    kept: u64,
    /// Bytes of multi-byte chars.
    high: u64,
}

impl Window {
    /// The window at `i`; `None` when fewer than 64 bytes are left (or off x86-64).
    #[inline(always)]
    fn at(bytes: &[u8], i: usize) -> Option<Window> {
        #[cfg(target_arch = "x86_64")]
        {
            let chunk: &[u8; 64] = bytes.get(i..i + 64)?.try_into().ok()?;
            let mut w = Window {
                word: 0,
                alnum: 0,
                url: 0,
                kept: 0,
                high: 0,
            };
            for (k, part) in chunk.chunks_exact(16).enumerate() {
                let [word, alnum, url, kept, high] = classify16(part);
                let shift = 16 * k;
                w.word |= (word as u64) << shift;
                w.alnum |= (alnum as u64) << shift;
                w.url |= (url as u64) << shift;
                w.kept |= (kept as u64) << shift;
                w.high |= (high as u64) << shift;
            }
            Some(w)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (bytes, i);
            None
        }
    }
}

/// The class masks of 16 bytes (see [`Window`]), by SSE2 compares.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn classify16(part: &[u8]) -> [u16; 5] {
    use std::arch::x86_64::*;
    assert_eq!(part.len(), 16);
    // SAFETY: SSE2 is part of the x86-64 baseline, and `part` holds the 16
    // bytes the unaligned load reads (checked just above).
    unsafe {
        let v = _mm_loadu_si128(part.as_ptr() as *const __m128i);
        // Signed compares: bytes >= 0x80 are negative and match no range.
        let within = |lo: u8, hi: u8| {
            _mm_and_si128(
                _mm_cmpgt_epi8(v, _mm_set1_epi8(lo as i8 - 1)),
                _mm_cmplt_epi8(v, _mm_set1_epi8(hi as i8 + 1)),
            )
        };
        let is = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
        let alnum = _mm_or_si128(_mm_or_si128(within(b'a', b'z'), within(b'A', b'Z')), within(b'0', b'9'));
        let word = _mm_or_si128(alnum, is(b'_'));
        // h H w W, as in `url_may_start`.
        let url = _mm_or_si128(_mm_or_si128(is(b'h'), is(b'H')), _mm_or_si128(is(b'w'), is(b'W')));
        // ! # $ % & * + < = > ? @, as in `CLASS`.
        let kept = _mm_or_si128(
            _mm_or_si128(is(b'!'), within(b'#', b'&')),
            _mm_or_si128(within(b'*', b'+'), within(b'<', b'@')),
        );
        let mask = |m: __m128i| _mm_movemask_epi8(m) as u16;
        [mask(word), mask(alnum), mask(url), mask(kept), mask(v)]
    }
}

/// The tokens of window `w` (at `at.i`), for as long as the masks settle
/// them: returns true having moved `at.i` past the window, or false with
/// `at.i` where [`step`] must take over. Does exactly what [`step`] would.
/// `lower` is `text` ASCII-lowercased (see [`tokenize`]).
#[inline(always)]
fn window_tokens(text: &str, w: &Window, at: &mut Cursor, lower: &mut String, emit: &mut impl FnMut(&str)) -> bool {
    let bytes = text.as_bytes();
    let base = at.i;
    // The bytes `step` stops at; separators between them are skipped.
    let stops = w.alnum | w.kept | w.high;
    let mut pos = 0;
    loop {
        let ahead = if pos < 64 { stops & (!0u64 << pos) } else { 0 };
        if ahead == 0 {
            at.i = base + 64;
            return true;
        }
        let p = ahead.trailing_zeros();
        let bit = 1u64 << p;
        let start = base + p as usize;
        if w.high & bit != 0 {
            at.i = start;
            return false;
        }
        if w.kept & bit != 0 {
            emit(&text[start..start + 1]);
            pos = p + 1;
            continue;
        }
        // A word starts; it ends at the first non-word byte, if the window
        // holds one. If not, the next window starts with the word, unless
        // this one already did (a word of 64 bytes or more).
        let after = !w.word & (!0u64 << p);
        if after == 0 {
            at.i = start;
            return p > 0;
        }
        let e = after.trailing_zeros();
        let end = base + e as usize;
        // The byte after the word (in the window). Inner apostrophes and
        // separators between digits, or a letter of another script, would
        // continue the word: those are `step`'s to follow.
        let next = bytes[end];
        if next >= 0x80 || joins_word(bytes, end) {
            at.i = start;
            return false;
        }
        // The masks and the byte in hand rule most words out as the start
        // of a URL or an address (`special_end_at` asks the same).
        let maybe_special = w.url & bit != 0 || address_goes_on(next);
        emit_word(text, start, end, false, maybe_special, at, lower, emit);
        pos = e;
    }
}

/// Where the URL or e-mail address that starts at `i` ends, if one does;
/// `word_end` is where the word starting at `i` ends, `next_at` caches the
/// position of the next '@'. Cheap tests first: most words are neither.
#[inline(always)]
fn special_end_at(bytes: &[u8], i: usize, word_end: usize, next_at: &mut usize) -> Option<usize> {
    if let Some(end) = url_end(bytes, i) {
        return Some(end);
    }
    // An address runs over [alnum . + - _ @] from `i` and holds an '@': the
    // word's letters, digits and '_' are such bytes, so the byte after the
    // word must be one of the others, or the run ends there without an '@'.
    if !bytes.get(word_end).is_some_and(|&b| address_goes_on(b)) {
        return None;
    }
    if *next_at < i {
        *next_at = memchr_at(bytes, i);
    }
    if *next_at - i <= 64 { email_end(bytes, i) } else { None }
}

/// How many of the 16 bytes at `i` continue an ASCII word (letters, digits,
/// '_') before the first that does not; `None` when fewer than 16 bytes are
/// left (or off x86-64).
#[inline(always)]
fn ascii_word_run(bytes: &[u8], i: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        // The other masks go unused and are compiled away.
        let [word, ..] = classify16(bytes.get(i..i + 16)?);
        // 16 when all are word bytes.
        Some((!word).trailing_zeros() as usize)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (bytes, i);
        None
    }
}

/// The position of the first '@' at or after `i`, or `usize::MAX`.
#[inline]
fn memchr_at(bytes: &[u8], i: usize) -> usize {
    memchr::memchr(b'@', &bytes[i..]).map_or(usize::MAX, |p| i + p)
}

/// Emits `s` lowercased, built at the end of `lower` and cut off again (so
/// `lower` still holds the lowercased text afterwards).
#[inline]
fn emit_lower(s: &str, lower: &mut String, emit: &mut impl FnMut(&str)) {
    let n = lower.len();
    push_lower(s, lower);
    emit(&lower[n..]);
    lower.truncate(n);
}

/// End of a word or number starting at `start`: alphanumerics (and '_'),
/// with inner apostrophes ("don't") and, between digits, "." and ","
/// ("2.50", "1,000"); and whether it holds non-ASCII chars.
#[inline(always)]
fn word_end(text: &str, start: usize) -> (usize, bool) {
    let bytes = text.as_bytes();
    let n = bytes.len();
    let mut i = start;
    let mut high = false;
    loop {
        // Sixteen bytes at a time while the word goes on (most words end in the first sixteen).
        while let Some(len) = ascii_word_run(bytes, i) {
            i += len;
            if len < 16 {
                break;
            }
        }
        while i < n && class(bytes[i]) & WORD_CONT != 0 {
            i += 1;
        }
        if i >= n {
            return (i, high);
        }
        if bytes[i] < 0x80 {
            if i > start && joins_word(bytes, i) {
                i += 2;
                continue;
            }
            return (i, high);
        }
        // A run of non-ASCII chars, without the ASCII tests per char; a
        // two-byte one (most chars of alphabetic scripts) without making
        // a `char` of it either.
        while i < n && bytes[i] >= 0x80 {
            let (alnum, len) = match two_byte_at(bytes, i) {
                Some(u) => (two_byte().is_alnum(u), 2),
                None => {
                    let c = char_at(text, i);
                    (is_alnum(c), c.len_utf8())
                }
            };
            if !alnum {
                return (i, high);
            }
            high = true;
            i += len;
        }
    }
}

/// Whether the ASCII byte at `i`, which follows a word byte, joins the word
/// to the next one: an apostrophe between letters ("don't"), or "." or ","
/// between digits ("2.50", "1,000").
#[inline(always)]
fn joins_word(bytes: &[u8], i: usize) -> bool {
    let (prev, next) = (bytes[i - 1], bytes.get(i + 1).copied().unwrap_or(0));
    match bytes[i] {
        b'\'' => prev.is_ascii_alphabetic() && next.is_ascii_alphabetic(),
        b'.' | b',' => prev.is_ascii_digit() && next.is_ascii_digit(),
        _ => false,
    }
}

/// Whether an e-mail address that a word starts could go on past the byte
/// `b` after the word: the word's letters, digits and '_' are address
/// bytes, so only the address's other bytes (or its '@') continue it.
#[inline(always)]
fn address_goes_on(b: u8) -> bool {
    matches!(b, b'@' | b'.' | b'+' | b'-')
}

/// Whether a URL may start with the byte `b` ("http", "https", "www").
#[inline(always)]
fn url_may_start(b: u8) -> bool {
    matches!(b, b'h' | b'H' | b'w' | b'W')
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
#[inline(always)]
fn url_end(bytes: &[u8], i: usize) -> Option<usize> {
    // Most words are not URLs: two bytes tell ("ht", "ww", any case), here,
    // inlined into the tokenizer's loop; the rest is a call.
    if !url_may_start(bytes[i]) || !matches!(bytes.get(i + 1).map(|b| b | 0x20), Some(b't' | b'w')) {
        return None;
    }
    url_end_after_check(bytes, i)
}

/// [`url_end`] past its two-byte check.
#[inline(never)]
fn url_end_after_check(bytes: &[u8], i: usize) -> Option<usize> {
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
mod tests;
