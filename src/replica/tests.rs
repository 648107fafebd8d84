//! Tests of the model topic's logic: images, deltas, publisher and assembler.

use std::collections::BTreeSet;
use std::time::Duration;

use prost::Message as _;

use super::diff::{apply, delta};
use super::image::{scoring_image, scoring_pieces};
use super::*;
use crate::checkpoint::pb;
use crate::features::FeatureConfig;
use crate::model::{Hyper, Learner, Model};
use crate::pipeline::{MemberWhen, Pipeline, PipelineConfig};

/// The records `publisher` sends to publish `m`, and what kind they are.
fn publish(publisher: &mut Publisher, m: &mut Model, now_ms: u64) -> (Vec<Outgoing>, Kind) {
    let mut records = Vec::new();
    let kind = publisher.publish(m, now_ms, &mut |r| records.push(r));
    (records, kind)
}

/// Publishing at every call, a full version only when one must be,
/// records of `bytes`.
fn every_call(bytes: usize) -> PublishSettings {
    PublishSettings {
        interval: Duration::ZERO,
        snapshot_interval: Duration::from_secs(3600),
        chunk_bytes: bytes,
        delta_bytes: bytes,
    }
}

fn sms() -> Vec<&'static str> {
    include_str!("../../tests/data/sms_head1000.jsonl").lines().collect()
}

/// Three topics, for a model with more than two classes.
fn topics(n: usize) -> Vec<String> {
    let words = [
        ["wheat", "grain", "harvest"],
        ["oil", "crude", "barrel"],
        ["bank", "rate", "interest"],
    ];
    (0..n)
        .map(|i| {
            let w = words[i % 3];
            format!(
                r#"{{"text": "{} {} news {} report {i}", "label": "t{}"}}"#,
                w[0],
                w[1 + i % 2],
                w[2],
                i % 3
            )
        })
        .collect()
}

/// `k` topics (past the dense layout's bound: sparse rows), a word of
/// their own and shared ones.
fn many_topics(n: usize, k: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            format!(
                r#"{{"text": "topic{} word{} shared news {i}", "label": "m{}"}}"#,
                i % k,
                i % 7,
                i % k
            )
        })
        .collect()
}

/// `k` topics in words of many letters (a vocabulary that keeps growing,
/// so that a hundred lines touch a small part of the model).
fn varied_topics(n: usize, k: usize) -> Vec<String> {
    let word = |mut x: usize| {
        let mut w = String::new();
        for _ in 0..5 {
            w.push((b'a' + (x % 26) as u8) as char);
            x /= 26;
        }
        w
    };
    (0..n)
        .map(|i| {
            let words: Vec<String> = (0..6)
                .map(|j| word(i.wrapping_mul(7919).wrapping_add(j * 104_729)))
                .collect();
            format!(
                r#"{{"text": "topic{} {}", "label": "v{}"}}"#,
                i % k,
                words.join(" "),
                i % k
            )
        })
        .collect()
}

fn pipeline(learner: Learner, idf: bool) -> Pipeline {
    pipeline_with(learner, idf, MemberWhen::Email)
}

fn pipeline_with(learner: Learner, idf: bool, byte_lr: MemberWhen) -> Pipeline {
    let features = FeatureConfig {
        bits: 14,
        idf,
        ..FeatureConfig::default()
    };
    // Every added member joins when the byte LR does (the tests'
    // length-only member too: it travels as the others).
    let cfg = PipelineConfig {
        members: crate::pipeline::AddedWhen::all(byte_lr),
        ..PipelineConfig::default()
    };
    Pipeline::new(Model::new(Hyper::defaults(learner), features), cfg)
}

/// Each line is a message of its own: its default id is unique across
/// calls (a label for an id already learned is a fact known, not learned
/// again: docs/feedback.md).
fn feed(p: &mut Pipeline, lines: &[impl AsRef<str>]) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    for (i, l) in lines.iter().enumerate() {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        p.handle(l.as_ref().as_bytes(), &|| format!("l{n}"), i as u64);
    }
}

/// The scores a pipeline over `model` gives the probe texts.
fn probe_scores(model: Model) -> Vec<Vec<(String, f32)>> {
    let mut p = Pipeline::new(model, PipelineConfig::default());
    [
        "free cash prize, call now",
        "see you at lunch",
        "wheat harvest report",
        "crude oil news",
    ]
    .iter()
    .map(|t| {
        let raw = format!(r#"{{"text": "{t}"}}"#);
        p.predictor_mut()
            .predict_only(raw.as_bytes(), &|| "probe".into())
            .unwrap()
            .scores
    })
    .collect()
}

fn model_of(image: &pb::Checkpoint) -> Model {
    crate::checkpoint::restore_model(&mut image.clone()).unwrap()
}

/// A full version written as a stream (the image without its weights,
/// then the weights in pieces) is read back by the stream reader, and,
/// being one protobuf message still, by a reader that decodes it whole
/// (a predictor of an older build): both score as the learner's image.
/// Dense with AdaGrad's sums left out, naive Bayes, sparse entries.
#[test]
fn a_full_version_in_pieces_reads_as_the_image() {
    let sms: Vec<String> = sms().iter().map(|s| s.to_string()).collect();
    for (learner, lines) in [
        (Learner::Logistic, sms.clone()),
        (Learner::NaiveBayes, sms),
        (Learner::Hinge, varied_topics(600, 24)),
    ] {
        let mut p = pipeline(learner, true);
        feed(&mut p, &lines);
        let mut bytes = Vec::new();
        let mut pieces = 0;
        scoring_pieces(p.model(), 1, &mut |piece| {
            pieces += 1;
            piece.encode(&mut bytes).unwrap();
        });
        let image = probe_scores(model_of(&scoring_image(p.model())));
        let streamed = crate::checkpoint::read_model(&bytes[..], bytes.len() as u64, usize::MAX).unwrap();
        assert_eq!(probe_scores(streamed), image, "{learner:?}: {pieces} pieces");
        let whole = pb::Checkpoint::decode(&bytes[..]).unwrap();
        assert_eq!(probe_scores(model_of(&whole)), image, "{learner:?}");
        assert!(
            crate::checkpoint::read_model(&bytes[..bytes.len() - 1], bytes.len() as u64, usize::MAX).is_err(),
            "a short image is refused"
        );
    }
}

/// For every learner, with and without IDF, binary and three classes: the
/// delta between two images applied to the older gives the newer, row for
/// row, and the image scores as the learner's own model does.
#[test]
fn a_delta_applied_gives_the_newer_image() {
    for learner in [
        Learner::Logistic,
        Learner::Perceptron,
        Learner::Hinge,
        Learner::NaiveBayes,
    ] {
        for idf in [false, true] {
            let sms = sms().iter().map(|s| s.to_string()).collect::<Vec<_>>();
            for lines in [sms, topics(300), many_topics(600, 24)] {
                // With IDF, the byte LR too (binary linear models keep it).
                let byte_lr = if idf { MemberWhen::Always } else { MemberWhen::Email };
                let mut p = pipeline_with(learner, idf, byte_lr);
                feed(&mut p, &lines[..lines.len() / 2]);
                let old = scoring_image(p.model());
                feed(&mut p, &lines[lines.len() / 2..]);
                let new = scoring_image(p.model());
                let (o, n) = (old.model.as_ref().unwrap(), new.model.as_ref().unwrap());
                let mut d = delta(o, n).expect("same layout: a delta will do");
                let mut applied = o.clone();
                apply(&mut applied, d.clone()).unwrap();
                let mut want = n.clone();
                want.sketch = o.sketch.clone();
                assert_eq!(applied, want, "{learner:?} idf={idf}");
                // The binary stream's linear models carry their fusion.
                let binary = lines[0].contains("\"ham\"") || lines[0].contains("\"spam\"");
                assert_eq!(
                    d.fusion.is_some(),
                    binary && learner != Learner::NaiveBayes,
                    "{learner:?}"
                );
                for name in ["byte_lr", "compression", "length"] {
                    assert_eq!(
                        d.members.iter().any(|m| m.name == name && !m.slots.is_empty()),
                        idf && binary && learner != Learner::NaiveBayes,
                        "{learner:?} {name}"
                    );
                }
                assert!(
                    d.encoded_len() < n.encoded_len(),
                    "{learner:?}: the delta is smaller than the image"
                );
                let m = p.model().clone();
                if lines.len() == 600 && learner != Learner::NaiveBayes {
                    let linear = |s: &pb::ModelState| match &s.state {
                        Some(pb::model_state::State::Linear(l)) => l.entries.is_some() && l.rows.is_none(),
                        _ => false,
                    };
                    assert!(
                        linear(n) && linear(&d),
                        "{learner:?}: sparse entries in the image and the delta"
                    );
                }
                // Put in place into the older model, the delta gives the
                // scores of the newer.
                let mut served = model_of(&old);
                // As a predictor's pipeline sets it (`replace_model`).
                served.set_limits(crate::model::Limits::default());
                apply_delta(&mut served, &mut d).unwrap();
                assert_eq!(served.version(), p.model().version());
                assert_eq!(
                    probe_scores(served),
                    probe_scores(model_of(&new)),
                    "{learner:?} idf={idf} in place"
                );
                assert_eq!(probe_scores(model_of(&new)), probe_scores(m), "{learner:?} idf={idf}");
            }
        }
    }
}

/// A scoring image drops AdaGrad's sums and nothing that scoring reads.
#[test]
fn the_image_has_no_optimizer_state() {
    let mut p = pipeline(Learner::Logistic, false);
    feed(&mut p, &sms()[..300]);
    let full = crate::checkpoint::capture_model(p.model());
    let image = scoring_image(p.model());
    let linear = |c: &pb::Checkpoint| match c.model.as_ref().unwrap().state.as_ref().unwrap() {
        pb::model_state::State::Linear(l) => l.clone(),
        _ => panic!("linear"),
    };
    let (f, i) = (linear(&full), linear(&image));
    if f.adagrad {
        assert!(!i.adagrad);
        assert!(i.rows.as_ref().unwrap().stride < f.rows.as_ref().unwrap().stride);
    }
    assert_eq!(probe_scores(model_of(&image)), probe_scores(p.model().clone()));
}

/// Another label set cannot be a delta.
#[test]
fn a_new_class_needs_a_full_version() {
    let mut p = pipeline(Learner::Logistic, false);
    feed(&mut p, &sms()[..100]);
    let old = scoring_image(p.model());
    feed(&mut p, &[r#"{"text": "quarterly report", "label": "news"}"#]);
    let new = scoring_image(p.model());
    assert!(delta(old.model.as_ref().unwrap(), new.model.as_ref().unwrap()).is_none());
}

/// A new class goes in a full version when the weights are dense (their
/// layout changes), in a delta when they are sparse (the class has no
/// weights but those the delta brings); the replica serves what the
/// learner's image scores, with the new label.
#[test]
fn a_new_class_is_a_delta_only_for_sparse_weights() {
    let sms: Vec<String> = sms()[..100].iter().map(|s| s.to_string()).collect();
    for (lines, want) in [(sms, Kind::Full), (varied_topics(400, 24), Kind::Delta)] {
        let mut p = pipeline(Learner::Hinge, false);
        feed(&mut p, &lines);
        let settings = every_call(1 << 20);
        let mut publisher = Publisher::new(7, settings, BTreeSet::new());
        let (mut replica, mut served) = (Assembler::default(), None);
        let (records, _) = publish(&mut publisher, p.model_mut(), 1_000);
        offer_all(&mut replica, &records);
        take(&mut replica, &mut served);
        feed(
            &mut p,
            &[r#"{"text": "quarterly report figures", "label": "brand-new"}"#],
        );
        let (records, kind) = publish(&mut publisher, p.model_mut(), 2_000);
        assert_eq!(kind, want);
        offer_all(&mut replica, &records);
        take(&mut replica, &mut served);
        let m = served.unwrap();
        assert_eq!(m.labels().names(), p.model().labels().names());
        assert_eq!(probe_scores(m), probe_scores(model_of(&scoring_image(p.model()))));
    }
}

fn offer_all(a: &mut Assembler, records: &[Outgoing]) -> usize {
    records
        .iter()
        .filter(|r| a.offer(&r.key, r.value.as_deref()).unwrap())
        .count()
}

/// Puts what the assembler took into `served`; how many updates were deltas.
fn take(a: &mut Assembler, served: &mut Option<Model>) -> usize {
    let mut deltas = 0;
    for u in a.take_updates() {
        deltas += usize::from(matches!(u, Update::Delta(_)));
        u.apply(served, crate::model::Limits::default()).unwrap();
    }
    deltas
}

/// A learner publishing as it learns (full versions, then deltas of the
/// rows it changed; small records, so large deltas go in pieces): a
/// replica reading every record serves, at every version, what the
/// learner's scoring image scores, and the topic's live keys are one full
/// version and the deltas since. Binary (dense, fused) with and without
/// IDF, naive Bayes, and 24 classes (sparse entries).
#[test]
fn a_replica_rebuilds_the_learners_model_from_the_records() {
    let sms: Vec<String> = sms().iter().map(|s| s.to_string()).collect();
    let off = MemberWhen::Email;
    for (learner, idf, lines, part, byte_lr) in [
        (Learner::Logistic, false, sms.clone(), 100, off),
        (Learner::Logistic, true, sms.clone(), 100, off),
        (Learner::Logistic, true, sms.clone(), 100, MemberWhen::Always),
        (Learner::NaiveBayes, true, sms.clone(), 100, off),
        (Learner::Hinge, false, varied_topics(1200, 24), 100, off),
    ] {
        rebuild(learner, idf, &lines, part, byte_lr);
    }
}

fn rebuild(learner: Learner, idf: bool, lines: &[String], part: usize, byte_lr: MemberWhen) {
    let settings = every_call(4096);
    let mut publisher = Publisher::new(7, settings, BTreeSet::from(["delta/old".to_string()]));
    let mut replica = Assembler::default();
    let mut served = None;
    let mut deltas = 0;
    let mut p = pipeline_with(learner, idf, byte_lr);
    let (mut kinds, mut all) = (Vec::new(), Vec::new());
    for part in lines.chunks(part) {
        feed(&mut p, part);
        assert!(publisher.due(p.model().version()));
        let (records, kind) = publish(&mut publisher, p.model_mut(), 1_000);
        assert!(!publisher.due(p.model().version()), "nothing new to publish");
        kinds.push(kind);
        assert!(
            offer_all(&mut replica, &records) >= 1,
            "each publication is a new version"
        );
        assert_eq!(replica.served().map(|s| (s.0, s.1)), Some((7, p.model().version())));
        deltas += take(&mut replica, &mut served);
        if let Some(m) = served.as_mut() {
            m.set_limits(crate::model::Limits::default());
        }
        let image = model_of(&scoring_image(p.model()));
        let m = served.clone().unwrap();
        assert_eq!(m.version(), image.version());
        // Every added member (its state, and its weight in the stack)
        // goes with the model, in records a reader of format 10 skips.
        for e in crate::model::member::REGISTRY {
            assert_eq!(m.added().named(e.name).is_some(), byte_lr == MemberWhen::Always);
            assert_eq!(m.added().state(e.name), p.model().added().state(e.name), "{}", e.name);
        }
        if byte_lr == MemberWhen::Always {
            let format = pb::ModelRecord::decode(records[0].value.as_deref().unwrap())
                .unwrap()
                .format_version;
            assert_eq!(format, MODEL_FORMAT_VERSION);
        }
        assert_eq!(
            probe_scores(m),
            probe_scores(image),
            "{learner:?} idf={idf} at {}",
            p.model().version()
        );
        all.extend(records);
    }
    // A full version when a delta of the rows touched is over half the
    // model (early on), or after a rescale of every weight.
    assert!(deltas >= 4, "{learner:?}: {kinds:?}");
    assert_eq!(kinds[0], Kind::Full);
    assert!(
        all.iter().any(|r| r.key == "delta/old" && r.value.is_none()),
        "old keys deleted"
    );
    assert!(
        all.iter()
            .any(|r| r.key.starts_with("delta/") && r.key.matches('/').count() == 3),
        "{learner:?}: some deltas went in pieces"
    );
    // A replica that starts later reads the compacted topic: the live keys only.
    let mut latest = std::collections::BTreeMap::new();
    for r in &all {
        latest.insert(r.key.clone(), r.value.clone());
    }
    let mut late = Assembler::default();
    for r in &all {
        if latest.get(&r.key) == Some(&r.value) && r.value.is_some() {
            late.offer(&r.key, r.value.as_deref()).unwrap();
        }
    }
    assert_eq!(late.served(), replica.served());
    let mut late_served = None;
    take(&mut late, &mut late_served);
    let mut late_served = late_served.unwrap();
    late_served.set_limits(crate::model::Limits::default());
    assert_eq!(probe_scores(late_served), probe_scores(p.model().clone()));
}

/// An incomplete or damaged full version is never served; an older one or
/// a delta on another base is ignored; a newer epoch wins over any version
/// of an older one.
#[test]
fn only_complete_newer_versions_are_served() {
    let settings = PublishSettings {
        snapshot_interval: Duration::ZERO,
        ..every_call(2048)
    };
    let mut p = pipeline(Learner::Logistic, false);
    feed(&mut p, &sms()[..200]);
    let mut publisher = Publisher::new(1, settings.clone(), BTreeSet::new());
    let (v200, _) = publish(&mut publisher, p.model_mut(), 1);
    assert!(v200.len() > 2, "several chunks");
    let mut a = Assembler::default();
    // All but the last chunk: nothing held.
    for r in &v200[..v200.len() - 1] {
        assert!(!a.offer(&r.key, r.value.as_deref()).unwrap());
    }
    assert_eq!(a.served(), None);
    assert!(a.take_updates().is_empty());
    // A damaged last chunk: refused by the checksum.
    let mut bad = pb::ModelRecord::decode(&v200[v200.len() - 1].value.clone().unwrap()[..]).unwrap();
    if let Some(pb::model_record::Body::Chunk(c)) = &mut bad.body {
        c.data[0] ^= 1;
    }
    assert!(a.offer("x", Some(&bad.encode_to_vec())).is_err());
    assert_eq!(a.served(), None);
    assert!(a.offer("x", Some(b"not a record")).is_err());
    // The same version, complete.
    assert_eq!(offer_all(&mut a, &v200), 1);
    assert_eq!(a.served(), Some((1, 200, 1)));
    // A newer version of the same epoch, then the older again: not backwards.
    feed(&mut p, &sms()[200..300]);
    let (v300, _) = publish(&mut publisher, p.model_mut(), 2);
    assert_eq!(offer_all(&mut a, &v300), 1);
    assert_eq!(offer_all(&mut a, &v200), 0);
    assert_eq!(a.served().map(|s| s.1), Some(300));
    // A restarted learner (new epoch) with an older model: it wins.
    let mut q = pipeline(Learner::Logistic, false);
    feed(&mut q, &sms()[..50]);
    let (e2, _) = publish(&mut Publisher::new(2, settings, BTreeSet::new()), q.model_mut(), 3);
    assert_eq!(offer_all(&mut a, &e2), 1);
    assert_eq!(a.served(), Some((2, 50, 3)));
    assert_eq!(a.index().newest_seen(), (2, 50));
}

/// A learner's index of the topic: after a full version and deltas, then
/// another full version, the live keys are that version's chunks only
/// (the rest deleted), and the newest version is the last one named.
#[test]
fn the_index_holds_the_live_keys_and_the_newest_version() {
    let settings = every_call(4096);
    let mut publisher = Publisher::new(3, settings, BTreeSet::new());
    let mut p = pipeline(Learner::Logistic, false);
    let mut index = TopicIndex::default();
    let note = |index: &mut TopicIndex, records: &[Outgoing]| {
        for r in records {
            index.note(&r.key, r.value.as_deref()).unwrap();
        }
    };
    for part in sms().chunks(250).take(3) {
        feed(&mut p, part);
        note(&mut index, &publish(&mut publisher, p.model_mut(), 1).0);
    }
    // A restarted learner (epoch 4) publishes whole and deletes the rest.
    let mut again = Publisher::new(4, PublishSettings::default(), index.live_keys().clone());
    let (last, kind) = publish(&mut again, p.model_mut(), 2);
    assert_eq!(kind, Kind::Full);
    note(&mut index, &last);
    let chunks: BTreeSet<String> = last
        .iter()
        .filter(|r| r.value.is_some())
        .map(|r| r.key.clone())
        .collect();
    assert_eq!(index.live_keys(), &chunks);
    assert_eq!(index.newest_seen(), (4, p.model().version()));
}

/// The non-zero sparse entries of `m`'s scoring image: (key, values).
fn scoring_entries(m: &Model) -> Vec<(u64, Vec<f32>)> {
    let image = scoring_image(m);
    let Some(pb::model_state::State::Linear(l)) = image.model.and_then(|m| m.state) else {
        panic!("linear weights");
    };
    let e = l.entries.expect("sparse weights");
    let stride = e.stride as usize;
    e.keys
        .iter()
        .zip(e.values.chunks_exact(stride))
        .filter(|(_, v)| v.iter().any(|&x| x != 0.0))
        .map(|(&k, v)| (k, v.to_vec()))
        .collect()
}

/// A learner whose memory budget prunes its sparse weights again and
/// again goes on publishing deltas, which carry the pruning: a replica
/// holds the learner's scoring entries, every one, at every version.
#[test]
fn pruning_goes_in_deltas() {
    let mut p = pipeline(Learner::Hinge, false);
    let limits = crate::model::Limits {
        memory: 640 << 10,
        max_classes: 4096,
    };
    p.model_mut().set_limits(limits);
    let settings = every_call(1 << 20);
    let mut publisher = Publisher::new(7, settings, BTreeSet::new());
    let (mut replica, mut served) = (Assembler::default(), None);
    let mut pruning_deltas = 0;
    for part in varied_topics(4000, 64).chunks(100) {
        let before = p.model().pruned_weights();
        feed(&mut p, part);
        let (records, kind) = publish(&mut publisher, p.model_mut(), 1_000);
        if kind == Kind::Delta && p.model().pruned_weights() > before {
            pruning_deltas += 1;
            let format = pb::ModelRecord::decode(records[0].value.as_deref().unwrap())
                .unwrap()
                .format_version;
            // The oldest format that reads it: sparse keys as gaps, the
            // version 2 feature hash, or a personal scale that is not 2,
            // each newer than the one before.
            let f = p.model().features();
            let newest = match f.hash {
                _ if f.personal_scale != crate::features::LEGACY_PERSONAL_SCALE => {
                    super::records::PERSONAL_SCALE_FORMAT
                }
                crate::features::FeatureHash::V1 => super::records::SPARSE_FORMAT,
                crate::features::FeatureHash::V2 => super::records::HASH_V2_FORMAT,
            };
            assert_eq!(format, newest);
        }
        offer_all(&mut replica, &records);
        take(&mut replica, &mut served);
        let m = served.as_ref().unwrap();
        assert_eq!(m.version(), p.model().version());
        assert!(
            scoring_entries(m) == scoring_entries(p.model()),
            "the replica's entries differ at version {}",
            m.version()
        );
    }
    assert!(pruning_deltas >= 3, "{pruning_deltas} deltas pruned");
}

/// A sparse delta carries its keys as gaps (format 5) and a replica sums
/// them back; a delta with whole keys (the formats before) still applies;
/// gaps that overflow, or come beside keys, are refused and the model is
/// left as it was.
#[test]
fn sparse_deltas_carry_their_keys_as_gaps() {
    let mut p = pipeline(Learner::Hinge, false);
    feed(&mut p, &many_topics(300, 40));
    let old = scoring_image(p.model());
    p.model_mut().track_changes();
    feed(&mut p, &many_topics(60, 40));
    let buckets = p.model_mut().take_changes().unwrap();
    let d = super::changes::delta_of_changes(p.model(), &buckets, &super::changes::Members::default(), None);
    let gapped = whole_entries(&mut d.clone()).clone();
    assert!(gapped.keys.is_empty() && gapped.key_gaps.len() > 40);
    let served = |mut d: pb::ModelState| {
        let mut m = model_of(&old);
        m.set_limits(crate::model::Limits::default());
        let applied = apply_delta(&mut m, &mut d);
        (applied, scoring_entries(&m))
    };
    let (applied, got) = served(d.clone());
    assert!(applied.is_ok());
    assert_eq!(got, scoring_entries(p.model()));
    // Whole keys, as a learner of the builds before sends them.
    let mut whole = d.clone();
    super::apply::expand_gaps(whole_entries(&mut whole)).unwrap();
    assert!(whole_entries(&mut whole).key_gaps.is_empty());
    assert_eq!(served(whole).1, scoring_entries(p.model()));
    // Refused: a gap that overflows; keys beside gaps.
    let before = scoring_entries(&model_of(&old));
    let mut overflow = d.clone();
    whole_entries(&mut overflow).key_gaps[1] = u64::MAX;
    let mut both = d;
    whole_entries(&mut both).keys.push(1);
    for bad in [overflow, both] {
        let (applied, got) = served(bad);
        assert!(applied.is_err());
        assert_eq!(got, before);
    }
}

fn whole_entries(d: &mut pb::ModelState) -> &mut pb::Entries {
    match &mut d.state {
        Some(pb::model_state::State::Linear(pb::LinearState { entries: Some(e), .. })) => e,
        _ => panic!("sparse entries"),
    }
}

/// A growing model's deltas are weighed against what a full version
/// would be now, not against the last one (which it has outgrown).
#[test]
fn a_growing_model_stays_on_deltas() {
    let lines = varied_topics(600, 24);
    let mut p = pipeline(Learner::Hinge, false);
    let mut publisher = Publisher::new(7, every_call(1 << 20), BTreeSet::new());
    let mut kinds = Vec::new();
    for part in lines.chunks(60) {
        feed(&mut p, part);
        kinds.push(publish(&mut publisher, p.model_mut(), 1_000).1);
    }
    assert_eq!(kinds[0], Kind::Full);
    assert!(kinds[1..].iter().all(|k| *k == Kind::Delta), "{kinds:?}");
}

/// A replica scores a user's message as the learner does: the personal
/// features learned from that user's labels travel in the weights, and a
/// replica crosses the message with its user the same way.
#[test]
fn a_replica_answers_for_any_user_as_the_learner() {
    let mut p = pipeline(Learner::Logistic, true);
    feed(&mut p, &sms_for_three_users());
    let served = model_of(&scoring_image(p.model()));
    for user in ["u0", "u1", "somebody new"] {
        assert_eq!(ask(served.clone(), user), ask(p.model().clone(), user), "{user}");
    }
    assert_ne!(ask(p.model().clone(), "u0"), ask(p.model().clone(), "u1"));
}

/// The SMS lines, each for one of three users who disagree: u0 calls
/// the others' spam ham and their ham spam (so personal copies pay, and
/// the personal switch trusts them).
fn sms_for_three_users() -> Vec<String> {
    sms()
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["user"] = format!("u{}", i % 3).into();
            if i % 3 == 0 {
                v["label"] = if v["label"] == "spam" { "ham" } else { "spam" }.into();
            }
            v.to_string()
        })
        .collect()
}

/// The margins `model` gives `user`'s copy of a spam-like probe.
fn ask(model: Model, user: &str) -> Vec<(String, f32)> {
    let mut q = Pipeline::new(model, PipelineConfig::default());
    let raw = serde_json::json!({"text": "free cash prize, call now", "user": user}).to_string();
    q.predictor_mut()
        .predict_only(raw.as_bytes(), &|| "probe".into())
        .unwrap()
        .margins
}

/// The personal scale and switch travel with the model, the switch in
/// every delta: a replica scores a user's message as the learner does. A
/// record of a model at the scale every build before the setting fixed
/// (2) and without a stack keeps the hash's format (7); at any other
/// scale it is stamped 8, and with a stack (every binary linear model
/// now) 9, which a replica of those builds skips rather than combine the
/// members its old way; the scale and the stack reach the replica.
#[test]
fn the_personal_scale_travels_with_the_records() {
    let mut margins = Vec::new();
    let legacy = crate::features::LEGACY_PERSONAL_SCALE;
    for (scale, stacked, format) in [
        (legacy, true, records::STACK_FORMAT),
        (0.75, true, records::STACK_FORMAT),
    ] {
        let model = Model::with_personal(14, scale);
        let mut p = Pipeline::new(model, PipelineConfig::default());
        feed(&mut p, &sms_for_three_users());
        let mut publisher = Publisher::new(7, every_call(1 << 20), BTreeSet::new());
        let (records, kind) = publish(&mut publisher, p.model_mut(), 1_000);
        assert_eq!(kind, Kind::Full);
        for r in &records {
            let got = pb::ModelRecord::decode(r.value.as_deref().unwrap())
                .unwrap()
                .format_version;
            assert_eq!(got, format, "scale {scale}");
        }
        let (mut replica, mut served) = (Assembler::default(), None);
        offer_all(&mut replica, &records);
        take(&mut replica, &mut served);
        // Then a delta, after more of the users' labels moved the stack.
        let before = p.model().stack().copied();
        let again: Vec<String> = sms_for_three_users()[..20]
            .iter()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["id"] = format!("again-{}", v["id"].as_str().unwrap()).into();
                v.to_string()
            })
            .collect();
        feed(&mut p, &again);
        assert!(!stacked || p.model().stack().copied() != before, "the stack learns");
        let (records, kind) = publish(&mut publisher, p.model_mut(), 2_000);
        assert_eq!(kind, Kind::Delta);
        offer_all(&mut replica, &records);
        assert_eq!(take(&mut replica, &mut served), 1);
        let served = served.expect("a full version was published");
        assert_eq!(served.features().personal_scale, scale);
        assert_eq!(served.stack(), p.model().stack());
        assert_eq!(ask(served, "u1"), ask(p.model().clone(), "u1"), "scale {scale}");
        margins.push(ask(p.model().clone(), "u1"));
    }
    assert_ne!(margins[0], margins[1], "the scale changes a user's score");
}

/// `state`'s added members in the fields a learner before them wrote
/// (format 10 and before): the byte LR's every weight (a full version) or
/// the buckets a delta set, the byte context models' slots and counts.
fn as_an_older_learner_wrote(state: &mut pb::ModelState, full: bool) {
    for m in std::mem::take(&mut state.members) {
        match m.name.as_str() {
            "byte_lr" if full => {
                let mut weights = vec![0.0; 1 << crate::features::BYTE_LR_BITS];
                for (&s, &v) in m.slots.iter().zip(&m.values) {
                    weights[s as usize] = v;
                }
                state.byte_lr = Some(pb::ByteLrState {
                    weights,
                    ..Default::default()
                });
            }
            "byte_lr" => {
                state.byte_lr = Some(pb::ByteLrState {
                    buckets: m.slots,
                    values: m.values,
                    ..Default::default()
                })
            }
            "compression" => {
                state.compression = Some(pb::CompressionState {
                    slots: m.slots,
                    counts: m.values,
                })
            }
            other => panic!("no older learner wrote {other}"),
        }
    }
}

/// A learner from before the stack's added members were carried by name
/// (format 10 and before) wrote them in fields of their own: its full
/// versions restore, and its deltas apply, to the members this build
/// holds by name, as the learner had them.
#[test]
fn an_older_learners_full_versions_and_deltas_restore_the_members() {
    let cfg = PipelineConfig {
        members: crate::pipeline::AddedWhen::default()
            .with("byte_lr", MemberWhen::Always)
            .with("compression", MemberWhen::Always),
        ..PipelineConfig::default()
    };
    let features = FeatureConfig {
        bits: 14,
        ..FeatureConfig::default()
    };
    let mut p = Pipeline::new(Model::new(Hyper::defaults(Learner::Logistic), features), cfg);
    let sms = sms();
    feed(&mut p, &sms[..200]);
    let mut full = scoring_image(p.model());
    as_an_older_learner_wrote(full.model.as_mut().unwrap(), true);
    let mut served = model_of(&full);
    served.set_limits(crate::model::Limits::default());
    let state = |m: &Model| ["byte_lr", "compression"].map(|n| m.added().state(n));
    assert!(state(&served).iter().all(Option::is_some));
    assert_eq!(state(&served), state(p.model()));
    p.model_mut().track_changes();
    let _ = (
        p.model_mut().take_changes(),
        super::changes::Members::take(p.model_mut()),
    );
    feed(&mut p, &sms[200..260]);
    let buckets = p.model_mut().take_changes().unwrap();
    let members = super::changes::Members::take(p.model_mut());
    let mut d = super::changes::delta_of_changes(p.model(), &buckets, &members, None);
    assert!(d.members.iter().all(|m| !m.slots.is_empty()), "the members learned");
    as_an_older_learner_wrote(&mut d, false);
    apply_delta(&mut served, &mut d).unwrap();
    assert_eq!(state(&served), state(p.model()));
    assert_eq!(probe_scores(served), probe_scores(model_of(&scoring_image(p.model()))));
}

/// A delta whose added members are not the model's (one missing, or at
/// another width) is refused and leaves the served model as it was.
#[test]
fn a_delta_with_other_members_is_refused() {
    let mut p = pipeline_with(Learner::Logistic, false, MemberWhen::Always);
    let sms = sms();
    feed(&mut p, &sms[..100]);
    let served = model_of(&scoring_image(p.model()));
    p.model_mut().track_changes();
    let _ = (
        p.model_mut().take_changes(),
        super::changes::Members::take(p.model_mut()),
    );
    feed(&mut p, &sms[100..140]);
    let buckets = p.model_mut().take_changes().unwrap();
    let members = super::changes::Members::take(p.model_mut());
    let d = super::changes::delta_of_changes(p.model(), &buckets, &members, None);
    let mut missing = d.clone();
    missing.members.pop();
    let mut wide = d;
    wide.members[0].width += 1;
    for mut bad in [missing, wide] {
        let mut m = served.clone();
        let err = apply_delta(&mut m, &mut bad).unwrap_err().to_string();
        assert!(err.contains("added member"), "{err}");
        assert_eq!(probe_scores(m), probe_scores(served.clone()));
    }
}
