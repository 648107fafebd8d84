//! The serving part, below every endpoint (HTTP, the mail protocols, and
//! any later one): what answering and teaching need, and nothing of a
//! protocol.
//!
//! - [`copies`]: two copies of the daemon's model that requests are
//!   answered from, read left-right, behind the [`Classify`] handle;
//! - [`feed`]: the daemon loop's end of them: publications of the model to
//!   the copies, and the requests' messages handed back for their late
//!   labels;
//! - [`told`]: the lessons endpoints take, on their way to the loop;
//! - [`endpoint`]: what every endpoint is to the daemon: one `serve` over
//!   one [`Handles`];
//! - [`board`]: what a screen shows: the status the loop posts, its
//!   series, the last predictions made;
//! - [`listener`]: a listener on a thread of its own, the accept loop with
//!   its bound on connections;
//! - [`bounds`]: what one client may hold of a door (connections per
//!   address, the time to send a request);
//! - [`access`]: who may teach (address blocks, secrets compared in
//!   constant time, repeated failures slowed).
//!
//! An endpoint parses its protocol and calls this part; no endpoint
//! imports another (docs/layout.md).

use std::sync::{Mutex, MutexGuard};

use crate::message::Bad;
use crate::pipeline::{Prediction, Raw};

pub(crate) mod access;
pub(crate) mod board;
pub(crate) mod bounds;
mod copies;
pub(crate) mod endpoint;
mod feed;
mod listener;
mod told;

pub use access::Cidr;
pub(crate) use access::same_secret;
pub use bounds::Bounds;
pub(crate) use copies::Hooks;
pub(crate) use endpoint::Endpoint;
pub(crate) use endpoint::{Handles, Serving};
pub(crate) use feed::Feed;
pub(crate) use listener::{Door, Listener, accept_loop};
pub(crate) use told::{Tell, TellDone, Teller, Told, Untold, Waker, told_queue};

/// Why an endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("invalid {0} {1:?}: {2}")]
    Addr(&'static str, String, #[source] std::net::AddrParseError),
    #[error("cannot serve {0} on {1}: {2}")]
    Bind(&'static str, String, #[source] std::io::Error),
    #[error("cannot start the runtime of {0}: {1}")]
    Runtime(&'static str, #[source] std::io::Error),
}

/// What an endpoint asks of a daemon: one message predicted with a
/// published copy of the model, as the output topic would carry it.
pub(crate) trait Classify: Send + Sync + 'static {
    /// `asked` (the input's JSON, or a mail protocol's raw e-mail named
    /// for its user) predicted with `explain` features in the answer; kept
    /// for its late label, and shown in the history.
    fn classify(&self, asked: Raw<'_>, explain: Option<usize>) -> Result<Prediction, Bad>;

    /// `asked` predicted as [`Classify::classify`] does for a person who
    /// scans it (a console): kept, but never queued for review.
    fn scan(&self, asked: Raw<'_>, explain: usize) -> Result<Prediction, Bad> {
        self.classify(asked, Some(explain))
    }

    /// `asked` predicted as [`Classify::classify`] does, and nothing kept
    /// of it (a screen explaining a message it shows).
    fn look(&self, asked: Raw<'_>, explain: usize) -> Result<Prediction, Bad> {
        self.classify(asked, Some(explain))
    }

    /// The `n` strongest features of each class, named as the model's
    /// sketch names them: (class, [(feature, weight)]).
    fn strongest(&self, _n: usize) -> Vec<(String, Vec<(String, f32)>)> {
        Vec::new()
    }
}

/// Locks `m`: the serving part's locks guard data a panic cannot leave
/// half-written (a poisoned lock is taken as it is; a panic would already
/// have ended the daemon).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
