//! classifyd: learns a text classifier online from a message stream.
//!
//! The pipeline is `source -> parse -> features -> model -> sink`, with the
//! checkpoint beside it; transports only move bytes and positions.
//!
//! - [`config`]: flags, environment variables, config file, validation.
//! - [`message`]: the input contract and the bounded set of bad-input reasons.
//! - [`email`]: raw RFC 5322 / MIME e-mail into the text the model reads.
//! - [`mailbox`]: Maildir, mbox and message folders as message streams.
//! - [`features`]: tokenizer, word and character n-grams, feature hashing.
//! - [`hugepages`]: zeroed hashed-feature tables on transparent huge pages.
//! - [`model`]: the online learners (perceptron, logistic, hinge, naive
//!   Bayes; one-vs-rest multi-label) and the lazily averaged weights.
//! - [`eval`]: progressive (test-then-train) metrics.
//! - [`pipeline`]: one message in, one outcome out; the late-label join cache.
//! - [`replica`]: the model topic: a learner publishes its model, predict-only
//!   replicas rebuild it.
//! - [`checkpoint`]: protobuf checkpoints, atomic and checksummed, with
//!   the input positions they cover.
//! - [`daemon`]: `classifyd run`'s daemon, assembled once: the core that
//!   takes each record through the pipeline, the checkpoint protocol, the
//!   lessons, the endpoints started over the copies of its model.
//! - [`transport`]: what the daemon reads and delivers through: JSON lines
//!   ([`transport::jsonl`]) and Kafka ([`transport::kafka`], exactly-once
//!   learning through checkpointed offsets).
//! - [`commands`]: `eval`, `learn`, `predict`, `inspect`.
//! - [`plot`]: the learning-curve SVG of `eval --plot`.
//! - [`pool`]: the pool of instances as their reports say (`--pool-topic`).
//! - [`metrics`]: the Prometheus endpoint, `/healthz` and `/readyz`.
//! - [`serving`]: below every endpoint: the published copies of the model
//!   and their feed, the lessons endpoints take, the listener and accept loop.
//! - [`http`]: predictions on request, `POST /v1/classify` (`--http-addr`).
//! - [`mail`]: the mail servers' protocols, spamd (`--spamd-addr`) and
//!   rspamd (`--rspamd-addr`, `--rspamd-controller-addr`).
//! - [`console`]: the web console (`--console-addr`): status, history,
//!   review, scan and teach, model.
//! - [`shutdown`]: SIGTERM/SIGINT handling.
//! - [`clock`]: the wall clock in the pipeline's unit.
//! - [`demo`]: `classifyd demo-produce`, a labeled stream with late feedback.

// Items visible outside the crate are the library's API (the binary, the
// tests, benches and fuzz targets use it): a `pub` that no one outside can
// reach says so as `pub(crate)`.
#![warn(unreachable_pub)]

pub mod allocator;
pub mod checkpoint;
pub(crate) mod clock;
pub mod commands;
pub mod config;
pub mod console;
pub(crate) mod daemon;
#[cfg(feature = "kafka")]
pub(crate) mod demo;
pub mod email;
pub(crate) mod eval;
pub mod features;
pub(crate) mod http;
pub(crate) mod hugepages;
pub mod mail;
pub(crate) mod mailbox;
pub mod message;
pub mod metrics;
pub mod model;
pub mod pipeline;
pub(crate) mod plot;
pub(crate) mod pool;
pub mod replica;
pub mod serving;
pub(crate) mod shutdown;
pub(crate) mod transport;
