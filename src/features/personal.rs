//! Personal features (Weinberger et al. 2009, "Feature hashing for large
//! scale multitask learning"): a message for a named user also carries a
//! copy of its word features crossed with the user, hashed into the same
//! table as the shared ones. The shared weights learn from
//! everyone; a user's crosses learn only from that user's labels, so a
//! user with few labels is served by the shared part and the personal part
//! grows with their own. Memory does not grow with the users: crosses share
//! the table (and its `--model-memory` budget) with everything else, and
//! collide as any hashed features do.
//!
//! The crosses go into the character half of a split table
//! ([`FeatureConfig::words_end`]), so that the fused naive Bayes, which
//! counts the word half, counts only shared words. Their values are the
//! finished values of the words they copy (after IDF and normalisation)
//! times [`FeatureConfig::personal_scale`] (`--personal-scale`, default
//! [`PERSONAL_SCALE`]). There is no personal bias: a user's share of spam
//! learned from a few labels made SMS with random users 21 % worse
//! (docs/model.md has the measurements behind both choices).
//!
//! These buckets are a contract like the feature hash's (a golden test
//! pins them): a checkpoint's personal weights mean something only under
//! them.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::{FeatureConfig, SparseVec, bias_bucket, splitmix};

/// The namespace of user keys.
const NS_USER: u64 = 0x5851_F42D_4C95_7F2D;

/// How much a personal copy weighs against its shared word by default:
/// with the model's personal switch (src/model/switch.rs), 4 gains
/// grey mail most of 1.5-6 while SMS and SpamAssassin text with random
/// users stay within 1 % of the same streams without users, over ten
/// seeds of users (`scripts/users_check.py`; docs/model.md).
pub const PERSONAL_SCALE: f32 = 4.0;

/// The scale of every model before the scale was a setting: a checkpoint
/// or model-topic record without one was learned with it.
pub const LEGACY_PERSONAL_SCALE: f32 = 2.0;

/// The largest `--personal-scale`: past it the copies would swamp any
/// shared evidence (8 already loses a third more on grey mail than 3).
pub const MAX_PERSONAL_SCALE: f32 = 16.0;

/// The key of `user`'s personal features under `cfg`'s seed.
pub fn user_key(cfg: &FeatureConfig, user: &str) -> u64 {
    xxh3_64_with_seed(user.as_bytes(), cfg.seed ^ NS_USER)
}

/// The bucket of the personal copy of `bucket` for the user of key `user`.
#[inline]
pub fn personal_bucket(cfg: &FeatureConfig, bucket: u32, user: u64) -> u32 {
    let z = splitmix(user ^ u64::from(bucket).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let buckets = cfg.buckets() as u64;
    let (lo, span) = if cfg.split_views {
        let end = u64::from(cfg.words_end());
        (end, buckets - end)
    } else {
        (0, buckets)
    };
    // Both spans are powers of two.
    (lo + (z & (span - 1))) as u32
}

/// Whether the feature of `bucket` gets a personal copy: a word feature
/// (with a split table; any feature without one), not the bias.
#[inline]
pub fn crossed(cfg: &FeatureConfig, bucket: u32, bias: u32) -> bool {
    bucket != bias && (bucket < cfg.words_end() || !cfg.split_views)
}

/// Appends to the finished features `x` the personal copies, for the user
/// of key `user`, of its [`crossed`] features; none at a zero scale.
pub fn personalize(x: &mut SparseVec, user: u64, cfg: &FeatureConfig) {
    let scale = cfg.personal_scale;
    if scale == 0.0 {
        return;
    }
    let bias = bias_bucket(cfg);
    let n = x.idx.len();
    x.idx.reserve(n);
    x.val.reserve(n);
    x.personal = n as u32;
    for i in 0..n {
        let (b, v) = (x.idx[i], x.val[i]);
        if crossed(cfg, b, bias) {
            x.idx.push(personal_bucket(cfg, b, user));
            x.val.push(v * scale);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned: changing them changes what every checkpoint's personal
    /// weights mean.
    #[test]
    fn personal_buckets_are_pinned() {
        let cfg = FeatureConfig::default();
        let u = user_key(&cfg, "u-17");
        let got: Vec<u32> = [0, 1, 12345, 1 << 19]
            .iter()
            .map(|&b| personal_bucket(&cfg, b, u))
            .collect();
        assert!(
            got.iter()
                .all(|&b| b >= cfg.words_end() && (b as usize) < cfg.buckets())
        );
        assert_eq!(got, PINNED, "{got:?}");
    }

    const PINNED: [u32; 4] = [1_438_294, 1_601_355, 1_984_496, 1_581_003];

    #[test]
    fn each_word_gets_a_copy_per_user() {
        let cfg = FeatureConfig::default();
        let bias = bias_bucket(&cfg);
        let char_bucket = cfg.words_end() + 7;
        let word = if bias == 3 { 4 } else { 3 };
        let mut x = SparseVec::default();
        for (b, v) in [(word, 0.5), (char_bucket, 0.25), (bias, 1.0)] {
            x.idx.push(b);
            x.val.push(v);
        }
        let mut a = x.clone();
        personalize(&mut a, user_key(&cfg, "a"), &cfg);
        let mut b = x.clone();
        personalize(&mut b, user_key(&cfg, "b"), &cfg);
        assert_eq!(a.idx.len(), 4);
        assert_eq!(a.val[3], 0.5 * cfg.personal_scale);
        assert_eq!(a.idx[3], personal_bucket(&cfg, word, user_key(&cfg, "a")));
        assert_ne!(a.idx[3], b.idx[3]);
        assert_eq!(a.idx[..3], x.idx[..]);
    }

    /// The copies carry the configured scale; at 0 there are none, and
    /// the features are the shared model's alone.
    #[test]
    fn the_scale_is_the_configs_and_zero_means_no_copies() {
        let x = SparseVec {
            idx: vec![5],
            val: vec![0.5],
            ..SparseVec::default()
        };
        for (scale, len) in [(0.0, 1), (0.25, 2), (3.0, 2)] {
            let cfg = FeatureConfig {
                personal_scale: scale,
                ..FeatureConfig::default()
            };
            let mut a = x.clone();
            personalize(&mut a, user_key(&cfg, "a"), &cfg);
            assert_eq!(a.len(), len, "{scale}");
            assert_eq!(a.val.get(1).copied().unwrap_or(0.0), 0.5 * scale);
        }
    }

    /// A scale outside [0, 16], or not a number, is refused with the flag's name.
    #[test]
    fn a_scale_out_of_range_is_refused() {
        for bad in [-0.5, 16.5, f32::NAN, f32::INFINITY] {
            let cfg = FeatureConfig {
                personal_scale: bad,
                ..FeatureConfig::default()
            };
            let e = cfg.validate().unwrap_err();
            assert!(e.to_string().contains("--personal-scale"), "{e}");
        }
        for good in [0.0, 1.5, 16.0] {
            let cfg = FeatureConfig {
                personal_scale: good,
                ..FeatureConfig::default()
            };
            assert!(cfg.validate().is_ok());
        }
    }
}
