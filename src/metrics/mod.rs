//! Prometheus metrics and the health endpoints.
//!
//! The recorder (metrics-exporter-prometheus) is installed first, every
//! metric is described once ([`describe`]), and a thread ([`endpoint`],
//! hyper like `POST /v1/classify`) serves `/metrics`, `/healthz` (alive)
//! and `/readyz` (model loaded and, on Kafka, partitions assigned). Counters and gauges that mirror the
//! pipeline's state are refreshed by [`publish`] about once a second, off
//! the per-message path; only the latency histograms are recorded per
//! message, and a thread folds their samples into buckets every few
//! seconds, so memory stays flat whether or not anyone scrapes. The
//! standard `process_*` metrics (CPU, memory, file descriptors, threads)
//! come from metrics-process at each scrape. Label
//! values come from bounded sets: reasons, outcomes, windows,
//! and at most [`MAX_CLASS_SERIES`] class names (the rest are folded into
//! "other"); never ids, keys or texts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::message::BadReason;
use crate::pipeline::Pipeline;

mod catalog;
mod endpoint;

use endpoint::{Pages, Server};

/// Classes beyond this many share the label value "other".
pub const MAX_CLASS_SERIES: usize = 50;

/// Buckets of the per-message latency histograms, in seconds.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];
/// Buckets of the end-to-end (input timestamp to publish) histogram.
pub const END_TO_END_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// Buckets of the checkpoint duration histogram.
/// Buckets of the model's staleness (seconds): around the default cadence of half a second.
pub const STALENESS_BUCKETS: &[f64] = &[
    0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0,
];
pub const CHECKPOINT_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

pub use catalog::METRICS;

/// Describes every metric once (Prometheus HELP and units).
pub fn describe() {
    for &(name, kind, help) in METRICS {
        let unit = if name.ends_with("_seconds") {
            Some(Unit::Seconds)
        } else if name.ends_with("_bytes") {
            Some(Unit::Bytes)
        } else {
            None
        };
        match (kind, unit) {
            ("counter", _) => describe_counter!(name, help),
            ("gauge", Some(u)) => describe_gauge!(name, u, help),
            ("gauge", None) => describe_gauge!(name, help),
            (_, Some(u)) => describe_histogram!(name, u, help),
            (_, None) => describe_histogram!(name, help),
        }
    }
}

/// Why the metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("invalid --metrics-addr {0:?}: {1}")]
    Addr(String, String),
    #[error("cannot install the metrics recorder: {0}")]
    Recorder(String),
    #[error("cannot serve metrics on {0}: {1}")]
    Bind(String, String),
    #[error("cannot start the {0} thread: {1}")]
    Thread(String, String),
}

/// The running endpoint.
#[derive(Clone, Debug)]
pub struct Telemetry {
    ready: Arc<AtomicBool>,
    handle: PrometheusHandle,
    /// Where it listens (the port is resolved when 0 was asked for).
    pub addr: SocketAddr,
}

impl Telemetry {
    /// `/readyz` answers 200 once this is set.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// The exposition text, as `/metrics` serves it.
    pub fn render(&self) -> String {
        self.handle.render()
    }
}

/// Installs the recorder, describes the metrics and serves them on `addr`.
pub fn install(addr: &str) -> Result<Telemetry, MetricsError> {
    let sock: SocketAddr = addr
        .parse()
        .map_err(|e: std::net::AddrParseError| MetricsError::Addr(addr.into(), e.to_string()))?;
    let recorder = |e: metrics_exporter_prometheus::BuildError| MetricsError::Recorder(e.to_string());
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("classifyd_end_to_end_latency_seconds".into()),
            END_TO_END_BUCKETS,
        )
        .map_err(recorder)?
        .set_buckets_for_metric(
            Matcher::Full("classifyd_checkpoint_duration_seconds".into()),
            CHECKPOINT_BUCKETS,
        )
        .map_err(recorder)?
        .set_buckets_for_metric(
            Matcher::Full("classifyd_model_staleness_seconds".into()),
            STALENESS_BUCKETS,
        )
        .map_err(recorder)?
        .set_buckets_for_metric(
            Matcher::Full("classifyd_model_delivery_seconds".into()),
            STALENESS_BUCKETS,
        )
        .map_err(recorder)?
        .set_buckets_for_metric(Matcher::Suffix("_duration_seconds".into()), LATENCY_BUCKETS)
        .map_err(recorder)?
        .install_recorder()
        .map_err(recorder)?;
    describe();
    // process_cpu_seconds_total, process_resident_memory_bytes, open fds, threads, start time.
    let process = metrics_process::Collector::default();
    process.describe();
    export_from_start();
    let endpoint = Server::bind(sock, addr)?;
    let addr = endpoint.local_addr().unwrap_or(sock);
    let ready = Arc::new(AtomicBool::new(false));
    let t = Telemetry {
        ready: Arc::clone(&ready),
        handle: handle.clone(),
        addr,
    };
    // Histogram samples queue in the recorder until upkeep folds them into
    // their buckets; with upkeep only at scrapes, a daemon nobody scrapes
    // grew without bound (~1 MB/s at ~50k msg/s; flat with this thread).
    let upkeep = handle.clone();
    spawn("metrics-upkeep", move || {
        loop {
            std::thread::sleep(UPKEEP_INTERVAL);
            upkeep.run_upkeep();
        }
    })?;
    let pages = Pages { handle, ready, process };
    spawn("metrics-http", move || endpoint.serve(pages))?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    Ok(t)
}

/// Exports the series that alerts and dashboards read from the start, at
/// 0 (or registered, for histograms), before the first event that moves them.
fn export_from_start() {
    // Present from the start, so alerts on their rate have a series to read.
    counter!("classifyd_checkpoint_failures_total").absolute(0);
    counter!("classifyd_lessons_not_durable_total").absolute(0);
    counter!("classifyd_lessons_refused_total", "reason" => "unknown_label").absolute(0);
    for name in [
        "classifyd_model_age_seconds",
        "classifyd_model_versions_behind",
        "classifyd_model_epoch",
    ] {
        gauge!(name).set(0.0);
    }
    for name in ["classifyd_model_swaps_total", "classifyd_model_records_refused_total"] {
        counter!(name).absolute(0);
    }
    // Before the first checkpoint: none written, and the state is as
    // fresh as the start (a checkpoint-age alert counts from there).
    counter!("classifyd_checkpoints_total").absolute(0);
    gauge!("classifyd_checkpoint_size_bytes").set(0.0);
    gauge!("classifyd_checkpoint_timestamp_seconds").set(crate::clock::now_ms() as f64 / 1000.0);
    let _ = metrics::histogram!("classifyd_checkpoint_duration_seconds");
    // Registered, so that it is exported (empty) before the first swap.
    let _ = metrics::histogram!("classifyd_model_staleness_seconds");
    let _ = metrics::histogram!("classifyd_model_delivery_seconds");
    for kind in ["full", "delta"] {
        let _ = metrics::histogram!("classifyd_model_update_duration_seconds", "kind" => kind);
    }
    let _ = metrics::histogram!("classifyd_http_request_duration_seconds");
    counter!("classifyd_http_requests_total", "code" => "200").absolute(0);
    for reason in ["too_many_connections", "too_many_from_address", "accept_error"] {
        counter!("classifyd_http_connections_refused_total", "reason" => reason).absolute(0);
    }
    for name in ["classifyd_http_model_publications_total", "classifyd_http_unkept_total"] {
        counter!(name).absolute(0);
    }
    gauge!("classifyd_http_model_version").set(0.0);
    // The mail protocols' series, at 0 before their first request.
    for protocol in ["spamd", "rspamd"] {
        let _ = metrics::histogram!("classifyd_mail_request_duration_seconds", "protocol" => protocol);
        counter!("classifyd_mail_refused_total", "protocol" => protocol, "reason" => "unauthenticated").absolute(0);
    }
    counter!("classifyd_mail_requests_total", "protocol" => "spamd", "command" => "check").absolute(0);
    counter!("classifyd_console_requests_total", "call" => "status", "code" => "200").absolute(0);
    counter!("classifyd_mail_requests_total", "protocol" => "rspamd", "command" => "checkv2").absolute(0);
    for kind in ["full", "delta"] {
        counter!("classifyd_model_published_bytes_total", "kind" => kind).absolute(0);
        counter!("classifyd_model_publications_total", "kind" => kind).absolute(0);
    }
}

/// Starts a named thread that lives as long as the process.
fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<(), MetricsError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map(drop)
        .map_err(|e| MetricsError::Thread(name.into(), e.to_string()))
}

/// How often the recorder's queued histogram samples are folded into buckets
/// (besides at every scrape).
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// How often [`publish`] runs.
pub const PUBLISH_INTERVAL: Duration = Duration::from_secs(1);

/// Mirrors the pipeline's counters and metrics into the recorder.
pub fn publish(p: &Pipeline) {
    let c = p.counters();
    let msg = |kind: &'static str, outcome: &'static str, v: u64| {
        counter!("classifyd_messages_total", "kind" => kind, "outcome" => outcome).absolute(v)
    };
    msg("labeled", "learned", c.learned);
    msg("labeled", "test", c.test_scored);
    msg("unlabeled", "predicted", c.predicted);
    msg("feedback", "matched", c.feedback_matched - c.feedback_corrections);
    msg("feedback", "correction", c.feedback_corrections);
    msg("feedback", "unmatched", c.feedback_unmatched);
    msg("any", "bad", c.bad_total());
    msg("any", "skipped", c.skipped);
    msg("any", "passed", c.passed);
    for r in BadReason::ALL {
        counter!("classifyd_bad_input_total", "reason" => r.as_str()).absolute(c.bad[r.index()]);
    }
    let labels = p.model().labels();
    let class_label = |name: &str| -> String {
        match labels.get(name) {
            Some(id) if id < MAX_CLASS_SERIES => name.to_string(),
            _ => "other".to_string(),
        }
    };
    let mut by_label: std::collections::BTreeMap<String, u64> = Default::default();
    for (l, n) in &c.predicted_by_label {
        *by_label.entry(class_label(l)).or_default() += n;
    }
    for (l, n) in by_label {
        counter!("classifyd_predictions_total", "class" => l).absolute(n);
    }
    let cache = p.cache();
    gauge!("classifyd_feedback_cache_entries").set(cache.len() as f64);
    gauge!("classifyd_feedback_cache_bytes").set(cache.bytes() as f64);
    counter!("classifyd_feedback_cache_dropped_total", "cause" => "expired").absolute(cache.expired);
    counter!("classifyd_feedback_cache_dropped_total", "cause" => "evicted").absolute(cache.evicted);

    let prog = p.progressive();
    let total = prog.total();
    let window = prog.window();
    counter!("classifyd_progressive_examples_total").absolute(total.examples);
    // Before the first example the ratios are NaN (exported, so that a
    // dashboard shows "no value yet" rather than "no data", and no alert
    // compares true against it), not 0.
    let or_nan = |seen: u64, v: f64| if seen > 0 { v } else { f64::NAN };
    let n = total.examples;
    gauge!("classifyd_progressive_accuracy_ratio", "window" => "cumulative").set(or_nan(n, total.accuracy()));
    gauge!("classifyd_progressive_accuracy_ratio", "window" => "sliding").set(or_nan(n, window.accuracy()));
    gauge!("classifyd_progressive_macro_f1_ratio", "window" => "cumulative").set(or_nan(n, total.macro_f1()));
    gauge!("classifyd_progressive_macro_f1_ratio", "window" => "sliding").set(or_nan(n, window.macro_f1()));
    for (name, cc) in prog.labels().iter().zip(&window.per_class).take(MAX_CLASS_SERIES) {
        let class = name.clone();
        gauge!("classifyd_class_precision_ratio", "class" => class.clone(), "window" => "sliding").set(cc.precision());
        gauge!("classifyd_class_recall_ratio", "class" => class.clone(), "window" => "sliding").set(cc.recall());
        gauge!("classifyd_class_f1_ratio", "class" => class, "window" => "sliding").set(cc.f1());
    }
    gauge!("classifyd_roc_auc_ratio", "window" => "sliding").set(prog.window_roc_auc().unwrap_or(f64::NAN));
    gauge!("classifyd_roc_auc_ratio", "window" => "cumulative").set(prog.roc_auc().unwrap_or(f64::NAN));
    let published = p.published();
    let n = published.total().examples;
    gauge!("classifyd_published_accuracy_ratio", "window" => "cumulative").set(or_nan(n, published.total().accuracy()));
    gauge!("classifyd_published_accuracy_ratio", "window" => "sliding").set(or_nan(n, published.window().accuracy()));
    gauge!("classifyd_classes").set(labels.len() as f64);
    gauge!("classifyd_model_version").set(p.model().version() as f64);
    gauge!("classifyd_model_weights_bytes").set(p.model().state_bytes() as f64);
    if let Some(stack) = p.model().stack() {
        for m in crate::model::stack::Member::ALL {
            gauge!("classifyd_stack_weight", "member" => m.name()).set(f64::from(stack.weight(m)));
        }
        gauge!("classifyd_stack_weight", "member" => "bias").set(f64::from(stack.bias()));
    }
    let drift = p.drift();
    for w in crate::eval::drift::Watched::ALL {
        let i = w as usize;
        counter!("classifyd_drift_detections_total", "stream" => w.as_str()).absolute(drift.detections[i]);
        gauge!("classifyd_drift_statistic", "stream" => w.as_str()).set(drift.statistic(w));
        let last = drift.last_unix_ms[i];
        let last = if last > 0 { last as f64 / 1000.0 } else { f64::NAN };
        gauge!("classifyd_drift_last_detection_timestamp_seconds", "stream" => w.as_str()).set(last);
    }
    counter!("classifyd_model_weights_pruned_total").absolute(p.model().pruned_weights());
    publish_review(p);
    publish_feedback(p);
    publish_user_bands(p);
}

/// The uncertain predictions and the review queue.
fn publish_review(p: &Pipeline) {
    let c = p.counters();
    counter!("classifyd_uncertain_predictions_total").absolute(c.uncertain);
    counter!("classifyd_review_messages_total", "outcome" => "sent").absolute(c.reviewed);
    counter!("classifyd_review_messages_total", "outcome" => "over_budget").absolute(c.review_over_budget);
    gauge!("classifyd_review_band").set(p.review().band());
}

/// Users' labeled messages and how many were predicted right, by band of
/// the user's labels before them: a label per band, never per user.
fn publish_user_bands(p: &Pipeline) {
    for (band, examples, correct) in p.user_bands().tallies() {
        counter!("classifyd_user_labeled_total", "band" => band.clone()).absolute(examples);
        counter!("classifyd_user_correct_total", "band" => band.clone()).absolute(correct);
        let ratio = if examples > 0 {
            correct as f64 / examples as f64
        } else {
            f64::NAN
        };
        gauge!("classifyd_user_accuracy_ratio", "band" => band).set(ratio);
    }
}

/// The labels by how far they were believed, and the reporters.
fn publish_feedback(p: &Pipeline) {
    let c = p.counters();
    let refused = c.bad[BadReason::BadReporter.index()];
    for (outcome, n) in [
        ("in_full", c.labels_in_full),
        ("down_weighted", c.labels_down_weighted),
        ("held", c.labels_held),
        ("corroborated", c.labels_corroborated),
        ("refused", refused),
        ("repeated", c.labels_repeated),
        ("replaced", c.labels_replaced),
        ("forgotten", c.labels_forgotten),
        ("unrecorded", c.labels_unrecorded),
    ] {
        counter!("classifyd_labels_total", "outcome" => outcome).absolute(n);
    }
    for (outcome, n) in [("unmatched", c.forgets_unmatched), ("refused", c.forgets_refused)] {
        counter!("classifyd_forgets_total", "outcome" => outcome).absolute(n);
    }
    gauge!("classifyd_label_contradiction_ratio").set(f64::from(p.contradiction_share()));
    let r = p.reporters();
    gauge!("classifyd_reporters").set(r.len() as f64);
    gauge!("classifyd_reporters_unreliable").set(r.unreliable() as f64);
    counter!("classifyd_reporters_evicted_total").absolute(r.evicted);
}

/// Records a checkpoint of `bytes` written in `took`.
pub fn checkpoint_saved(bytes: u64, took: Duration) {
    counter!("classifyd_checkpoints_total").increment(1);
    metrics::histogram!("classifyd_checkpoint_duration_seconds").record(took.as_secs_f64());
    gauge!("classifyd_checkpoint_size_bytes").set(bytes as f64);
    gauge!("classifyd_checkpoint_timestamp_seconds").set(crate::clock::now_ms() as f64 / 1000.0);
}

/// Records `n` mail lessons refused because the lessons log could not
/// take them.
pub fn lessons_not_durable(n: usize) {
    counter!("classifyd_lessons_not_durable_total").increment(n as u64);
}

/// Records `n` lessons refused before they were made durable, for
/// `reason` (a bounded set: unknown_label).
pub fn lessons_refused(reason: &'static str, n: usize) {
    counter!("classifyd_lessons_refused_total", "reason" => reason).increment(n as u64);
}

/// Whether a predictor's last forward of lessons to the learner
/// succeeded (1 before any): 0 while its lessons are refused.
pub fn lessons_forwarding(ok: bool) {
    gauge!("classifyd_lessons_forwarding").set(if ok { 1.0 } else { 0.0 });
}

/// Records a predictor's lessons' producer built anew (the last was
/// broken for good).
pub fn lessons_producer_rebuilt() {
    counter!("classifyd_lessons_producer_rebuilds_total").increment(1);
}

/// Records a checkpoint that failed or was put off.
pub fn checkpoint_failed() {
    counter!("classifyd_checkpoint_failures_total").increment(1);
}

/// Records how long handling one message took, by what it was.
pub fn handled(outcome: &crate::pipeline::Outcome, took: Duration) {
    use crate::pipeline::Outcome;
    match outcome {
        Outcome::Learned { .. } => metrics::histogram!("classifyd_learn_duration_seconds").record(took.as_secs_f64()),
        Outcome::Predicted(_) => metrics::histogram!("classifyd_predict_duration_seconds").record(took.as_secs_f64()),
        _ => {}
    }
}

/// A learner published a model version of `bytes` (keys and values).
pub fn model_published(kind: &'static str, bytes: u64) {
    counter!("classifyd_model_published_bytes_total", "kind" => kind).increment(bytes);
    counter!("classifyd_model_publications_total", "kind" => kind).increment(1);
}

/// A predictor put a newer model version in service.
pub fn model_swapped() {
    counter!("classifyd_model_swaps_total").increment(1);
}

/// A predictor's staleness: the version it serves (epoch, version, when
/// the learner published it) against the newest (epoch, version) the
/// model topic has named.
pub fn model_served(served: Option<(u64, u64, u64)>, newest: (u64, u64)) {
    let Some((epoch, version, published_ms)) = served else {
        return;
    };
    gauge!("classifyd_model_epoch").set(epoch as f64);
    let age = crate::clock::now_ms().saturating_sub(published_ms) as f64 / 1000.0;
    gauge!("classifyd_model_age_seconds").set(age);
    let behind = if newest.0 == epoch {
        newest.1.saturating_sub(version)
    } else {
        0
    };
    gauge!("classifyd_model_versions_behind").set(behind as f64);
}

/// A predictor put in service a version whose oldest update the learner
/// learned at `oldest_update_ms` (0: unknown, not recorded) and which it
/// published at `published_ms`: the staleness, and the part of it after
/// publication (the rest is the learner's: its cadence, the wait for the
/// broker to take the version before, reading and encoding the rows).
pub fn model_staleness(oldest_update_ms: u64, published_ms: u64) {
    let now = crate::clock::now_ms();
    let secs = |since: u64| now.saturating_sub(since) as f64 / 1000.0;
    tracing::debug!(
        staleness = secs(oldest_update_ms),
        after_publication = secs(published_ms),
        "model version in service"
    );
    if oldest_update_ms > 0 {
        metrics::histogram!("classifyd_model_staleness_seconds").record(secs(oldest_update_ms));
    }
    if published_ms > 0 {
        metrics::histogram!("classifyd_model_delivery_seconds").record(secs(published_ms));
    }
}

/// A request to the HTTP endpoint was answered with `code` after `took`.
pub fn http_answered(code: u16, took: Duration) {
    counter!("classifyd_http_requests_total", "code" => code.to_string()).increment(1);
    metrics::histogram!("classifyd_http_request_duration_seconds").record(took.as_secs_f64());
}

/// A connection to the HTTP endpoint was closed unserved.
pub fn http_refused(reason: &'static str) {
    counter!("classifyd_http_connections_refused_total", "reason" => reason).increment(1);
}

/// A request's prediction was not kept for its late label (the queue to
/// the learning loop was full).
pub fn http_unkept() {
    counter!("classifyd_http_unkept_total").increment(1);
}

/// A mail protocol's request answered (`protocol`: spamd), by command.
pub fn mail_answered(protocol: &'static str, command: &'static str, took: Duration) {
    counter!("classifyd_mail_requests_total", "protocol" => protocol, "command" => command).increment(1);
    metrics::histogram!("classifyd_mail_request_duration_seconds", "protocol" => protocol).record(took.as_secs_f64());
}

/// A request to the console answered with `code`, by what it called (a
/// bounded set: the API's calls, "asset", "other").
pub fn console_answered(call: &'static str, code: u16) {
    counter!("classifyd_console_requests_total", "call" => call, "code" => code.to_string()).increment(1);
}

/// A mail protocol's request or connection refused, by reason.
pub fn mail_refused(protocol: &'static str, reason: &'static str) {
    counter!("classifyd_mail_refused_total", "protocol" => protocol, "reason" => reason).increment(1);
}

/// The copies that answer requests now serve `version`.
pub fn http_model(version: u64) {
    counter!("classifyd_http_model_publications_total").increment(1);
    gauge!("classifyd_http_model_version").set(version as f64);
}

/// A predictor put a model update of `kind` (full, delta) in service in `took`.
pub fn model_updated(kind: &'static str, took: Duration) {
    metrics::histogram!("classifyd_model_update_duration_seconds", "kind" => kind).record(took.as_secs_f64());
}
