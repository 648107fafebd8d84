//! One model, many instances, against the real broker: a learner publishes
//! its model to the model topic and predict-only replicas serve it.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command};
use std::time::Duration;

use common::deployment::Deployment;
use common::*;

/// A metric's value in a scrape (the first series of that name).
fn metric(addr: &str, name: &str) -> Option<f64> {
    let body = http_get(addr, "/metrics")?.1;
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The SMS slice with one message in five unlabeled (its label held back
/// as feedback), keyed by id: (input lines, feedback lines).
/// Messages to produce: (key, value, timestamp).
type Messages = Vec<(String, Vec<u8>, Option<i64>)>;

fn stream() -> (Vec<String>, Messages) {
    let mut input = Vec::new();
    let mut feedback = Vec::new();
    for (i, l) in sms_lines().iter().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        if i % 5 == 4 {
            let label = v.as_object_mut().unwrap().remove("label").unwrap();
            let id = v["id"].as_str().unwrap().to_string();
            feedback.push((
                id.clone(),
                serde_json::json!({"id": id, "label": label}).to_string().into_bytes(),
                None,
            ));
        }
        input.push(v.to_string());
    }
    (input, feedback)
}

/// One learner and two predictors on a 4-partition input: every unlabeled
/// message gets one prediction; the feedback for messages that either
/// replica predicted is learned, once; once both serve the learner's final
/// version, their scores for probes equal `classifyd predict` on the
/// learner's final checkpoint. A replica started while the learner is down
/// catches up from the topic alone.
#[test]
fn a_learner_and_two_predictors_serve_one_model() {
    let d = Deployment::new();
    let (topics, dir) = (&d.topics, d.dir.clone());
    let (input, feedback) = stream();
    let addrs: Vec<String> = (0..3).map(|_| format!("127.0.0.1:{}", free_port())).collect();
    let learner = d.learner(&[]);
    let predictors: Vec<Child> = addrs[..2].iter().map(|a| d.predictor(&["--metrics-addr", a])).collect();
    // The first model comes with the first labeled messages.
    produce(&topics.input, None, &lines_as_messages(&input[..50]));
    for a in &addrs[..2] {
        wait_for("a predictor ready", Duration::from_secs(60), || {
            http_get(a, "/readyz").is_some_and(|r| r.0 == 200)
        });
    }
    produce(&topics.input, None, &lines_as_messages(&input[50..]));
    let requests: BTreeSet<String> = feedback.iter().map(|f| f.0.clone()).collect();
    let preds = consume_all(&topics.output, requests.len(), Duration::from_secs(120));
    let predicted: BTreeSet<String> = preds
        .iter()
        .map(|(k, _, _)| String::from_utf8(k.clone()).unwrap())
        .collect();
    assert_eq!(predicted, requests, "every unlabeled message predicted");
    for (_, v, _) in &preds {
        let p: serde_json::Value = serde_json::from_slice(v).unwrap();
        let version = p["model_version"].as_u64().unwrap();
        assert!(version > 0, "served before any label was learned: {p}");
    }

    produce(&topics.feedback, None, &feedback);
    let labeled = (input.len() - feedback.len()) as u64;
    wait_for("all labels learned", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| {
            let c = c.pipeline.unwrap().counters.unwrap();
            c.learned == labeled && c.feedback_matched == feedback.len() as u64
        })
    });
    terminate(learner);
    let last = newest_checkpoint(&dir).unwrap();
    let final_version = last.model.as_ref().unwrap().version;
    assert_eq!(final_version, input.len() as u64, "each label learned once");
    let counters = last.pipeline.as_ref().unwrap().counters.clone().unwrap();
    assert_eq!(
        (counters.feedback_matched, counters.feedback_corrections),
        (feedback.len() as u64, 0)
    );

    // The learner is down: the predictors keep serving its last version,
    // and a new replica gets it from the topic alone.
    let late = d.predictor(&["--metrics-addr", &addrs[2]]);
    for a in &addrs {
        wait_for("the final version served", Duration::from_secs(60), || {
            metric(a, "classifyd_model_version") == Some(final_version as f64)
        });
    }
    assert!(metric(&addrs[0], "classifyd_model_swaps_total").unwrap() >= 2.0);

    // Probes: the replicas' scores equal `predict` on the learner's checkpoint.
    probes_match_predict(&d, requests.len());
    for p in predictors.into_iter().chain([late]) {
        terminate(p);
    }
}

/// Sends probe messages through the replicas and checks their
/// predictions (label, version, scores) against `classifyd predict` on the
/// learner's checkpoint; `before` predictions are on the topic already.
fn probes_match_predict(d: &Deployment, before: usize) {
    let (topics, dir) = (&d.topics, &d.dir);
    let probes: Vec<String> = [
        "WINNER!! claim your free prize now, call 09061701461",
        "are we still on for lunch tomorrow?",
        "URGENT your mobile number has won a cash award",
        "ok see you at home later",
    ]
    .iter()
    .enumerate()
    .map(|(i, t)| serde_json::json!({"id": format!("probe-{i}"), "text": t}).to_string())
    .collect();
    produce(&topics.input, None, &lines_as_messages(&probes));
    let all = consume_all(&topics.output, before + probes.len(), Duration::from_secs(60));
    let served: BTreeMap<String, serde_json::Value> = all
        .iter()
        .map(|(k, v, _)| {
            (
                String::from_utf8(k.clone()).unwrap(),
                serde_json::from_slice(v).unwrap(),
            )
        })
        .filter(|(k, _)| k.starts_with("probe-"))
        .collect();
    assert_eq!(served.len(), probes.len());
    let probe_file = d.tmp.path().join("probes.jsonl");
    write_lines(&probe_file, &probes);
    let out = Command::new(BIN)
        .args(["predict", "--checkpoint-dir"])
        .arg(dir)
        .arg("--input")
        .arg(&probe_file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let want: serde_json::Value = serde_json::from_str(line).unwrap();
        let got = &served[want["id"].as_str().unwrap()];
        assert_eq!(got["model_version"], want["model_version"]);
        assert_eq!(got["label"], want["label"]);
        for (class, w) in want["scores"].as_object().unwrap() {
            let g = got["scores"][class].as_f64().unwrap();
            assert!((g - w.as_f64().unwrap()).abs() <= 1e-6, "{class}: {g} against {w}");
        }
    }
}

/// kill -9 of a predictor and of the learner mid-stream: every unlabeled
/// message still gets a prediction (at least once), and the learner's
/// final model equals an uninterrupted run's over the same labels (none
/// learned twice, none skipped). Labeled messages go to one partition, so
/// that the learner's sequence is the reference's.
#[test]
fn kill_9_of_a_predictor_and_of_the_learner_loses_nothing() {
    let d = Deployment::new();
    let (topics, dir) = (&d.topics, d.dir.clone());
    let (input, feedback) = stream();
    let is_request = |l: &String| !l.contains("\"label\"");
    let labeled: Vec<String> = input.iter().filter(|l| !is_request(l)).cloned().collect();
    let requests: Vec<String> = input.iter().filter(|l| is_request(l)).cloned().collect();
    let flags = ["--checkpoint-every-updates", "50"];
    let mut learner = d.learner(&flags);
    let mut predictors: Vec<Child> = (0..2).map(|_| d.predictor(&[])).collect();
    let (half, quarter) = (labeled.len() / 2, requests.len() / 2);
    produce(&topics.input, Some(0), &lines_as_messages(&labeled[..half]));
    produce(&topics.input, None, &lines_as_messages(&requests[..quarter]));
    wait_for("the learner past a few checkpoints", Duration::from_secs(60), || {
        newest_checkpoint(&dir).is_some_and(|c| c.model.unwrap().version >= 150)
    });
    learner.kill().unwrap();
    learner.wait().unwrap();
    predictors[0].kill().unwrap();
    predictors[0].wait().unwrap();
    predictors[0] = d.predictor(&[]);
    let learner = d.learner(&flags);
    produce(&topics.input, Some(0), &lines_as_messages(&labeled[half..]));
    produce(&topics.input, None, &lines_as_messages(&requests[quarter..]));
    wait_for("every message read by the learner", Duration::from_secs(120), || {
        newest_checkpoint(&dir).is_some_and(|c| consumed(&c, &topics.input) == input.len() as u64)
    });
    produce(&topics.feedback, Some(0), &feedback);
    wait_for("all feedback learned", Duration::from_secs(120), || {
        newest_checkpoint(&dir)
            .is_some_and(|c| c.pipeline.unwrap().counters.unwrap().feedback_matched == feedback.len() as u64)
    });
    terminate(learner);
    let preds = consume_all(&topics.output, requests.len(), Duration::from_secs(120));
    let predicted: BTreeSet<String> = preds
        .iter()
        .map(|(k, _, _)| String::from_utf8(k.clone()).unwrap())
        .collect();
    let want: BTreeSet<String> = feedback.iter().map(|f| f.0.clone()).collect();
    assert_eq!(predicted, want, "no prediction lost");
    for p in predictors {
        terminate(p);
    }
    // The reference: the same labels, then the requests, then their feedback.
    let mut sequence = labeled.clone();
    sequence.extend(requests.iter().cloned());
    sequence.extend(feedback.iter().map(|f| String::from_utf8(f.1.clone()).unwrap()));
    let reference = reference_checkpoint(&sequence, d.tmp.path());
    let got = newest_checkpoint(&dir).unwrap();
    assert_eq!(
        got.model, reference.model,
        "the learner's model is the uninterrupted run's"
    );
}

/// `POST /v1/classify` on a learner and a predictor: the predictor answers
/// what it publishes on the output topic for the same message, the learner
/// the same label and version from its live model, and a label sent later
/// for a message asked of the learner is joined and learned.
#[test]
fn a_learner_and_a_predictor_answer_requests_like_the_output_topic() {
    use common::http::{classify, client, settled, wait_for_endpoint};
    let d = Deployment::new();
    let (topics, dir) = (&d.topics, d.dir.clone());
    let lines = sms_lines();
    let http: Vec<String> = (0..2).map(|_| format!("127.0.0.1:{}", free_port())).collect();
    let metrics = format!("127.0.0.1:{}", free_port());
    let learner = d.learner(&["--http-addr", &http[0]]);
    let predictor = d.predictor(&["--http-addr", &http[1], "--metrics-addr", &metrics]);
    produce(&topics.input, None, &lines_as_messages(&lines[..800]));
    let learned = |want: u64, matched: u64| {
        newest_checkpoint(&dir).is_some_and(|c| {
            let c = c.pipeline.unwrap().counters.unwrap();
            c.learned == want && c.feedback_matched == matched
        })
    };
    wait_for("the labels learned", Duration::from_secs(120), || learned(800, 0));
    wait_for("the predictor on version 800", Duration::from_secs(60), || {
        metric(&metrics, "classifyd_model_version") == Some(800.0)
    });
    let requests: Vec<String> = lines[800..830]
        .iter()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("label");
            v.to_string()
        })
        .collect();
    produce(&topics.input, None, &lines_as_messages(&requests));
    let published: BTreeMap<Vec<u8>, serde_json::Value> = consume_all(&topics.output, 30, Duration::from_secs(60))
        .into_iter()
        .map(|(k, v, _)| (k, serde_json::from_slice(&v).unwrap()))
        .collect();
    assert_eq!(published.len(), 30);
    let agent = client();
    wait_for_endpoint(&agent, &http[0]);
    for request in &requests {
        let id: serde_json::Value = serde_json::from_str(request).unwrap();
        let want = &published[id["id"].as_str().unwrap().as_bytes()];
        let (status, got) = classify(&agent, &http[1], "", request);
        assert_eq!((status, settled(got)), (200, settled(want.clone())), "{request}");
        let (_, live) = classify(&agent, &http[0], "", request);
        assert_eq!(
            (&live["label"], &live["model_version"]),
            (&want["label"], &want["model_version"])
        );
        for (class, score) in want["scores"].as_object().unwrap() {
            let learner_score = live["scores"][class].as_f64().unwrap();
            assert!(
                (learner_score - score.as_f64().unwrap()).abs() < 1e-3,
                "{live} vs {want}"
            );
        }
    }
    // Asked of the learner, labeled later on the feedback topic.
    let asked: serde_json::Value = serde_json::from_str(&lines[830]).unwrap();
    let body = serde_json::json!({"id": "asked-1", "text": asked["text"]}).to_string();
    assert_eq!(classify(&agent, &http[0], "", &body).0, 200);
    let label = serde_json::json!({"id": "asked-1", "label": asked["label"]}).to_string();
    produce(&topics.feedback, None, &[("asked-1".into(), label.into_bytes(), None)]);
    wait_for("the asked message's label joined", Duration::from_secs(60), || {
        learned(800, 1)
    });
    terminate(predictor);
    terminate(learner);
}

/// A lesson taught to a predictor (`spamc -L spam`) is forwarded to the
/// learner through the input topic, answered once the broker has it,
/// learned by the learner once, and visible in the predictor's next model
/// version; a forget goes the same way.
#[test]
fn a_lesson_taught_to_a_predictor_is_learned_by_the_learner() {
    let d = Deployment::new();
    let (topics, dir) = (&d.topics, d.dir.clone());
    let (spamd, metrics) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let learner = d.learner(&[]);
    let predictor = d.predictor(&["--spamd-addr", &spamd, "--metrics-addr", &metrics]);
    let lines = sms_lines();
    produce(&topics.input, None, &lines_as_messages(&lines[..300]));
    let learned = |n: u64| newest_checkpoint(&dir).is_some_and(|c| c.pipeline.unwrap().counters.unwrap().learned == n);
    wait_for("the labels learned", Duration::from_secs(120), || learned(300));
    wait_for("the predictor on version 300", Duration::from_secs(60), || {
        metric(&metrics, "classifyd_model_version") == Some(300.0)
    });
    let (host, port) = spamd.rsplit_once(':').unwrap();
    let spamc = |args: &[&str], raw: &[u8]| {
        let args = [&["-d", host, "-p", port, "-t", "30"], args].concat();
        common::mail::client("spamc", "spamc", &args, raw).0
    };
    let margin = |report: &str| -> f32 {
        let at = report
            .find("(margin ")
            .unwrap_or_else(|| panic!("no margin in {report}"))
            + 8;
        report[at..].split([',', ')']).next().unwrap().parse().unwrap()
    };
    let raw = b"Message-ID: <lesson-1@example.com>\nSubject: the club newsletter\n\nsee you at the club tonight\n";
    let before = margin(&spamc(&["-R"], raw));
    assert_eq!(spamc(&["-L", "spam"], raw).trim(), "Message successfully un/learned");
    wait_for("the lesson learned by the learner", Duration::from_secs(60), || {
        learned(301)
    });
    wait_for("the predictor on version 301", Duration::from_secs(60), || {
        metric(&metrics, "classifyd_model_version") == Some(301.0)
    });
    let taught = margin(&spamc(&["-R"], raw));
    assert!(
        taught > before,
        "the predictor's next version carries it: {before} -> {taught}"
    );
    // A forget, the same way: the lesson taken back.
    assert_eq!(spamc(&["-L", "forget"], raw).trim(), "Message successfully un/learned");
    wait_for("the forget learned", Duration::from_secs(60), || {
        newest_checkpoint(&dir).is_some_and(|c| c.pipeline.unwrap().counters.unwrap().labels_forgotten == 1)
    });
    terminate(predictor);
    terminate(learner);
}

/// The console on a Kafka predictor (issue 64): its history shows the
/// stream's predictions with their text, it reads the predictor's copies
/// (a scan is predicted with the version the learner published), and a
/// lesson taught there is forwarded like a mail lesson: learned by
/// the learner, carried by the predictor's next version; a forget the
/// same way.
#[test]
fn a_lesson_taught_on_a_predictors_console_is_learned_by_the_learner() {
    use common::http::client;
    let d = Deployment::new();
    let (topics, dir) = (&d.topics, d.dir.clone());
    let (console, metrics) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let learner = d.learner(&[]);
    let predictor = d.predictor(&["--console-addr", &console, "--metrics-addr", &metrics]);
    produce(&topics.input, None, &lines_as_messages(&sms_lines()[..300]));
    let counters = || newest_checkpoint(&dir).map(|c| c.pipeline.unwrap().counters.unwrap());
    wait_for("the labels learned", Duration::from_secs(120), || {
        counters().is_some_and(|c| c.learned == 300)
    });
    let on_version = |v: f64| {
        wait_for(
            &format!("the predictor on version {v}"),
            Duration::from_secs(60),
            || metric(&metrics, "classifyd_model_version") == Some(v),
        )
    };
    on_version(300.0);
    let agent = client();
    let call = |path: &str, body: serde_json::Value| -> (u16, serde_json::Value) {
        let mut r = (agent.post(format!("http://{console}/api/{path}")))
            .header("content-type", "application/json")
            .send(body.to_string())
            .expect("an answer");
        let text = r.body_mut().read_to_string().expect("a body");
        (r.status().as_u16(), serde_json::from_str(&text).unwrap_or_default())
    };
    // The stream's predictions are in the predictor's history, with their
    // text (a predictor keeps no record of them: the message's own).
    let asked = r#"{"id": "ask-1", "text": "are we still on for the club tonight"}"#;
    produce(&topics.input, None, &lines_as_messages(&[asked.to_string()]));
    wait_for(
        "the stream's prediction in the history",
        Duration::from_secs(60),
        || {
            let (_, h) = call("history", serde_json::json!({"q": "ask-1"}));
            h["entries"][0]["text"] == "are we still on for the club tonight"
        },
    );
    let text = "the club newsletter: see you at the club tonight";
    let spam_margin = |v: &serde_json::Value| v["margins"]["spam"].as_f64().expect("a spam margin");
    let (code, scanned) = call("scan", serde_json::json!({"text": text}));
    assert_eq!((code, scanned["model_version"].as_u64()), (200, Some(300)), "{scanned}");
    let id = scanned["id"].as_str().expect("an id").to_string();
    let lesson = serde_json::json!({"id": id, "text": text, "label": "spam"});
    assert_eq!(call("teach", lesson).0, 200, "taught from a loopback client");
    wait_for("the lesson learned by the learner", Duration::from_secs(60), || {
        counters().is_some_and(|c| c.learned == 301)
    });
    on_version(301.0);
    let (_, again) = call("scan", serde_json::json!({"text": text}));
    assert!(spam_margin(&again) > spam_margin(&scanned), "{scanned} -> {again}");
    assert_eq!(call("teach", serde_json::json!({"id": id, "forget": true})).0, 200);
    wait_for("the forget learned", Duration::from_secs(60), || {
        counters().is_some_and(|c| c.labels_forgotten == 1)
    });
    terminate(predictor);
    terminate(learner);
}

/// The pool view (`--pool-topic`): the learner's console lists the learner
/// and both predictors with the model version each serves, the predictors
/// catching up with the learner's; a predictor stopped leaves the list.
#[test]
fn the_learners_console_shows_each_predictors_served_version() {
    use common::http::client;
    let d = Deployment::new();
    let pool = unique("pool");
    let console = format!("127.0.0.1:{}", free_port());
    let with_pool = ["--pool-topic", pool.as_str()];
    let learner = d.learner(&[&with_pool[..], &["--console-addr", &console]].concat());
    let predictors = [d.predictor(&with_pool), d.predictor(&with_pool)];
    produce(&d.topics.input, None, &lines_as_messages(&sms_lines()[..200]));
    let agent = client();
    let members = || -> Vec<(String, u64)> {
        let Ok(mut r) = agent.get(format!("http://{console}/api/pool")).call() else {
            return Vec::new();
        };
        let v: serde_json::Value =
            serde_json::from_str(&r.body_mut().read_to_string().unwrap_or_default()).unwrap_or_default();
        (v["pool"].as_array().into_iter().flatten())
            .map(|m| {
                (
                    m["role"].as_str().unwrap_or("").to_string(),
                    m["model_version"].as_u64().unwrap_or(0),
                )
            })
            .collect()
    };
    wait_for("the pool at version 200", Duration::from_secs(120), || {
        let mut m = members();
        m.sort();
        m == [
            ("learner".into(), 200),
            ("predictor".into(), 200),
            ("predictor".into(), 200),
        ]
    });
    // A predictor that stops cleanly leaves the pool (its tombstone).
    let [first, second] = predictors;
    terminate(first);
    wait_for(
        "the stopped predictor gone from the pool",
        Duration::from_secs(60),
        || {
            let mut m = members();
            m.sort();
            m == [("learner".into(), 200), ("predictor".into(), 200)]
        },
    );
    terminate(second);
    terminate(learner);
}
