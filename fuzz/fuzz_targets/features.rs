//! Tokenizing and feature extraction of any text, with word and character
//! n-grams on: every bucket is in range and nothing panics.
#![no_main]

use classifyd::features::{FeatureConfig, FeatureHash, Featurizer, SparseVec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Both versions of the feature hash.
    for hash in [FeatureHash::V1, FeatureHash::V2] {
        let cfg = FeatureConfig {
            bits: 12,
            hash,
            ..FeatureConfig::default()
        };
        let mut f = Featurizer::new(cfg);
        let mut x = SparseVec::default();
        f.featurize_raw(text, &mut x);
        assert!(x.idx.iter().all(|&b| (b as usize) < cfg.buckets()));
        let names = f.featurize_raw_named(text, &mut x);
        let _ = names.iter().count();
    }
});
