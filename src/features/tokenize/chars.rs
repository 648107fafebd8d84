//! Char classes and lowercasing for the tokenizer's non-ASCII path: a
//! table for U+0080-U+07FF built once, a range test for the CJK
//! ideographs, the standard library for the rest of Unicode. Owns the
//! tables; knows nothing of tokens.

/// The CJK Unified Ideographs: every code point is a letter without case
/// (Unicode 14 filled the block), and most of CJK text.
pub(super) const CJK_IDEOGRAPHS: std::ops::RangeInclusive<u32> = 0x4E00..=0x9FFF;

/// `c.is_alphanumeric()`, from [`two_byte`]'s table for chars under U+0800
/// and a range test for [`CJK_IDEOGRAPHS`], where the standard library
/// searches its tables char by char (its lookups took 9 % of tokenizing
/// SpamAssassin, whose text is 0.4 % non-ASCII).
/// `tests::is_alnum_is_is_alphanumeric` checks every char.
#[inline]
pub(super) fn is_alnum(c: char) -> bool {
    let u = c as u32;
    if u < 0x800 {
        return two_byte().is_alnum(u);
    }
    CJK_IDEOGRAPHS.contains(&u) || c.is_alphanumeric()
}

/// The chars under U+0800 (two bytes in UTF-8: Latin-1 and Latin Extended,
/// Greek, Cyrillic, Armenian, Hebrew, Arabic, ...), looked up rather than
/// searched for in the standard library's Unicode tables.
pub(super) struct TwoByte {
    /// Bit `u % 64` of word `u / 64`: whether char `u` is alphanumeric.
    alnum: [u64; 32],
    /// `char::to_lowercase` of char `u` where that is one char, itself
    /// under U+0800 (all but U+0130, 'İ'), else 0xD800, a surrogate, which
    /// no char is (lowercasing was a quarter of an `eval` of Cyrillic text).
    lower: [u16; 0x800],
}

impl TwoByte {
    /// Whether char `u` (under U+0800) is alphanumeric.
    #[inline]
    pub(super) fn is_alnum(&self, u: u32) -> bool {
        self.alnum[(u >> 6) as usize] >> (u & 63) & 1 != 0
    }
}

/// [`TwoByte`], built on first use from the standard library's answers;
/// `tests::push_lower_is_to_lowercase` and `tests::is_alnum_is_is_alphanumeric`
/// check every char against them.
#[inline]
pub(super) fn two_byte() -> &'static TwoByte {
    static TABLE: std::sync::OnceLock<TwoByte> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = TwoByte {
            alnum: [0; 32],
            lower: [0xD800; 0x800],
        };
        for c in (0..0x800u32).filter_map(char::from_u32) {
            let u = c as usize;
            if c.is_alphanumeric() {
                t.alnum[u >> 6] |= 1 << (u & 63);
            }
            let mut lower = c.to_lowercase();
            if let (Some(l), None) = (lower.next(), lower.next())
                && (l as u32) < 0x800
            {
                t.lower[u] = l as u16;
            }
        }
        t
    })
}

/// The code point of the two-byte char (U+0080-U+07FF) at byte `i`, a
/// char boundary, if that is what starts there: most of the non-ASCII
/// chars of alphabetic scripts, decoded here rather than by `chars()`.
#[inline(always)]
pub(super) fn two_byte_at(bytes: &[u8], i: usize) -> Option<u32> {
    match (bytes[i], bytes.get(i + 1)) {
        (lead @ 0xC0..0xE0, Some(&cont)) => Some(((lead & 0x1F) as u32) << 6 | (cont & 0x3F) as u32),
        _ => None,
    }
}

/// The char starting at byte `i`, which must be a char boundary.
#[inline]
pub(super) fn char_at(text: &str, i: usize) -> char {
    let bytes = text.as_bytes();
    let b = bytes[i];
    if b < 0x80 {
        return b as char;
    }
    if let Some(c) = two_byte_at(bytes, i).and_then(char::from_u32) {
        return c;
    }
    // `i` is always a char boundary: callers only advance by whole chars.
    text[i..].chars().next().unwrap_or('\u{FFFD}')
}

/// Symbols kept as tokens: currency, punctuation that shouts, and the marks
/// that tend to mark spam. Plain sentence punctuation (. , ; : ' ") is dropped.
#[inline]
pub(super) fn is_kept_symbol(c: char) -> bool {
    matches!(
        c,
        '!' | '?' | '$' | '£' | '€' | '¥' | '%' | '&' | '*' | '+' | '#' | '@' | '=' | '<' | '>'
    ) || (is_currency_or_symbol(c) && !is_alnum(c) && !c.is_whitespace())
}

/// Non-ASCII symbols: emoji, currency, arrows, by range alone (the few
/// letters in these ranges, such as the circled 'ⓐ', are ruled out by
/// [`is_kept_symbol`], which asks this first, as it is the cheaper test).
#[inline]
pub(super) fn is_currency_or_symbol(c: char) -> bool {
    let u = c as u32;
    (0x20A0..=0x20CF).contains(&u) // currency symbols
        || (0x2190..=0x2BFF).contains(&u) // arrows, math, dingbats
        || (0x1F000..=0x1FAFF).contains(&u) // emoji
}

/// Appends `s` lowercased to `out`, with an ASCII fast path.
#[inline]
pub(super) fn push_lower(s: &str, out: &mut String) {
    if s.is_ascii() {
        let start = out.len();
        out.push_str(s);
        out[start..].make_ascii_lowercase();
    } else {
        let table = &two_byte().lower;
        for c in s.chars() {
            let u = c as u32;
            let single = match u {
                0..0x800 => char::from_u32(table[u as usize] as u32),
                _ if CJK_IDEOGRAPHS.contains(&u) => Some(c),
                _ => None,
            };
            match single {
                Some(l) => out.push(l),
                None => out.extend(c.to_lowercase()),
            }
        }
    }
}
