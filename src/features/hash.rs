//! The feature hashes, one per [`FeatureHash`] version, each under a
//! namespace per kind of feature. Version 1 is xxh3-64, with a fast path
//! for the 3- and 4-byte character n-grams that gives the crate's values;
//! version 2 is a folded multiply of the bytes read eight at a time, and of
//! a character window read as one word. These values are a contract: a
//! checkpoint's weights mean something only under the version it learned
//! with (golden tests pin known buckets of both).

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Namespaces keep a word, a bigram and a character n-gram with the same
/// bytes in different buckets.
pub(super) const NS_WORD: u64 = 0x9E37_79B9_7F4A_7C15;
pub(super) const NS_CHAR: u64 = 0xC2B2_AE3D_27D4_EB4F;
pub(super) const NS_BIAS: u64 = 0x1656_67B1_9E37_79F9;

/// Combines the hash of an n-gram so far with the next token's hash.
#[inline]
pub(super) fn combine(acc: u64, next: u64) -> u64 {
    // A multiply-rotate mix: cheap, order-sensitive, stable forever.
    (acc.rotate_left(27) ^ next).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// SplitMix64's finalizer: mixes every bit of `z` into every bit of the
/// result. Cheap and stable forever: personal buckets and per-user
/// fingerprints, both kept in checkpoints, are made with it.
pub fn splitmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xxh3-64 of exactly 3 or 4 bytes with a fixed seed: the values
/// `xxh3_64_with_seed` gives (the XXH3 specification's 1-to-3 and 4-to-8
/// byte paths, each for its one length), without its dispatch on the length
/// or a slice per call. Character 3- and 4-grams are most of what the
/// default features hash. `tests::short_hashes_are_xxh3` checks them
/// against the crate.
#[derive(Clone, Copy, Debug)]
pub(super) struct ShortHash {
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

    pub(super) fn new(seed: u64) -> Self {
        let seed4 = seed ^ (((seed as u32).swap_bytes() as u64) << 32);
        ShortHash {
            seed,
            flip3: ((Self::SECRET_0 ^ Self::SECRET_4) as u64).wrapping_add(seed),
            flip4: (Self::SECRET_8 ^ Self::SECRET_16).wrapping_sub(seed4),
        }
    }
}

/// xxh3-64 of a window with the seed: by the short formulas when it is 3
/// or 4 bytes long, by the crate otherwise.
impl WindowHash for ShortHash {
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

    #[inline(always)]
    fn other(&self, piece: &[u8]) -> u64 {
        xxh3_64_with_seed(piece, self.seed)
    }
}

/// Which function hashes tokens and character windows into buckets (a
/// field of the feature configuration, kept in checkpoints).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FeatureHash {
    /// xxh3-64 ([`ShortHash`] for 3- and 4-byte windows): every model
    /// before version 2, and checkpoints that do not say.
    #[value(name = "v1")]
    V1,
    /// A folded multiply ([`Fold`]): one 64 x 64 -> 128-bit multiply per
    /// token of up to 8 bytes and per 3- or 4-byte window. The default.
    #[default]
    #[value(name = "v2")]
    V2,
}

impl FeatureHash {
    /// The version a checkpoint's number names (0, from a checkpoint that
    /// predates the field, is 1).
    pub fn from_number(n: u32) -> Option<Self> {
        match n {
            0 | 1 => Some(FeatureHash::V1),
            2 => Some(FeatureHash::V2),
            _ => None,
        }
    }
}

/// `a * b` as 128 bits, its halves XORed: every bit of `a` reaches every
/// bit of the result (the "folded multiply" of wyhash and foldhash).
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = (a as u128).wrapping_mul(b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Version 2 of the feature hash. Stable forever once models use it (the
/// golden test pins buckets): written here rather than taken from a
/// crate, whose output may change between releases.
#[derive(Clone, Copy, Debug)]
pub(super) struct Fold {
    /// The namespace's seed, spread over all 64 bits.
    seed: u64,
}

impl Fold {
    /// Odd multipliers: the fractional parts of the golden ratio and of pi.
    const K_WINDOW: u64 = 0x9E37_79B9_7F4A_7C15;
    const K_BYTES: u64 = 0x243F_6A88_85A3_08D3;

    pub(super) fn new(seed: u64) -> Self {
        Fold { seed: splitmix(seed) }
    }

    /// A character window of `len` (3 or 4) bytes read as the little-endian
    /// word `x`: its length is part of the key, so "abc" and "abc\0" differ.
    #[inline(always)]
    pub(super) fn window(&self, x: u32, len: u32) -> u64 {
        fold_mul((x as u64 | (len as u64) << 32) ^ self.seed, Self::K_WINDOW)
    }

    /// A token or a window of other lengths: the length mixed in first,
    /// then the bytes as little-endian words, loaded the way xxh3 does for
    /// short input (overlapping loads, no copy): up to 3 bytes as one word
    /// of their first, middle and last; 4 to 8 as their first and last
    /// four; longer, eight at a time, the last eight overlapping.
    #[inline]
    pub(super) fn bytes(&self, piece: &[u8]) -> u64 {
        let len = piece.len();
        let h = self.seed ^ (len as u64).wrapping_mul(Self::K_WINDOW);
        let word = |at: usize| u64::from_le_bytes(piece[at..at + 8].try_into().unwrap_or([0; 8]));
        let half = |at: usize| u32::from_le_bytes(piece[at..at + 4].try_into().unwrap_or([0; 4])) as u64;
        match len {
            0 => fold_mul(h, Self::K_BYTES),
            1..=3 => {
                let x = piece[0] as u64 | (piece[len / 2] as u64) << 8 | (piece[len - 1] as u64) << 16;
                fold_mul(h ^ x, Self::K_BYTES)
            }
            4..=8 => fold_mul(h ^ (half(0) | half(len - 4) << 32), Self::K_BYTES),
            _ => {
                // (The slices above are in bounds: `len` is at least 9 here,
                // and each `word` starts at least 8 bytes before the end.)
                let mut h = h;
                let mut at = 0;
                while at + 8 < len {
                    h = fold_mul(h ^ word(at), Self::K_BYTES);
                    at += 8;
                }
                fold_mul(h ^ word(len - 8), Self::K_BYTES)
            }
        }
    }
}

/// A hash of character windows: 3 and 4 bytes by their own formulas, any
/// other length by the general one, so a window hashes alike in ASCII and
/// non-ASCII text. Both versions have this shape.
pub(super) trait WindowHash: Copy {
    fn three(&self, b: &[u8; 3]) -> u64;
    fn four(&self, b: &[u8; 4]) -> u64;
    /// A window of any other length.
    fn other(&self, piece: &[u8]) -> u64;

    #[inline(always)]
    fn hash(&self, piece: &[u8]) -> u64 {
        match *piece {
            [a, b, c] => self.three(&[a, b, c]),
            [a, b, c, d] => self.four(&[a, b, c, d]),
            _ => self.other(piece),
        }
    }
}

/// Version 2 of a window: [`Fold::window`] of 3 or 4 bytes, other lengths
/// eight bytes at a time ([`Fold::bytes`]).
impl WindowHash for Fold {
    #[inline(always)]
    fn three(&self, b: &[u8; 3]) -> u64 {
        self.window(u32::from_le_bytes([b[0], b[1], b[2], 0]), 3)
    }

    #[inline(always)]
    fn four(&self, b: &[u8; 4]) -> u64 {
        self.window(u32::from_le_bytes(*b), 4)
    }

    #[inline(always)]
    fn other(&self, piece: &[u8]) -> u64 {
        self.bytes(piece)
    }
}
