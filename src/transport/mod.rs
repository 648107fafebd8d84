//! Transports: they read records and deliver outcomes, and nothing else.
//! [`jsonl`] reads JSON lines from a file or stdin ([`lines`]) and writes
//! them ([`sinks`]); [`kafka`] reads and writes Kafka topics. Each
//! implements [`crate::daemon::Transport`]: it opens its input and its
//! sink from its own settings, then drives the daemon's core (one
//! [`crate::daemon::core::Record`] at a time, the time-based work, the
//! finish), which the daemon assembled once for both. The one read-ahead
//! (`ahead`: batches of lines read and prepared on other threads, handed
//! back in order) serves `eval`, JSON lines and Kafka; `bounded` reads a
//! stream with a size cap.
//!
//! A transport may use the daemon's core, the pipeline's preparation,
//! the checkpoint's positions and the metrics; it knows no endpoint.

pub(crate) mod ahead;
pub(crate) mod bounded;
pub(crate) mod jsonl;
#[cfg(feature = "kafka")]
pub(crate) mod kafka;
pub(crate) mod lines;
pub(crate) mod sinks;
