//! The wall clock, in the one unit the pipeline's event times use. Owns
//! nothing else; every module may use it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch: the event time of messages that carry none (JSON lines), and the time metrics report.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
