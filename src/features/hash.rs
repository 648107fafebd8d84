//! The feature hash: xxh3-64 under a namespace per kind of feature, and a
//! fast path for the 3- and 4-byte character n-grams that give the same
//! values as the crate. These values are a contract: a checkpoint's weights
//! mean something only under them (a golden test pins known buckets).

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

    /// xxh3-64 of `piece` with the seed: by the short formulas when it is
    /// 3 or 4 bytes long, by the crate otherwise.
    #[inline(always)]
    pub(super) fn hash(&self, piece: &[u8]) -> u64 {
        match *piece {
            [a, b, c] => self.three(&[a, b, c]),
            [a, b, c, d] => self.four(&[a, b, c, d]),
            _ => xxh3_64_with_seed(piece, self.seed),
        }
    }

    #[inline(always)]
    pub(super) fn three(&self, b: &[u8; 3]) -> u64 {
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
    pub(super) fn four(&self, b: &[u8; 4]) -> u64 {
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
