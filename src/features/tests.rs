//! Tests of the parent module.

use super::count::POSITION_BITS;
use super::*;

fn words_only(bits: u8) -> FeatureConfig {
    FeatureConfig {
        bits,
        char_ngrams: None,
        value: ValueMode::Count,
        normalize: false,
        split_views: false,
        ..FeatureConfig::default()
    }
}

/// `c` with the feature hash of version `hash`.
fn hashed(hash: FeatureHash, c: FeatureConfig) -> FeatureConfig {
    FeatureConfig { hash, ..c }
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
/// Version 1 of the hash (models that learned with it keep it).
#[test]
fn golden_bucket_ids() {
    let v1 = |c| hashed(FeatureHash::V1, c);
    let cfg = v1(words_only(20));
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
        ..v1(words_only(22))
    };
    let mut f = Featurizer::new(cfg);
    let names = owned_names(&mut f, "Win!", &mut v);
    assert_eq!(names, [(3882435, "c:\"Win!\"".to_string())]);
    // Split views: words keep their hash in the lower half, character
    // n-grams theirs in the upper half.
    let split = |c: FeatureConfig| FeatureConfig { split_views: true, ..c };
    let mut f = Featurizer::new(split(v1(words_only(21))));
    let names = owned_names(&mut f, "Free entry", &mut v);
    let got: Vec<(u32, String)> = names.into_iter().collect();
    assert_eq!(got[0], (109627, "free".to_string()));
    let mut f = Featurizer::new(split(cfg));
    let names = owned_names(&mut f, "Win!", &mut v);
    assert_eq!(names, [(3882435 & ((1 << 21) - 1) | 1 << 21, "c:\"Win!\"".to_string())]);
    assert_eq!(split(cfg).words_end(), 1 << 21);
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
        Err(FeatureError::Bits(31))
    );
    assert_eq!(
        FeatureConfig {
            word_ngrams: 0,
            char_ngrams: None,
            ..Default::default()
        }
        .validate(),
        Err(FeatureError::NoFeatures)
    );
    assert_eq!(parse_char_ngrams("0"), Ok(None));
    assert_eq!(parse_char_ngrams("3-5"), Ok(Some((3, 5))));
    assert_eq!(parse_char_ngrams("4"), Ok(Some((4, 4))));
    assert!(parse_char_ngrams("5-3").is_err());
    assert!(parse_char_ngrams("x").is_err());
}

/// Pins version 2's bucket ids, as `golden_bucket_ids` does version 1's.
/// If this fails, models that learned with version 2 change meaning.
#[test]
fn golden_bucket_ids_of_version_2() {
    let v2 = |c| hashed(FeatureHash::V2, c);
    let mut f = Featurizer::new(v2(words_only(20)));
    let mut v = SparseVec::default();
    let got = owned_names(&mut f, "Free entry, extraordinarily", &mut v);
    let want: Vec<(u32, String)> = GOLDEN_V2_WORDS.iter().map(|&(b, s)| (b, s.to_string())).collect();
    assert_eq!(got, want);
    let cfg = FeatureConfig {
        char_ngrams: Some((3, 5)),
        word_ngrams: 0,
        ..v2(words_only(22))
    };
    let mut f = Featurizer::new(cfg);
    let got = owned_names(&mut f, "Win!é", &mut v);
    let want: Vec<(u32, String)> = GOLDEN_V2_CHARS.iter().map(|&(b, s)| (b, s.to_string())).collect();
    assert_eq!(got, want);
    // The bias keeps version 1's bucket.
    assert_eq!(bias_bucket(&v2(words_only(20))), 882499);
}

const GOLDEN_V2_WORDS: [(u32, &str); 5] = [
    (1009039, "free"),
    (533386, "free entry"),
    (446789, "entry"),
    (1000629, "entry extraordinarily"),
    (933207, "extraordinarily"),
];
/// A non-ASCII window: "n!é" is 4 bytes and takes the 4-byte formula.
const GOLDEN_V2_CHARS: [(u32, &str); 6] = [
    (3448220, "c:\"Win\""),
    (2469823, "c:\"in!\""),
    (3068715, "c:\"n!é\""),
    (189077, "c:\"Win!\""),
    (1959999, "c:\"in!é\""),
    (896356, "c:\"Win!é\""),
];

/// Distinct keys hashed into `buckets`: how many buckets they fill, against
/// what a random function fills on average, `m (1 - (1 - 1/m)^n)`.
fn fill(hashes: impl Iterator<Item = u64>, buckets: usize) -> (usize, f64) {
    let mut seen = vec![false; buckets];
    let mut n = 0;
    for h in hashes {
        seen[(h as usize) & (buckets - 1)] = true;
        n += 1;
    }
    let m = buckets as f64;
    (
        seen.iter().filter(|&&s| s).count(),
        m * (1.0 - (1.0 - 1.0 / m).powf(n as f64)),
    )
}

/// Version 2 spreads structured keys (every printable ASCII 3-gram, every
/// 4-gram of lowercase letters and space; short words and numbers) over
/// 2^20 buckets as well as a random function does, and as version 1 does:
/// within 0.2 % of the buckets a random function fills (its spread is
/// about 0.05 %).
#[test]
fn version_2_fills_buckets_like_a_random_function() {
    let printable: Vec<u8> = (0x20..0x7F).collect();
    let letters: Vec<u8> = std::iter::once(b' ').chain(b'a'..=b'z').collect();
    let mut threes = Vec::new();
    for &a in &printable {
        for &b in &printable {
            threes.extend(printable.iter().map(|&c| [a, b, c]));
        }
    }
    let mut fours = Vec::new();
    for &a in &letters {
        for &b in &letters {
            for &c in &letters {
                fours.extend(letters.iter().map(|&d| [a, b, c, d]));
            }
        }
    }
    // Numbers, and every lowercase word of one to four letters: no key twice.
    let mut words: Vec<Vec<u8>> = (0..1_000_000u32).map(|i| i.to_string().into_bytes()).collect();
    let mut level = vec![Vec::new()];
    for _ in 0..4 {
        level = level
            .iter()
            .flat_map(|w| (b'a'..=b'z').map(move |c| [&w[..], &[c]].concat()))
            .collect();
        words.extend(level.iter().cloned());
    }
    let (short, fold, word) = (ShortHash::new(NS_CHAR), Fold::new(NS_CHAR), Fold::new(NS_WORD));
    let windows = |three: &dyn Fn(&[u8; 3]) -> u64, four: &dyn Fn(&[u8; 4]) -> u64| {
        fill(threes.iter().map(three).chain(fours.iter().map(four)), 1 << 20)
    };
    let cases = [
        ("windows v1", windows(&|g| short.three(g), &|g| short.four(g))),
        ("windows v2", windows(&|g| fold.three(g), &|g| fold.four(g))),
        (
            "words v1",
            fill(words.iter().map(|w| xxh3_64_with_seed(w, NS_WORD)), 1 << 20),
        ),
        ("words v2", fill(words.iter().map(|w| word.bytes(w)), 1 << 20)),
    ];
    for (what, (filled, random)) in cases {
        let off = (filled as f64 - random).abs() / (1 << 20) as f64;
        assert!(
            off < 0.002,
            "{what}: {filled} buckets filled, a random function {random:.0}"
        );
    }
}
