//! Text to sparse feature vectors: tokenization, word and character n-grams,
//! feature hashing into `2^bits` buckets, value weighting and normalisation.
//!
//! Hashing uses a seeded hash of the version the configuration names
//! ([`FeatureHash`]: xxh3-64, or a folded multiply); the bucket of a
//! feature is its hash masked to `bits`. The bits, seed and the rest of [`FeatureConfig`] live in
//! the checkpoint, and `tests::golden_bucket_ids` pins known bucket ids so a
//! saved model keeps its meaning across releases.

mod count;
mod hash;
mod head;
mod idf;
mod personal;
mod tokenize;

pub use head::{BYTE_LR_BITS, HEAD_BYTES, HeadGrams};
pub(crate) use idf::prefetch;
pub use idf::{CountCells, CountCellsMut, DocFreq};
pub use personal::{
    LEGACY_PERSONAL_SCALE, MAX_PERSONAL_SCALE, PERSONAL_SCALE, crossed, personal_bucket, personalize, user_key,
};
pub use tokenize::tokenize;

use count::{CountTable, count_into};
pub use hash::{FeatureHash, splitmix};
use hash::{Fold, NS_BIAS, NS_CHAR, NS_WORD, ShortHash, WindowHash, combine};

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
    /// Seed of the feature hash.
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
    /// Words and word n-grams hash into the lower half of the buckets,
    /// character n-grams into the upper half ([`FeatureConfig::words_end`]):
    /// a model can then tell the two views apart (fusion reads the words).
    pub split_views: bool,
    /// The hash function of tokens and character windows.
    pub hash: FeatureHash,
    /// How much the personal copy of a word weighs against the shared word
    /// in a message for a named user ([`personalize`]); 0: no copies, the
    /// shared model alone.
    pub personal_scale: f32,
}

impl Default for FeatureConfig {
    fn default() -> Self {
        FeatureConfig {
            bits: 21,
            seed: 0,
            word_ngrams: 2,
            char_ngrams: Some((3, 4)),
            char_prefix_bytes: 3000,
            char_lowercase: false,
            value: ValueMode::LogCount,
            normalize: true,
            idf: true,
            split_views: true,
            hash: FeatureHash::V2,
            personal_scale: PERSONAL_SCALE,
        }
    }
}

/// Why a feature configuration cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FeatureError {
    #[error("--bits must be between 4 and 30, got {0}")]
    Bits(u8),
    #[error("--ngrams must be between 0 and 5, got {0}")]
    WordNgrams(u8),
    #[error("--char-ngrams must be MIN-MAX with 1 <= MIN <= MAX <= 10, got {0}-{1}")]
    CharNgrams(u8, u8),
    #[error("no features: both word and character n-grams are off")]
    NoFeatures,
    #[error("--personal-scale must be between 0 and {MAX_PERSONAL_SCALE}, got {0}")]
    PersonalScale(f32),
}

impl FeatureConfig {
    /// Checks the ranges once, so the featurizer can rely on them.
    pub fn validate(&self) -> Result<(), FeatureError> {
        if !(4..=30).contains(&self.bits) {
            return Err(FeatureError::Bits(self.bits));
        }
        if self.word_ngrams > 5 {
            return Err(FeatureError::WordNgrams(self.word_ngrams));
        }
        if let Some((lo, hi)) = self.char_ngrams
            && !(1 <= lo && lo <= hi && hi <= 10)
        {
            return Err(FeatureError::CharNgrams(lo, hi));
        }
        if self.word_ngrams == 0 && self.char_ngrams.is_none() {
            return Err(FeatureError::NoFeatures);
        }
        if !(0.0..=MAX_PERSONAL_SCALE).contains(&self.personal_scale) {
            return Err(FeatureError::PersonalScale(self.personal_scale));
        }
        Ok(())
    }

    /// The number of buckets, `2^bits`.
    pub fn buckets(&self) -> usize {
        1usize << self.bits
    }

    /// The first bucket of the character view when the views are split
    /// (words below it); else the number of buckets.
    pub fn words_end(&self) -> u32 {
        let b = self.buckets() as u32;
        if self.split_views { b / 2 } else { b }
    }

    /// The word view's bucket mask, and the character view's mask and offset.
    fn view_masks(&self) -> (u64, u64, u64) {
        let m = mask(self);
        if self.split_views {
            (m >> 1, m >> 1, (m >> 1) + 1)
        } else {
            (m, m, 0)
        }
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
    /// The distinct byte 4-gram buckets of the document's head, for a
    /// stack's members that read them (the byte LR, [`HeadGrams`]); empty
    /// when none does.
    /// A binary second part of the vector, in the member's own buckets.
    pub head: Vec<u32>,
    /// The document's first bytes, for the stack's members that read
    /// them (`model::member::Reads::Bytes`); empty when none does.
    pub bytes: Vec<u8>,
    /// Where the personal copies of a message for a named user begin
    /// (they run to the end, [`personalize`]); 0: none.
    pub personal: u32,
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
        self.head.clear();
        self.bytes.clear();
        self.personal = 0;
    }
    /// The personal copies' entries, when it has any.
    pub fn personal_copies(&self) -> Option<SparseVec> {
        let from = self.personal as usize;
        (from > 0 && from < self.idx.len()).then(|| self.entries(from..self.idx.len(), Vec::new(), Vec::new()))
    }
    /// The entries before the personal copies (with the head's grams and
    /// bytes), when it has copies.
    pub fn without_copies(&self) -> Option<SparseVec> {
        let to = self.personal as usize;
        (to > 0).then(|| self.entries(0..to, self.head.clone(), self.bytes.clone()))
    }
    /// The entries in `range`, with `head` and `bytes`.
    fn entries(&self, range: std::ops::Range<usize>, head: Vec<u32>, bytes: Vec<u8>) -> SparseVec {
        SparseVec {
            idx: self.idx[range.clone()].to_vec(),
            val: self.val[range].to_vec(),
            head,
            bytes,
            personal: 0,
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = (u32, f32)> + Clone + '_ {
        self.idx.iter().copied().zip(self.val.iter().copied())
    }
}

/// The bucket of the bias feature ("the fake word <s>" every document has).
pub fn bias_bucket(cfg: &FeatureConfig) -> u32 {
    (xxh3_64_with_seed(b"<s>", cfg.seed ^ NS_BIAS) & mask(cfg)) as u32
}

/// Where the character n-grams' window of `text` ends: at most
/// `char_prefix_bytes`, on a char boundary.
fn char_prefix_end(text: &str, cfg: &FeatureConfig) -> usize {
    text.floor_char_boundary(cfg.char_prefix_bytes)
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
    /// The byte LR's grams of a document's head.
    head: HeadGrams,
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
            head: HeadGrams::default(),
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
        self.finalize(out, |_| {});
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

    /// The distinct byte 4-gram buckets of `text`'s head, for a model's
    /// byte LR, into `out` ([`HeadGrams::grams`]).
    pub fn head_grams(&mut self, text: &str, out: &mut Vec<u32>) {
        self.head.grams(text, out);
    }

    /// Completes a raw vector in place: IDF weights by `weigh` (the
    /// model's `weigh_idf`, which knows where its
    /// counts are and prefetches its rows as it goes; nothing without a
    /// model), L2 normalisation (when configured), then the bias feature
    /// with value 1.
    pub fn finalize(&self, x: &mut SparseVec, weigh: impl FnOnce(&mut SparseVec)) {
        weigh(x);
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
        let (m, cm, chars_at) = cfg.view_masks();
        self.token_hashes.clear();
        let seed = cfg.seed;
        if cfg.word_ngrams > 0 {
            let hashes = &mut self.token_hashes;
            let (name_text, spans) = (&mut self.name_text, &mut self.token_spans);
            let fold = Fold::new(seed ^ NS_WORD);
            let v2 = cfg.hash == FeatureHash::V2;
            tokenize(text, &mut self.scratch, |tok| {
                hashes.push(match v2 {
                    true => fold.bytes(tok.as_bytes()),
                    false => xxh3_64_with_seed(tok.as_bytes(), seed ^ NS_WORD),
                });
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
            let bucket = |h: u64| ((h & cm) | chars_at) as u32;
            let offsets = &mut self.char_offsets;
            match cfg.hash {
                FeatureHash::V1 => char_ngrams(window, (lo, hi), offsets, out, ShortHash::new(seed ^ NS_CHAR), bucket),
                FeatureHash::V2 => char_ngrams(window, (lo, hi), offsets, out, Fold::new(seed ^ NS_CHAR), bucket),
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

/// Appends the buckets of the character n-grams of `window`, `lo` to `hi`
/// characters long, shorter ones first, hashed by `hash` and placed by
/// `bucket`; `offsets` is scratch for a non-ASCII window's char boundaries.
fn char_ngrams<H: WindowHash>(
    window: &str,
    (lo, hi): (u8, u8),
    offsets: &mut Vec<usize>,
    out: &mut Vec<u32>,
    hash: H,
    bucket: impl Fn(u64) -> u32,
) {
    let bytes = window.as_bytes();
    if window.is_ascii() {
        for n in lo as usize..=hi as usize {
            let grams = bytes.windows(n);
            out.reserve(grams.len());
            // `windows` yields slices of exactly `n` bytes: every conversion succeeds.
            match n {
                3 => out.extend(grams.filter_map(|g| g.try_into().ok()).map(|g| bucket(hash.three(g)))),
                4 => out.extend(grams.filter_map(|g| g.try_into().ok()).map(|g| bucket(hash.four(g)))),
                _ => out.extend(grams.map(|g| bucket(hash.hash(g)))),
            }
        }
        return;
    }
    offsets.clear();
    offsets.extend(window.char_indices().map(|(i, _)| i));
    offsets.push(window.len());
    let chars = offsets.len() - 1;
    for n in lo as usize..=hi as usize {
        for start in 0..chars.saturating_sub(n - 1) {
            // Most grams of a mostly-ASCII text are 3 or 4 bytes long,
            // and take the short formulas.
            out.push(bucket(hash.hash(&bytes[offsets[start]..offsets[start + n]])));
        }
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

#[cfg(test)]
mod tests;
