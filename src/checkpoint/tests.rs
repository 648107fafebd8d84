//! Tests of the parent module.

use super::*;
use crate::features::{FeatureConfig, FeatureHash, SparseVec};
use crate::model::{Hyper, Learner, Model, Scored};
use crate::pipeline::Pipeline;

fn trained(learner: Learner) -> Pipeline {
    let features = FeatureConfig {
        bits: 12,
        ..FeatureConfig::default()
    };
    // With every added member of the stack from the first message (a
    // linear model keeps them): the byte LR, the byte context models and
    // the tests' length-only member.
    let cfg = PipelineConfig {
        members: crate::pipeline::AddedWhen::all(crate::pipeline::MemberWhen::Always),
        ..PipelineConfig::default()
    };
    let mut p = Pipeline::new(Model::new(Hyper::defaults(learner), features), cfg);
    let lines = [
        r#"{"text": "win a free prize now", "label": "spam"}"#,
        r#"{"text": "see you at lunch", "label": "ham"}"#,
        r#"{"text": "claim your cash", "label": "spam"}"#,
        r#"{"id": "u1", "text": "free lunch"}"#,
        r#"{"text": "dinner tonight?", "label": "ham"}"#,
    ];
    for (i, l) in lines.iter().enumerate() {
        p.handle(l.as_bytes(), &|| format!("line-{i}"), i as u64);
    }
    p
}

#[test]
fn a_checkpoint_dir_that_is_a_file_is_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("model");
    fs::write(&file, b"x").unwrap();
    let Err(err) = CheckpointDir::open(&file, 3) else {
        panic!("a file was taken for a checkpoint dir")
    };
    let err = err.to_string();
    assert!(
        err.to_string().contains("not a directory") && err.contains("model"),
        "{err}"
    );
    // A directory that does not exist yet is made.
    assert!(CheckpointDir::open(dir.path().join("new/dir"), 3).is_ok());
}

#[test]
fn round_trip_predicts_identically() {
    let dir = tempfile::tempdir().unwrap();
    for learner in [
        Learner::Perceptron,
        Learner::Logistic,
        Learner::Hinge,
        Learner::NaiveBayes,
    ] {
        let p = trained(learner);
        let mut positions = Positions::default();
        positions.set_line(&InputKey::FirstLine(0xab), 5, Some(u64::MAX - 3));
        positions.set_offset("topic", 0, 9);
        let mut d = CheckpointDir::open(dir.path().join(learner.as_str()), 2).unwrap();
        d.save_pipeline(&p, &positions).unwrap();
        let (q, pos, path) = d.load_latest(&PipelineConfig::default()).unwrap().unwrap();
        // Read whole, the pieces merge into the checkpoint `capture` makes.
        let ckpt = read_file(&path).unwrap();
        assert_eq!(ckpt.model, capture(&p, &positions).model, "{learner}");
        // On disk the marks have a field of their own.
        assert_eq!(ckpt.positions.len(), 2);
        assert_eq!(ckpt.position_marks["jsonl:00000000000000ab"], u64::MAX - 3);
        assert_eq!(pos, positions);
        assert_eq!(q.model().state(), p.model().state(), "{learner}");
        // Linear learners fuse naive Bayes on the words of a binary task.
        assert_eq!(p.model().fusion.is_some(), learner != Learner::NaiveBayes);
        assert_eq!(q.model().fusion, p.model().fusion, "{learner}");
        assert!(p.model().fusion.as_ref().is_none_or(|f| f.weight != 0.0));
        // And every added member, and the stack that learned their weights.
        for e in crate::model::member::REGISTRY {
            let state = |p: &Pipeline| p.model().added().state(e.name);
            assert_eq!(state(&p).is_some(), learner != Learner::NaiveBayes, "{}", e.name);
            assert_eq!(state(&q), state(&p), "{learner} {}", e.name);
        }
        assert_eq!(q.model().stack(), p.model().stack(), "{learner}");
        assert!(p.model().stack().is_none_or(|s| s.weights().iter().any(|&w| w != 0.0)));
        assert_eq!(q.progressive(), p.progressive());
        assert_eq!(q.cache(), p.cache());
        assert_eq!(q.counters(), p.counters());
        let mut f = crate::features::Featurizer::new(*p.model().features());
        let mut x = SparseVec::default();
        f.featurize("free cash for lunch", &mut x);
        f.head_grams("free cash for lunch", &mut x.head);
        x.bytes = b"free cash for lunch".to_vec();
        let (mut a, mut b) = (Scored::default(), Scored::default());
        p.model().predict(&x, &mut a);
        q.model().predict(&x, &mut b);
        assert_eq!(a, b, "{learner}");
        let byte_lr = crate::model::member::index_of("byte_lr").expect("registered");
        assert_eq!(
            a.stacked.and_then(|s| s.added[byte_lr]).is_some(),
            learner != Learner::NaiveBayes
        );
        for name in ["compression", "length"] {
            let member = crate::model::stack::Member::named(name).expect("registered");
            let input = a.stacked.map(|s| s.inputs.get(member));
            assert!(input.is_none_or(|z| z != 0.0), "{learner} {name}: {input:?}");
        }
    }
}

/// A binary model is saved as one column; a checkpoint whose mirrored
/// flag disagrees with its rows or its labels is refused, not misread.
#[test]
fn mirrored_weights_are_checked_on_restore() {
    let p = trained(Learner::Logistic);
    let ckpt = capture(&p, &Positions::default());
    let linear = |c: &pb::Checkpoint| match c.model.as_ref().and_then(|m| m.state.as_ref()) {
        Some(pb::model_state::State::Linear(l)) => l.clone(),
        other => panic!("linear weights expected, got {other:?}"),
    };
    let l = linear(&ckpt);
    // v and the AdaGrad sum of class 1 only.
    assert!(l.mirrored);
    assert_eq!(l.rows.as_ref().map(|r| r.stride), Some(2));
    assert!(restore(ckpt.clone(), PipelineConfig::default()).is_ok());

    let mut two_columns = ckpt.clone();
    if let Some(pb::model_state::State::Linear(l)) = two_columns.model.as_mut().and_then(|m| m.state.as_mut()) {
        l.mirrored = false;
    }
    let err = restore(two_columns, PipelineConfig::default()).err().unwrap();
    assert!(err.to_string().contains("stride"), "{err}");

    let mut three_labels = ckpt;
    if let Some(m) = three_labels.model.as_mut() {
        m.labels.push("eggs".into());
    }
    let err = restore(three_labels, PipelineConfig::default()).err().unwrap();
    assert!(
        err.to_string().contains("mirrored pair of weights with 3 labels"),
        "{err}"
    );
}

/// Positions as a checkpoint from before inputs were told apart held them.
fn legacy(next_line: u64) -> Positions {
    Positions::from_maps([("jsonl".to_string(), next_line)], []).expect("the legacy key")
}

#[test]
fn damaged_checkpoint_is_refused_and_the_previous_one_used() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = CheckpointDir::open(dir.path(), 3).unwrap();
    let p = trained(Learner::Logistic);
    let first = d.save(&mut capture(&p, &legacy(1))).unwrap();
    let second = d.save(&mut capture(&p, &legacy(2))).unwrap();
    // Flip one byte in the middle of the newest.
    let mut bytes = fs::read(&second.path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    fs::write(&second.path, &bytes).unwrap();
    let err = read_file(&second.path).unwrap_err();
    assert!(matches!(err, CheckpointError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains(&second.path.display().to_string()));
    let cfg = PipelineConfig::default();
    let (_, positions, path) = d.load_latest(&cfg).unwrap().unwrap();
    assert_eq!(path, first.path);
    assert_eq!(positions.legacy_line(), Some(1));
    // A truncated file and a wrong version are refused too.
    fs::write(&second.path, &bytes[..10]).unwrap();
    assert!(matches!(read_file(&second.path), Err(CheckpointError::Corrupt { .. })));
    let mut v2 = fs::read(&first.path).unwrap();
    v2[8] = 99;
    fs::write(&first.path, &v2).unwrap();
    assert!(matches!(
        read_file(&first.path),
        Err(CheckpointError::Incompatible { found: 99, .. })
    ));
    // Nothing usable left: an error, not a silent fresh start.
    assert!(matches!(d.load_latest(&cfg), Err(CheckpointError::NoneUsable { .. })));
}

#[test]
fn keeps_only_the_newest_few() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = CheckpointDir::open(dir.path(), 2).unwrap();
    let p = trained(Learner::NaiveBayes);
    for _ in 0..5 {
        d.save(&mut capture(&p, &Positions::default())).unwrap();
    }
    let names: Vec<_> = list(dir.path()).unwrap().into_iter().map(|(s, _)| s).collect();
    assert_eq!(names, [5, 4]);
    // A reopened directory continues the sequence.
    drop(d);
    let d2 = CheckpointDir::open(dir.path(), 2).unwrap();
    assert_eq!(d2.next_sequence, 6);
}

/// One writer per directory: a second `open` is refused with the holder's
/// pid while the first lives, and succeeds once it is dropped; readers
/// open without the lock.
#[test]
fn a_directory_has_one_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let first = CheckpointDir::open(tmp.path(), 3).unwrap();
    match CheckpointDir::open(tmp.path(), 3) {
        Err(CheckpointError::Locked { dir, holder }) => {
            assert_eq!(dir, tmp.path());
            assert_eq!(holder, std::process::id().to_string());
        }
        other => panic!("a second writer was not refused: {other:?}"),
    }
    assert!(CheckpointDir::open_read(tmp.path()).is_ok());
    // An operator who deletes the pid file releases nothing: the kernel
    // holds the lock on the directory.
    std::fs::remove_file(tmp.path().join(LOCK_FILE)).unwrap();
    match CheckpointDir::open(tmp.path(), 3) {
        Err(CheckpointError::Locked { holder, .. }) => assert!(holder.starts_with("unknown"), "{holder}"),
        other => panic!("a second writer ran once LOCK was deleted: {other:?}"),
    }
    drop(first);
    let again = CheckpointDir::open(tmp.path(), 3).unwrap();
    let pid = std::fs::read_to_string(tmp.path().join(LOCK_FILE)).unwrap();
    assert_eq!(pid.trim(), std::process::id().to_string());
    drop(again);
}

/// A save that cannot be written (here: the temporary file's name is taken
/// by a directory) leaves no temporary file behind and keeps the last good
/// checkpoint the newest.
#[test]
fn a_failed_save_leaves_no_temporary_file() {
    let tmp = tempfile::tempdir().unwrap();
    let p = trained(Learner::Logistic);
    let mut d = CheckpointDir::open(tmp.path(), 3).unwrap();
    d.save(&mut capture(&p, &Positions::default())).unwrap();
    // The next save's final name is taken by a non-empty directory: rename fails.
    let blocker = tmp.path().join("checkpoint-000000000002.ckpt");
    std::fs::create_dir(&blocker).unwrap();
    std::fs::write(blocker.join("x"), b"x").unwrap();
    let err = d.save(&mut capture(&p, &Positions::default())).unwrap_err();
    assert!(err.to_string().contains(".checkpoint-000000000002.tmp"), "{err}");
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let (_, _, newest) = d.load_latest(&PipelineConfig::default()).unwrap().unwrap();
    assert!(newest.ends_with("checkpoint-000000000001.ckpt"), "{}", newest.display());
}

/// A checkpoint whose label set names a label twice (hand-edited) is
/// refused on load, naming the label, rather than loaded into a model
/// whose reports would carry the label twice.
#[test]
fn a_label_twice_is_refused() {
    let p = trained(Learner::Logistic);
    let mut ckpt = capture(&p, &Positions::default());
    let labels = &mut ckpt.model.as_mut().unwrap().labels;
    assert_eq!(labels.len(), 2);
    labels[1] = labels[0].clone();
    let Err(err) = restore(ckpt, PipelineConfig::default()) else {
        panic!("a label twice was loaded")
    };
    assert!(err.to_string().contains("appears twice"), "{err}");
}

/// A model of many classes (sparse rows) round-trips; a version-1
/// checkpoint (dense rows only) still loads; a newer version is refused
/// with both versions named.
#[test]
fn sparse_rows_round_trip_and_format_versions() {
    let features = FeatureConfig {
        bits: 12,
        ..FeatureConfig::default()
    };
    let mut p = Pipeline::new(
        Model::new(Hyper::defaults(Learner::Logistic), features),
        PipelineConfig::default(),
    );
    for i in 0..400 {
        let line = format!(
            r#"{{"text": "topic{} shared words {i}", "label": "c{}"}}"#,
            i % 30,
            i % 30
        );
        p.handle(line.as_bytes(), &|| i.to_string(), i);
    }
    let dir = tempfile::tempdir().unwrap();
    let mut d = CheckpointDir::open(dir.path(), 3).unwrap();
    let mut c = capture(&p, &Positions::default());
    let Some(pb::model_state::State::Linear(l)) = c.model.as_ref().and_then(|m| m.state.clone()) else {
        panic!("linear")
    };
    assert!(l.entries.is_some() && l.rows.is_none(), "30 classes are sparse rows");
    d.save(&mut c).unwrap();
    let (whole, _, _) = d.load_latest(&PipelineConfig::default()).unwrap().unwrap();
    // Streamed: the entries in pieces, put back in order.
    d.save_pipeline(&p, &Positions::default()).unwrap();
    let (q, _, path) = d.load_latest(&PipelineConfig::default()).unwrap().unwrap();
    let mut merged = read_file(&path).unwrap().model;
    let Some(pb::model_state::State::Linear(l)) = merged.as_mut().and_then(|m| m.state.as_mut()) else {
        panic!("linear")
    };
    // The first part says how many entries follow.
    let e = l.entries.as_mut().unwrap();
    assert_eq!(e.count as usize, e.keys.len());
    e.count = 0;
    assert!(merged == c.model, "the pieces merge into the whole");
    assert!(q.model().state() == whole.model().state());
    let x = SparseVec {
        idx: vec![1, 77, 300, 4000],
        val: vec![0.5, 1.0, -0.25, 2.0],
        head: Vec::new(),
        bytes: Vec::new(),
        personal: 0,
    };
    let (mut a, mut b) = (Scored::default(), Scored::default());
    p.model().predict(&x, &mut a);
    q.model().predict(&x, &mut b);
    assert_eq!(a, b);

    // Version 1: the same bytes under the old version (a binary model's
    // dense rows mean the same in both).
    let two = trained(Learner::Logistic);
    let mut c = capture(&two, &Positions::default());
    c.format_version = 1;
    let payload = c.encode_to_vec();
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    bytes.extend_from_slice(&payload);
    let path = dir.path().join("v1.ckpt");
    assert!(decode_file(&bytes, &path).is_ok(), "a version-1 checkpoint loads");
    bytes[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let err = decode_file(&bytes, &path).unwrap_err().to_string();
    assert!(
        err.contains(&format!("format version {}", FORMAT_VERSION + 1))
            && err.contains(&format!("versions 1 to {FORMAT_VERSION}")),
        "{err}"
    );
}

/// A checkpoint is stamped with the oldest format that reads it right: 3
/// for a model hashed with version 2 (a reader of 2 would hash with
/// version 1), 2 and no hash field for version 1, as the builds before
/// wrote it; each restores with its own hash.
#[test]
fn the_feature_hash_sets_the_format_and_restores() {
    let dir = tempfile::tempdir().unwrap();
    for (hash, format, field) in [(FeatureHash::V2, 3, 2), (FeatureHash::V1, 2, 0)] {
        let features = FeatureConfig {
            bits: 12,
            hash,
            personal_scale: crate::features::LEGACY_PERSONAL_SCALE,
            ..FeatureConfig::default()
        };
        let mut model = Model::new(Hyper::defaults(Learner::Logistic), features);
        model.stack = None;
        let mut p = Pipeline::new(model, PipelineConfig::default());
        p.handle(br#"{"text": "win a free prize", "label": "spam"}"#, &|| "a".into(), 0);
        let mut d = CheckpointDir::open(dir.path().join(format!("{hash:?}")), 2).unwrap();
        d.save_pipeline(&p, &Positions::default()).unwrap();
        let (q, _, path) = d.load_latest(&PipelineConfig::default()).unwrap().unwrap();
        let bytes = fs::read(&path).unwrap();
        assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), format, "{hash:?}");
        let ckpt = read_file(&path).unwrap();
        assert_eq!(ckpt.format_version, format);
        assert_eq!(ckpt.features.unwrap().hash_version, field);
        assert_eq!(q.model().features().hash, hash);
    }
}

/// A checkpoint is stamped 5 when its model has a stack (an older reader
/// would combine the members its old way), else 4 when its personal
/// scale is not 2 (the one every build before the setting used); each
/// restores with its own scale and stack. One written before the fields
/// restores at 2, its members combined as they were: the linear margin
/// and the copies at 1 (the switch's weight when it had one), naive Bayes
/// at the fusion's weight, the byte LR at its own.
#[test]
fn the_personal_part_and_the_stack_set_the_format_and_restore() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (0.0, true, 5),
        (crate::features::PERSONAL_SCALE, true, 5),
        (2.0, true, 5),
        (2.0, false, 3),
        (0.0, false, 4),
    ];
    for (scale, stacked, format) in cases {
        let mut model = Model::with_personal(12, scale);
        if !stacked {
            model.stack = None;
        }
        let mut p = Pipeline::new(model, PipelineConfig::default());
        for (i, label) in ["spam", "ham", "spam"].iter().enumerate() {
            let v = serde_json::json!({"text": format!("win a free prize {i}"), "label": label, "user": "u"});
            p.handle(v.to_string().as_bytes(), &|| format!("m{i}"), i as u64);
        }
        let mut d = CheckpointDir::open(dir.path().join(format!("s{scale}{stacked}")), 2).unwrap();
        d.save_pipeline(&p, &Positions::default()).unwrap();
        let (q, _, path) = d.load_latest(&PipelineConfig::default()).unwrap().unwrap();
        let mut ckpt = read_file(&path).unwrap();
        assert_eq!(ckpt.format_version, format, "{scale} {stacked}");
        assert_eq!(q.model().features().personal_scale, scale);
        if stacked {
            assert_eq!(q.model().stack(), p.model().stack());
        }
        ckpt.features.as_mut().unwrap().personal_scale = None;
        let m = ckpt.model.as_mut().unwrap();
        m.stack = None;
        m.personal_switch = Some(0.0);
        let fused = m.fusion.as_ref().map_or(0.0, |f| f.weight);
        let before_the_fields = crate::checkpoint::restore_model(&mut ckpt).unwrap();
        assert_eq!(before_the_fields.features().personal_scale, 2.0);
        let legacy = crate::model::stack::Stack::legacy(0.5, fused, 0.0);
        assert_eq!(before_the_fields.stack(), Some(&legacy));
    }
}

/// The users' bands go with the checkpoint and come back as they were; a
/// checkpoint from before them restores with none, and a malformed one is
/// refused with what is wrong.
#[test]
fn user_bands_restore() {
    let mut p = trained(Learner::Logistic);
    for (i, user) in ["a", "b", "a"].iter().enumerate() {
        let v = serde_json::json!({"text": format!("prize {i}"), "label": "spam", "user": user});
        p.handle(v.to_string().as_bytes(), &|| format!("u{i}"), i as u64);
    }
    assert!(!p.user_bands().is_empty());
    let dir = tempfile::tempdir().unwrap();
    let mut d = CheckpointDir::open(dir.path(), 2).unwrap();
    d.save_pipeline(&p, &Positions::default()).unwrap();
    let (q, _, path) = d.load_latest(&PipelineConfig::default()).unwrap().unwrap();
    assert_eq!(q.user_bands(), p.user_bands());
    let mut ckpt = read_file(&path).unwrap();
    let mut before = ckpt.clone();
    before.pipeline.as_mut().unwrap().user_bands = None;
    let (q, _) = restore(before, PipelineConfig::default()).unwrap();
    assert!(q.user_bands().is_empty());
    ckpt.pipeline
        .as_mut()
        .unwrap()
        .user_bands
        .as_mut()
        .unwrap()
        .correct
        .pop();
    let err = restore(ckpt, PipelineConfig::default()).unwrap_err().to_string();
    assert!(err.contains("user bands"), "{err}");
}

/// Checkpoints written by 1d55a89, before positions were typed
/// (tests/data/checkpoints: a JSON-lines run over the first 40 lines of
/// tests/data/sms_demo.jsonl, and a Kafka run over 30 messages on four
/// partitions), restore with each position read as what it is, and go back
/// to disk in the same maps.
#[test]
fn checkpoints_of_1d55a89_restore_with_their_positions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let cfg = PipelineConfig::default();
    let jsonl = dir.join("checkpoints/1d55a89-jsonl.ckpt");
    let (p, pos) = stream::load(&jsonl, cfg.clone()).unwrap();
    assert_eq!(p.model().version(), 36);
    let lines = fs::read_to_string(dir.join("sms_demo.jsonl")).unwrap();
    let line_40 = lines.lines().nth(39).unwrap();
    let key = &InputKey::FirstLine(0xf991_abe2_d9f8_152e);
    assert_eq!(InputKey::first_line(lines.lines().next().unwrap().as_bytes()), *key);
    assert_eq!(
        pos.line(key),
        Some(LinePosition {
            next: 40,
            mark: Some(xxhash_rust::xxh3::xxh3_64(line_40.as_bytes())),
        })
    );
    assert_eq!((pos.legacy_line(), pos.offset("fx-in", 0)), (None, None));
    let kafka = dir.join("checkpoints/1d55a89-kafka.ckpt");
    let (p, pos) = stream::load(&kafka, cfg).unwrap();
    assert_eq!(p.model().version(), 27);
    let offsets: Vec<_> = (0..5).map(|partition| pos.offset("fx-in", partition)).collect();
    assert_eq!(offsets, [Some(8), Some(8), Some(7), Some(7), None]);
    assert_eq!(pos.line(key), None);
    for path in [jsonl, kafka] {
        let c = read_file(&path).unwrap();
        let (_, pos) = stream::load(&path, PipelineConfig::default()).unwrap();
        assert_eq!(pos.to_maps(), (c.positions, c.position_marks), "{}", path.display());
    }
}

/// A checkpoint or model record naming an added member this build does
/// not know, or carrying one at another width, is refused with the
/// member's name, never restored without it or misread.
#[test]
fn an_unknown_or_misshapen_member_is_refused_by_name() {
    let p = trained(Learner::Logistic);
    let good = capture(&p, &Positions::default());
    assert!(restore_model(&mut good.clone()).is_ok());
    fn members(c: &mut pb::Checkpoint) -> &mut Vec<pb::MemberState> {
        &mut c.model.as_mut().unwrap().members
    }
    let mut unknown = good.clone();
    members(&mut unknown)[0].name = "teleport".into();
    let err = restore_model(&mut unknown).unwrap_err().to_string();
    assert!(err.contains("does not know") && err.contains("teleport"), "{err}");
    let mut wide = good.clone();
    members(&mut wide)[0].width += 1;
    let err = restore_model(&mut wide).unwrap_err().to_string();
    assert!(err.contains(&good.model.as_ref().unwrap().members[0].name), "{err}");
}
