//! Text to sparse feature vectors: tokenization, word and character n-grams,
//! feature hashing into `2^bits` buckets, value weighting and normalisation.
//!
//! Hashing uses xxh3-64 with a seed; the bucket of a feature is its hash
//! masked to `bits`. The bits, seed and the rest of [`FeatureConfig`] live in
//! the checkpoint, and `tests::golden_bucket_ids` pins known bucket ids so a
//! saved model keeps its meaning across releases.

mod tokenize;

pub use tokenize::tokenize;

use std::fmt;
use std::str::FromStr;

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// How a feature's value is derived from its count in the document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueMode {
    /// 1 for every feature present.
    Binary,
    /// The number of occurrences.
    Count,
    /// ln(1 + count): damps long documents that repeat words.
    LogCount,
}

impl ValueMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ValueMode::Binary => "binary",
            ValueMode::Count => "count",
            ValueMode::LogCount => "log-count",
        }
    }
}

impl fmt::Display for ValueMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ValueMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "binary" => Ok(ValueMode::Binary),
            "count" => Ok(ValueMode::Count),
            "log-count" | "log" => Ok(ValueMode::LogCount),
            other => Err(format!(
                "unknown feature value mode {other:?} (expected binary, count or log-count)"
            )),
        }
    }
}

/// Everything that decides which bucket and value a document's features get.
/// Stored in the checkpoint: changing any field changes the model's meaning.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct FeatureConfig {
    /// log2 of the number of hash buckets.
    pub bits: u8,
    /// Seed of the xxh3 feature hash.
    pub seed: u64,
    /// Word n-grams up to this length (1 = unigrams only, 0 = no words).
    pub word_ngrams: u8,
    /// Character n-gram lengths, inclusive; `None` turns them off.
    pub char_ngrams: Option<(u8, u8)>,
    /// Character n-grams are taken from at most this many bytes of the text.
    pub char_prefix_bytes: usize,
    /// Lowercase the text before taking character n-grams.
    pub char_lowercase: bool,
    /// How counts become values.
    pub value: ValueMode,
    /// Scale the vector (without the bias) to unit L2 norm.
    pub normalize: bool,
    /// Weight values by inverse document frequency learned from the stream.
    pub idf: bool,
}

impl Default for FeatureConfig {
    fn default() -> Self {
        FeatureConfig {
            bits: 20,
            seed: 0,
            word_ngrams: 2,
            char_ngrams: Some((3, 4)),
            char_prefix_bytes: 3000,
            char_lowercase: false,
            value: ValueMode::LogCount,
            normalize: true,
            idf: true,
        }
    }
}

/// Why a feature configuration cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("--bits must be between 4 and 30, got {0}")]
    Bits(u8),
    #[error("--ngrams must be between 0 and 5, got {0}")]
    WordNgrams(u8),
    #[error("--char-ngrams must be MIN-MAX with 1 <= MIN <= MAX <= 10, got {0}-{1}")]
    CharNgrams(u8, u8),
    #[error("no features: both word and character n-grams are off")]
    NoFeatures,
}

impl FeatureConfig {
    /// Checks the ranges once, so the featurizer can rely on them.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(4..=30).contains(&self.bits) {
            return Err(ConfigError::Bits(self.bits));
        }
        if self.word_ngrams > 5 {
            return Err(ConfigError::WordNgrams(self.word_ngrams));
        }
        if let Some((lo, hi)) = self.char_ngrams
            && !(1 <= lo && lo <= hi && hi <= 10)
        {
            return Err(ConfigError::CharNgrams(lo, hi));
        }
        if self.word_ngrams == 0 && self.char_ngrams.is_none() {
            return Err(ConfigError::NoFeatures);
        }
        Ok(())
    }

    /// The number of buckets, `2^bits`.
    pub fn buckets(&self) -> usize {
        1usize << self.bits
    }
}

/// Parses `MIN-MAX`, `N` or `0` (off) into a character n-gram range.
pub fn parse_char_ngrams(s: &str) -> Result<Option<(u8, u8)>, String> {
    let bad = || format!("invalid character n-gram range {s:?} (expected MIN-MAX, N, or 0 for off)");
    let (lo, hi) = match s.split_once('-') {
        Some((a, b)) => (
            a.trim().parse::<u8>().map_err(|_| bad())?,
            b.trim().parse::<u8>().map_err(|_| bad())?,
        ),
        None => {
            let n = s.trim().parse::<u8>().map_err(|_| bad())?;
            (n, n)
        }
    };
    if lo == 0 && hi == 0 {
        return Ok(None);
    }
    if lo == 0 || lo > hi {
        return Err(bad());
    }
    Ok(Some((lo, hi)))
}

/// A sparse vector as parallel arrays of bucket ids (unique, in order of
/// first occurrence) and values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SparseVec {
    pub idx: Vec<u32>,
    pub val: Vec<f32>,
}

impl SparseVec {
    pub fn len(&self) -> usize {
        self.idx.len()
    }
    pub fn is_empty(&self) -> bool {
        self.idx.is_empty()
    }
    pub fn clear(&mut self) {
        self.idx.clear();
        self.val.clear();
    }
    pub fn iter(&self) -> impl Iterator<Item = (u32, f32)> + '_ {
        self.idx.iter().copied().zip(self.val.iter().copied())
    }
}

/// Namespaces keep a word, a bigram and a character n-gram with the same
/// bytes in different buckets.
const NS_WORD: u64 = 0x9E37_79B9_7F4A_7C15;
const NS_CHAR: u64 = 0xC2B2_AE3D_27D4_EB4F;
const NS_BIAS: u64 = 0x1656_67B1_9E37_79F9;

/// Combines the hash of an n-gram so far with the next token's hash.
#[inline]
fn combine(acc: u64, next: u64) -> u64 {
    // A multiply-rotate mix: cheap, order-sensitive, stable forever.
    (acc.rotate_left(27) ^ next).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// xxh3-64 of exactly 3 or 4 bytes with a fixed seed: the values
/// `xxh3_64_with_seed` gives (the XXH3 specification's 1-to-3 and 4-to-8
/// byte paths, each for its one length), without its dispatch on the length
/// or a slice per call. Character 3- and 4-grams are most of what the
/// default features hash. `tests::short_hashes_are_xxh3` checks them
/// against the crate.
#[derive(Clone, Copy, Debug)]
struct ShortHash {
    seed: u64,
    /// The 1-to-3 path's key.
    flip3: u64,
    /// The 4-to-8 path's key.
    flip4: u64,
}

impl ShortHash {
    /// Little-endian words at offsets 0, 4, 8 and 16 of XXH3's default secret.
    const SECRET_0: u32 = u32::from_le_bytes([0xb8, 0xfe, 0x6c, 0x39]);
    const SECRET_4: u32 = u32::from_le_bytes([0x23, 0xa4, 0x4b, 0xbe]);
    const SECRET_8: u64 = u64::from_le_bytes([0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c]);
    const SECRET_16: u64 = u64::from_le_bytes([0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb]);

    fn new(seed: u64) -> Self {
        let seed4 = seed ^ (((seed as u32).swap_bytes() as u64) << 32);
        ShortHash {
            seed,
            flip3: ((Self::SECRET_0 ^ Self::SECRET_4) as u64).wrapping_add(seed),
            flip4: (Self::SECRET_8 ^ Self::SECRET_16).wrapping_sub(seed4),
        }
    }

    /// xxh3-64 of `piece` with the seed: by the short formulas when it is
    /// 3 or 4 bytes long, by the crate otherwise.
    #[inline(always)]
    fn hash(&self, piece: &[u8]) -> u64 {
        match *piece {
            [a, b, c] => self.three(&[a, b, c]),
            [a, b, c, d] => self.four(&[a, b, c, d]),
            _ => xxh3_64_with_seed(piece, self.seed),
        }
    }

    #[inline(always)]
    fn three(&self, b: &[u8; 3]) -> u64 {
        let combined = (b[0] as u32) << 16 | (b[1] as u32) << 24 | b[2] as u32 | 3 << 8;
        // XXH64's avalanche.
        let mut h = combined as u64 ^ self.flip3;
        h ^= h >> 33;
        h = h.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        h ^= h >> 29;
        h = h.wrapping_mul(0x1656_67B1_9E37_79F9);
        h ^ h >> 32
    }

    #[inline(always)]
    fn four(&self, b: &[u8; 4]) -> u64 {
        // The first and the last four bytes are the same four.
        let x = u32::from_le_bytes(*b) as u64;
        let mut h = x.wrapping_add(x << 32) ^ self.flip4;
        // XXH3's rrmxmx, with the length 4.
        h ^= h.rotate_left(49) ^ h.rotate_left(24);
        h = h.wrapping_mul(0x9FB2_1C65_1E98_DF25);
        h ^= (h >> 35).wrapping_add(4);
        h = h.wrapping_mul(0x9FB2_1C65_1E98_DF25);
        h ^ h >> 28
    }
}

/// The bucket of the bias feature ("the fake word <s>" every document has).
pub fn bias_bucket(cfg: &FeatureConfig) -> u32 {
    (xxh3_64_with_seed(b"<s>", cfg.seed ^ NS_BIAS) & mask(cfg)) as u32
}

/// Where the character n-grams' window of `text` ends: at most
/// `char_prefix_bytes`, on a char boundary.
fn char_prefix_end(text: &str, cfg: &FeatureConfig) -> usize {
    let mut end = text.len().min(cfg.char_prefix_bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

#[inline]
fn mask(cfg: &FeatureConfig) -> u64 {
    (1u64 << cfg.bits) - 1
}

/// The feature names of one document: (bucket, name) pairs, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct FeatureNames<'a> {
    text: &'a str,
    spans: &'a [(u32, u32, u32)],
}

impl<'a> FeatureNames<'a> {
    pub fn iter(&self) -> impl Iterator<Item = (u32, &'a str)> + '_ {
        let text = self.text;
        self.spans
            .iter()
            .map(move |&(b, start, end)| (b, &text[start as usize..end as usize]))
    }
}

/// Turns texts into [`SparseVec`]s, reusing its buffers between documents.
#[derive(Debug)]
pub struct Featurizer {
    cfg: FeatureConfig,
    /// Hashes of the current document's tokens.
    token_hashes: Vec<u64>,
    /// Bucket ids before counting (with repeats).
    buckets: Vec<u32>,
    /// Byte offsets of char boundaries in the character n-gram window.
    char_offsets: Vec<usize>,
    /// Lowercased copy of the text's prefix, when char n-grams are lowercased.
    lower: String,
    /// Reused token buffer.
    scratch: String,
    /// The current document's feature names, when asked for: the text of
    /// every name, one after another ...
    name_text: String,
    /// ... and (bucket, start, end) of each name in `name_text`.
    names: Vec<(u32, u32, u32)>,
    /// Where each token starts and ends in `name_text` (words separated by
    /// one space, so an n-gram's name is one contiguous range).
    token_spans: Vec<(u32, u32)>,
    /// Open-addressing table for counting repeats without sorting.
    table: CountTable,
    bias: u32,
}

impl Featurizer {
    /// `cfg` must have passed [`FeatureConfig::validate`].
    pub fn new(cfg: FeatureConfig) -> Self {
        let bias = bias_bucket(&cfg);
        Featurizer {
            cfg,
            token_hashes: Vec::new(),
            buckets: Vec::new(),
            char_offsets: Vec::new(),
            lower: String::new(),
            scratch: String::new(),
            name_text: String::new(),
            names: Vec::new(),
            token_spans: Vec::new(),
            table: CountTable::default(),
            bias,
        }
    }

    pub fn config(&self) -> &FeatureConfig {
        &self.cfg
    }

    /// Featurizes `text` into `out` (cleared first), complete: values,
    /// normalisation and bias, with no IDF weighting.
    pub fn featurize(&mut self, text: &str, out: &mut SparseVec) {
        self.featurize_raw(text, out);
        self.finalize(out, None);
    }

    /// The document's features with their values (binary, count or
    /// log-count), before IDF weighting, normalisation and the bias: what
    /// [`Featurizer::finalize`] completes.
    pub fn featurize_raw(&mut self, text: &str, out: &mut SparseVec) {
        self.extract(text, false);
        self.count(out);
    }

    /// Like [`Featurizer::featurize_raw`], and also returns each bucket's
    /// human-readable feature (for the model's feature-name sketch), without
    /// an allocation per name.
    pub fn featurize_raw_named(&mut self, text: &str, out: &mut SparseVec) -> FeatureNames<'_> {
        self.names.clear();
        self.name_text.clear();
        self.token_spans.clear();
        self.extract(text, true);
        self.count(out);
        FeatureNames {
            text: &self.name_text,
            spans: &self.names,
        }
    }

    /// Completes a raw vector in place: IDF weights (when given), L2
    /// normalisation (when configured), then the bias feature with value 1.
    pub fn finalize(&self, x: &mut SparseVec, idf: Option<&DocFreq>) {
        self.finalize_prefetching(x, idf, |_| {});
    }

    /// [`Featurizer::finalize`], calling `ahead` with each bucket a few
    /// features before IDF weighting reaches it: the model prefetches its
    /// row there, so the row's cache miss overlaps the count's.
    pub fn finalize_prefetching(&self, x: &mut SparseVec, idf: Option<&DocFreq>, ahead: impl Fn(u32)) {
        if let Some(d) = idf {
            d.weigh(x, ahead);
        }
        if self.cfg.normalize && !x.val.is_empty() {
            let norm = x.val.iter().map(|v| v * v).sum::<f32>().sqrt();
            if norm > 0.0 {
                let inv = 1.0 / norm;
                for v in &mut x.val {
                    *v *= inv;
                }
            }
        }
        // The bias: merged if a feature already hashes to its bucket.
        match position_of(&x.idx, self.bias) {
            Some(pos) => x.val[pos] += 1.0,
            None => {
                x.idx.push(self.bias);
                x.val.push(1.0);
            }
        }
    }

    /// The bucket of the bias feature.
    pub fn bias(&self) -> u32 {
        self.bias
    }

    /// The document's buckets into `self.buckets` (cleared first), and
    /// with `named` each one's feature name.
    fn extract(&mut self, text: &str, named: bool) {
        let mut buckets = std::mem::take(&mut self.buckets);
        buckets.clear();
        let chars_from = self.extract_into(text, named, &mut buckets);
        self.buckets = buckets;
        if named {
            // Without word n-grams no token was kept, and this names none.
            self.name_word_ngrams();
            if let Some((lo, hi)) = self.cfg.char_ngrams {
                let end = char_prefix_end(text, &self.cfg);
                self.name_char_ngrams(chars_from, lo, hi, &text[..end]);
            }
        }
    }

    /// Appends the document's buckets, repeats and all, to `out` (words
    /// and word n-grams, then character n-grams); with `named`, also keeps
    /// the tokens' text for [`Featurizer::name_word_ngrams`]. Returns
    /// where in `out` the character n-grams begin.
    fn extract_into(&mut self, text: &str, named: bool, out: &mut Vec<u32>) -> usize {
        let cfg = &{ self.cfg };
        let m = mask(cfg);
        self.token_hashes.clear();
        let seed = cfg.seed;
        if cfg.word_ngrams > 0 {
            let hashes = &mut self.token_hashes;
            let (name_text, spans) = (&mut self.name_text, &mut self.token_spans);
            tokenize(text, &mut self.scratch, |tok| {
                hashes.push(xxh3_64_with_seed(tok.as_bytes(), seed ^ NS_WORD));
                if named {
                    if !name_text.is_empty() {
                        name_text.push(' ');
                    }
                    let start = name_text.len() as u32;
                    name_text.push_str(tok);
                    spans.push((start, name_text.len() as u32));
                }
            });
            let n = self.token_hashes.len();
            out.reserve(n * cfg.word_ngrams as usize);
            for i in 0..n {
                let mut h = self.token_hashes[i];
                out.push((h & m) as u32);
                for len in 2..=cfg.word_ngrams as usize {
                    if i + len > n {
                        break;
                    }
                    h = combine(h, self.token_hashes[i + len - 1]);
                    out.push((h & m) as u32);
                }
            }
        }
        let chars_from = out.len();
        if let Some((lo, hi)) = cfg.char_ngrams {
            let end = char_prefix_end(text, cfg);
            let window: &str = if cfg.char_lowercase {
                self.lower.clear();
                self.lower.push_str(&text[..end]);
                self.lower.make_ascii_lowercase();
                &self.lower
            } else {
                &text[..end]
            };
            let bytes = window.as_bytes();
            let short = ShortHash::new(seed ^ NS_CHAR);
            if window.is_ascii() {
                let buckets = &mut *out;
                for n in lo as usize..=hi as usize {
                    let grams = bytes.windows(n);
                    buckets.reserve(grams.len());
                    // `windows` yields slices of exactly `n` bytes: every conversion succeeds.
                    let bucket = |h: u64| (h & m) as u32;
                    match n {
                        3 => buckets.extend(grams.filter_map(|g| g.try_into().ok()).map(|g| bucket(short.three(g)))),
                        4 => buckets.extend(grams.filter_map(|g| g.try_into().ok()).map(|g| bucket(short.four(g)))),
                        _ => buckets.extend(grams.map(|g| bucket(short.hash(g)))),
                    }
                }
            } else {
                self.char_offsets.clear();
                self.char_offsets.extend(window.char_indices().map(|(i, _)| i));
                self.char_offsets.push(window.len());
                let chars = self.char_offsets.len() - 1;
                for n in lo as usize..=hi as usize {
                    for start in 0..chars.saturating_sub(n - 1) {
                        // Most grams of a mostly-ASCII text are 3 or 4 bytes
                        // long, and take the short formulas.
                        let piece = &bytes[self.char_offsets[start]..self.char_offsets[start + n]];
                        out.push((short.hash(piece) & m) as u32);
                    }
                }
            }
        }
        chars_from
    }

    /// Pairs each word n-gram bucket with its text ("free entry"): the
    /// range from its first token's start to its last token's end.
    fn name_word_ngrams(&mut self) {
        let n = self.token_spans.len();
        let mut k = 0;
        for i in 0..n {
            for len in 1..=self.cfg.word_ngrams as usize {
                if i + len > n {
                    break;
                }
                let (start, end) = (self.token_spans[i].0, self.token_spans[i + len - 1].1);
                self.names.push((self.buckets[k], start, end));
                k += 1;
            }
        }
    }

    /// Pairs each character n-gram bucket with its text, quoted ("c:'free'").
    /// `prefix` is the window before lowercasing (`self.lower` holds it after).
    fn name_char_ngrams(&mut self, first: usize, lo: u8, hi: u8, prefix: &str) {
        use std::fmt::Write;
        let lower = std::mem::take(&mut self.lower);
        let window = if self.cfg.char_lowercase {
            lower.as_str()
        } else {
            prefix
        };
        self.char_offsets.clear();
        self.char_offsets.extend(window.char_indices().map(|(i, _)| i));
        self.char_offsets.push(window.len());
        let chars = self.char_offsets.len() - 1;
        let mut k = first;
        for n in lo as usize..=hi as usize {
            for start in 0..chars.saturating_sub(n - 1) {
                let piece = &window[self.char_offsets[start]..self.char_offsets[start + n]];
                let from = self.name_text.len() as u32;
                // Writing to a String cannot fail.
                let _ = write!(self.name_text, "c:{piece:?}");
                self.names.push((self.buckets[k], from, self.name_text.len() as u32));
                k += 1;
            }
        }
        self.lower = lower;
    }

    /// Appends the document's feature buckets, repeats and all, in order,
    /// to `out`: the hashing half of [`Featurizer::featurize_raw`] (the rest
    /// is [`Featurizer::count_buckets`]), so the two can run on different threads.
    pub fn hash_buckets(&mut self, text: &str, out: &mut Vec<u32>) {
        // Straight into `out`: a batch's buckets are not copied there
        // from a buffer of the featurizer's.
        self.extract_into(text, false, out);
    }

    /// The raw vector of buckets from [`Featurizer::hash_buckets`]: repeats
    /// counted and the value mode applied.
    pub fn count_buckets(&mut self, buckets: &[u32], out: &mut SparseVec) {
        count_into(&mut self.table, buckets, self.cfg.value, out);
    }

    /// Counts repeats in `self.buckets` and applies the value mode.
    fn count(&mut self, out: &mut SparseVec) {
        count_into(&mut self.table, &self.buckets, self.cfg.value, out);
    }
}

/// The index of the first `b` in `ids`: like `position`, but tests 16 at
/// a time without an early exit, which compiles to vector compares (the
/// bias is rarely there, so the whole vector is usually searched).
fn position_of(ids: &[u32], b: u32) -> Option<usize> {
    let mut chunks = ids.chunks_exact(16);
    for (c, chunk) in chunks.by_ref().enumerate() {
        if chunk.iter().fold(false, |seen, &i| seen | (i == b)) {
            return chunk.iter().position(|&i| i == b).map(|p| c * 16 + p);
        }
    }
    let rest = chunks.remainder();
    rest.iter().position(|&i| i == b).map(|p| ids.len() - rest.len() + p)
}

/// The table [`count_into`] counts a document's repeated buckets in. A
/// slot packs the document's stamp (which document wrote it), the bucket
/// and its position in the output; a slot with an older stamp is empty. So
/// a long document starts on the table as the last one left it instead of
/// clearing up to megabytes of it (SpamAssassin's longest messages have
/// 55,000 features: a 1 MiB table).
#[derive(Clone, Debug, Default)]
struct CountTable {
    slots: Vec<u64>,
    /// The current document's stamp: 1 to `STAMPS - 1` (0: never written).
    stamp: u64,
}

/// Slot layout: stamp (12 bits) | bucket (30 bits: `bits` <= 30) | position (22 bits).
const POSITION_BITS: u32 = 22;
const POSITION: u64 = (1 << POSITION_BITS) - 1;
const STAMP_SHIFT: u32 = 52;
const STAMPS: u64 = 1 << (64 - STAMP_SHIFT);
/// Tables up to this many slots (64 KiB) are cleared anyway: see [`CountTable::start`].
const SWEPT: usize = 8192;

impl CountTable {
    /// Readies at least `cap` slots for a new document: a new stamp; the
    /// whole table is cleared only when it grows or the stamps wrap (every
    /// 4,095 documents), the first `cap` slots also when they are few.
    fn start(&mut self, cap: usize) {
        if self.slots.len() < cap {
            self.slots.clear();
            self.slots.resize(cap, 0);
            self.stamp = 0;
        }
        self.stamp += 1;
        if self.stamp == STAMPS {
            self.slots.fill(0);
            self.stamp = 1;
        }
        // A small table is still cleared: that is cheap, and brings its
        // lines into the cache in one sweep, where probes into lines other
        // work evicted since the last document would miss one by one (the
        // daemon, which does that other work between messages, ran slower
        // on SMS without it).
        if cap <= SWEPT {
            self.slots[..cap].fill(0);
        }
    }
}

/// Counts bucket repeats into `out` (in order of first occurrence) through
/// the open-addressing `table`, and applies the value mode.
fn count_into(table: &mut CountTable, buckets: &[u32], value: ValueMode, out: &mut SparseVec) {
    let n = buckets.len();
    // Work on the vectors as locals: their lengths and pointers stay in
    // registers instead of being reloaded through `out` after every store.
    let (mut idx, mut val) = (std::mem::take(&mut out.idx), std::mem::take(&mut out.val));
    idx.clear();
    val.clear();
    idx.reserve(n);
    val.reserve(n);
    if n > POSITION as usize {
        // Over 4 M features in one document: positions would not fit a slot.
        let mut seen = std::collections::HashMap::with_capacity(n / 2);
        for &b in buckets {
            match seen.entry(b) {
                std::collections::hash_map::Entry::Occupied(e) => val[*e.get()] += 1.0,
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(idx.len());
                    idx.push(b);
                    val.push(1.0);
                }
            }
        }
    } else {
        // At most half full, so every probe ends at an empty slot.
        let cap = (2 * n + 2).next_power_of_two().max(16);
        let shift = 64 - cap.trailing_zeros();
        let mask = cap - 1;
        table.start(cap);
        let slots = &mut table.slots[..cap];
        let stamp = table.stamp;
        let tag = stamp << STAMP_SHIFT;
        // Whether a bucket is new or a repeat is a coin toss to the branch
        // predictor (SpamAssassin: 38 % of buckets repeat), so both run the
        // same stores, their values picked by a mask: the bucket is written
        // at the end of `idx` (kept only when new), and one is added to its
        // value, where it was first seen or, new, at the end (from zero).
        idx.resize(n, 0);
        val.resize(n, 0.0);
        let mut len = 0usize;
        for &b in buckets {
            let key = tag | (b as u64) << POSITION_BITS;
            let mut pos = ((b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize;
            // Stop at the bucket's slot or an empty one (another
            // document's stamp): at most half full, so one is found.
            let (at, e, d) = loop {
                let e = slots[pos & mask];
                // Zero when the slot holds the bucket; under 2^52 (the
                // stamps agree) when it holds another of this document's.
                // One compare, almost always true, stops at either the
                // bucket or an empty slot, rather than a first branch on
                // whether the bucket was seen.
                let d = (e & !POSITION) ^ key;
                if d.wrapping_sub(1) >= (1 << STAMP_SHIFT) - 1 {
                    break (pos & mask, e, d);
                }
                pos += 1;
            };
            // All ones when the bucket was seen, else zero.
            let seen = u64::from(d == 0).wrapping_neg();
            let fresh = key | len as u64;
            slots[at] = (e & seen) | (fresh & !seen);
            idx[len] = b;
            val[((e & POSITION & seen) | (len as u64 & !seen)) as usize] += 1.0;
            len += usize::from(seen == 0);
        }
        idx.truncate(len);
        val.truncate(len);
    }
    let repeats = n - idx.len();
    match value {
        ValueMode::Binary => val.fill(1.0),
        ValueMode::Count => {}
        // Every count is 1: every value is ln 2.
        ValueMode::LogCount if repeats == 0 => val.fill(std::f32::consts::LN_2),
        ValueMode::LogCount => {
            // Counts are small integers: look the common ones up.
            const LN_1P: [f32; 9] = [
                0.0,
                std::f32::consts::LN_2,
                1.098_612_3,
                1.386_294_4,
                1.609_438,
                1.791_759_5,
                1.945_910_1,
                2.079_441_5,
                2.197_224_6,
            ];
            for v in &mut val {
                *v = if *v == 1.0 {
                    std::f32::consts::LN_2
                } else {
                    LN_1P.get(*v as usize).copied().unwrap_or_else(|| v.ln_1p())
                };
            }
        }
    }
    out.idx = idx;
    out.val = val;
}

/// Document frequencies learned from the stream, for IDF weighting:
/// `idf(f) = ln((1 + N) / (1 + df(f))) + 1` (scikit-learn's smooth IDF),
/// with N the documents observed. Part of the model's learned state.
#[derive(Clone, Debug, PartialEq)]
pub struct DocFreq {
    /// Documents containing each bucket.
    pub(crate) df: Vec<u32>,
    /// Documents observed.
    pub(crate) docs: u64,
    /// `ln(1 + docs)`.
    ln_docs: f32,
}

/// Hints the CPU to fetch `v[i]` (no effect when `i` is out of bounds):
/// for lookups scattered over megabytes, a cache miss each, issued early so
/// their latencies overlap. Into L2 (`T1`), not L1: with the IDF counts
/// fetched 32 features ahead rather than 16 into L1, `classifyd run` over
/// SMS x 8 took 6-24 % less CPU and `eval` of SpamAssassin with the
/// defaults 4-12 % less (three rounds of 7-9 alternated runs; docs/speed-history.md).
#[inline(always)]
pub(crate) fn prefetch<T>(v: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if i < v.len() {
        // SAFETY: prefetching is a hint with no memory effects (it never
        // faults), and the address is inside `v` anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                v.as_ptr().wrapping_add(i) as *const i8
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, i);
}

/// `ln(1 + d)` for the document frequencies most buckets have, looked up
/// instead of computed (the same f32 expression, so the same values).
const LN_1P_TABLE: usize = 8192;

fn ln_1p_table() -> &'static [f32] {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| (0..LN_1P_TABLE).map(|d| (1.0 + d as f32).ln()).collect())
}

impl DocFreq {
    pub fn new(buckets: usize) -> Self {
        DocFreq {
            df: crate::hugepages::zeroed(buckets),
            docs: 0,
            ln_docs: 0.0,
        }
    }

    /// Rebuilds the state after a restore.
    pub(crate) fn with_counts(df: Vec<u32>, docs: u64) -> Self {
        DocFreq {
            df,
            docs,
            ln_docs: (1.0 + docs as f32).ln(),
        }
    }

    /// The IDF weight of a bucket with document frequency `df`, `table`
    /// from [`ln_1p_table`].
    #[inline(always)]
    fn weight_of(&self, df: u32, table: &[f32]) -> f32 {
        let ln_df = match table.get(df as usize) {
            Some(&l) => l,
            None => (1.0 + df as f32).ln(),
        };
        self.ln_docs - ln_df + 1.0
    }

    /// Multiplies every value of `x` by its bucket's IDF weight, calling
    /// `also` with each bucket when its count is prefetched.
    pub fn weigh(&self, x: &mut SparseVec, also: impl Fn(u32)) {
        /// How many features ahead the counts are fetched: they are
        /// scattered over megabytes, a cache miss each (see [`prefetch`]).
        const AHEAD: usize = 32;
        let table = ln_1p_table();
        let (idx, val) = (&x.idx, &mut x.val);
        for (j, (&i, v)) in idx.iter().zip(val.iter_mut()).enumerate() {
            if let Some(&ahead) = idx.get(j + AHEAD) {
                prefetch(&self.df, ahead as usize);
                also(ahead);
            }
            *v *= self.weight_of(self.df[i as usize], table);
        }
    }

    /// Counts one document: the buckets of its features.
    pub fn observe(&mut self, buckets: &[u32]) {
        for &i in buckets {
            let d = &mut self.df[i as usize];
            *d = d.saturating_add(1);
        }
        self.docs += 1;
        self.ln_docs = (1.0 + self.docs as f32).ln();
    }

    pub fn docs(&self) -> u64 {
        self.docs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words_only(bits: u8) -> FeatureConfig {
        FeatureConfig {
            bits,
            char_ngrams: None,
            value: ValueMode::Count,
            normalize: false,
            ..FeatureConfig::default()
        }
    }

    /// `featurize_raw_named`'s (bucket, name) pairs, owned.
    fn owned_names(f: &mut Featurizer, text: &str, v: &mut SparseVec) -> Vec<(u32, String)> {
        f.featurize_raw_named(text, v)
            .iter()
            .map(|(b, s)| (b, s.to_string()))
            .collect()
    }

    /// Pins bucket ids: if this test fails, saved checkpoints change meaning.
    /// Never update the numbers without bumping the checkpoint format version.
    #[test]
    fn golden_bucket_ids() {
        let cfg = words_only(20);
        let mut f = Featurizer::new(cfg);
        let mut v = SparseVec::default();
        let names = owned_names(&mut f, "Free entry", &mut v);
        let got: Vec<(String, u32)> = names.into_iter().map(|(b, s)| (s, b)).collect();
        assert_eq!(
            got,
            [
                ("free".to_string(), 109627),
                ("free entry".to_string(), 819877),
                ("entry".to_string(), 157062)
            ]
        );
        assert_eq!(bias_bucket(&cfg), 882499);
        let cfg = FeatureConfig {
            char_ngrams: Some((4, 4)),
            word_ngrams: 0,
            ..words_only(22)
        };
        let mut f = Featurizer::new(cfg);
        let names = owned_names(&mut f, "Win!", &mut v);
        assert_eq!(names, [(3882435, "c:\"Win!\"".to_string())]);
    }

    proptest::proptest! {
        /// The specialised 3- and 4-byte hashes are xxh3's, for any bytes and seed.
        #[test]
        fn short_hashes_are_xxh3(b in proptest::prelude::any::<[u8; 4]>(), seed in proptest::prelude::any::<u64>()) {
            let short = ShortHash::new(seed);
            proptest::prop_assert_eq!(short.three(&[b[0], b[1], b[2]]), xxh3_64_with_seed(&b[..3], seed));
            proptest::prop_assert_eq!(short.four(&b), xxh3_64_with_seed(&b, seed));
            for len in 0..=4 {
                proptest::prop_assert_eq!(short.hash(&b[..len]), xxh3_64_with_seed(&b[..len], seed));
            }
        }
    }

    #[test]
    fn counts_merge_and_bias_is_present() {
        let cfg = words_only(18);
        let mut f = Featurizer::new(cfg);
        let mut v = SparseVec::default();
        f.featurize("spam spam spam", &mut v);
        // "spam", "spam spam" and the bias.
        assert_eq!(v.len(), 3);
        let mut vals = v.val.clone();
        vals.sort_by(f32::total_cmp);
        assert_eq!(vals, [1.0, 2.0, 3.0]);
        assert!(v.idx.contains(&bias_bucket(&cfg)));
        let mut sorted = v.idx.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), v.idx.len(), "indices unique");
    }

    proptest::proptest! {
        #[test]
        fn position_of_is_position(ids in proptest::collection::vec(0u32..8, 0..70), b in 0u32..8) {
            proptest::prop_assert_eq!(position_of(&ids, b), ids.iter().position(|&i| i == b));
        }
    }

    /// Repeats counted the plain way: buckets in order of first occurrence.
    fn plain_counts(buckets: &[u32]) -> SparseVec {
        let mut out = SparseVec::default();
        for &b in buckets {
            match out.idx.iter().position(|&i| i == b) {
                Some(p) => out.val[p] += 1.0,
                None => {
                    out.idx.push(b);
                    out.val.push(1.0);
                }
            }
        }
        out
    }

    /// One table serves document after document: stale slots of earlier
    /// documents read as empty, across the stamps' wrap every 4,095
    /// documents.
    #[test]
    fn counting_table_reused_across_documents() {
        let mut table = CountTable::default();
        let mut out = SparseVec::default();
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for doc in 0..9000 {
            // Small documents (their table is swept) between long ones
            // (theirs relies on the stamps); few distinct buckets, so
            // repeats and probe chains are common.
            let len = if doc % 3 == 0 {
                4100 + (next() % 2000) as usize
            } else {
                (next() % 40) as usize
            };
            let buckets: Vec<u32> = (0..len)
                .map(|_| ((next() % 64) as u32 * 0x0100_0001) & ((1 << 30) - 1))
                .collect();
            count_into(&mut table, &buckets, ValueMode::Count, &mut out);
            assert_eq!(out, plain_counts(&buckets), "document {doc}");
        }
    }

    /// A document with more features than a slot's position field holds
    /// (over 4 M) is counted too.
    #[test]
    fn counting_over_four_million_features() {
        let n = (1usize << POSITION_BITS) + 100;
        let buckets: Vec<u32> = (0..n as u32).map(|i| i % (n as u32 - 50)).collect();
        let mut out = SparseVec::default();
        count_into(&mut CountTable::default(), &buckets, ValueMode::Count, &mut out);
        assert_eq!(out.len(), n - 50);
        assert_eq!(out.idx[..3], [0, 1, 2]);
        assert_eq!(out.val[..50], [2.0; 50]);
        assert!(out.val[50..].iter().all(|&v| v == 1.0));
    }

    #[test]
    fn normalised_vector_has_unit_norm_without_bias() {
        let cfg = FeatureConfig {
            normalize: true,
            ..words_only(20)
        };
        let bias = bias_bucket(&cfg);
        let mut f = Featurizer::new(cfg);
        let mut v = SparseVec::default();
        f.featurize("a b c d e a", &mut v);
        let norm: f32 = v.iter().filter(|&(i, _)| i != bias).map(|(_, x)| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }

    #[test]
    fn char_ngrams_respect_prefix_and_unicode() {
        let cfg = FeatureConfig {
            word_ngrams: 0,
            char_ngrams: Some((2, 3)),
            char_prefix_bytes: 5,
            value: ValueMode::Binary,
            normalize: false,
            ..words_only(20)
        };
        let mut f = Featurizer::new(cfg);
        let mut v = SparseVec::default();
        let names: Vec<String> = f
            .featurize_raw_named("añbcdef", &mut v)
            .iter()
            .map(|(_, s)| s.to_string())
            .collect();
        // The prefix is 5 bytes: "añbc" (ñ is two bytes).
        assert_eq!(names, ["c:\"añ\"", "c:\"ñb\"", "c:\"bc\"", "c:\"añb\"", "c:\"ñbc\""]);
        // A prefix ending inside a char is cut back to a boundary.
        f.featurize("ññññ", &mut v);
        assert_eq!(v.len(), 1 + 1, "one distinct bigram (ññ) and the bias");
    }

    #[test]
    fn log_count_table_matches_ln_1p() {
        let cfg = FeatureConfig {
            value: ValueMode::LogCount,
            normalize: false,
            ..words_only(18)
        };
        let mut f = Featurizer::new(cfg);
        let mut v = SparseVec::default();
        for n in 1..=12 {
            f.featurize_raw(&vec!["w"; n].join(" "), &mut v);
            let unigram = v.val.iter().copied().fold(f32::MIN, f32::max);
            assert!((unigram - (n as f32).ln_1p()).abs() < 1e-6, "count {n}");
        }
    }

    #[test]
    fn empty_text_has_only_the_bias() {
        let mut f = Featurizer::new(FeatureConfig::default());
        let mut v = SparseVec::default();
        f.featurize("", &mut v);
        assert_eq!(v.idx, [bias_bucket(&FeatureConfig::default())]);
        assert_eq!(v.val, [1.0]);
    }

    #[test]
    fn config_validation() {
        assert_eq!(
            FeatureConfig {
                bits: 31,
                ..Default::default()
            }
            .validate(),
            Err(ConfigError::Bits(31))
        );
        assert_eq!(
            FeatureConfig {
                word_ngrams: 0,
                char_ngrams: None,
                ..Default::default()
            }
            .validate(),
            Err(ConfigError::NoFeatures)
        );
        assert_eq!(parse_char_ngrams("0"), Ok(None));
        assert_eq!(parse_char_ngrams("3-5"), Ok(Some((3, 5))));
        assert_eq!(parse_char_ngrams("4"), Ok(Some((4, 4))));
        assert!(parse_char_ngrams("5-3").is_err());
        assert!(parse_char_ngrams("x").is_err());
    }
}
