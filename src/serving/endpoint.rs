//! What every endpoint is to the daemon: its settings implement
//! [`Endpoint`], one `serve` over the same [`Handles`] (the copies
//! requests are answered from, where lessons go, the board a screen
//! shows). The daemon starts every endpoint of its list (`commands::run`
//! makes the list, one line an endpoint: docs/layout.md) and stops them
//! by dropping what `serve` returned.

use std::sync::Arc;

use super::board::Board;
use super::{Classify, ServeError, Teller};

/// What an endpoint is served over.
#[derive(Clone)]
pub(crate) struct Handles {
    /// The copies of the model requests are answered from.
    pub copies: Arc<dyn Classify>,
    /// Where the lessons an endpoint takes go (none: this daemon takes
    /// none: a predictor with no way to forward them).
    pub lessons: Option<Teller>,
    /// What a screen shows, when an endpoint asked for one.
    pub board: Option<Arc<Board>>,
}

/// A running endpoint: dropped, it stops.
pub(crate) type Serving = Box<dyn Send>;

/// An endpoint as its settings say: where it serves and how.
pub(crate) trait Endpoint: std::fmt::Debug + Send + Sync {
    /// Whether it takes lessons (the mail protocols, the console): the
    /// daemon then opens their way to the loop.
    fn teaches(&self) -> bool {
        false
    }

    /// The board it shows (the console's), made once by the daemon and
    /// handed to every endpoint and to the loop, which posts to it.
    fn board(&self) -> Option<Board> {
        None
    }

    /// Starts serving over `handles` (binding its addresses: an error
    /// here stops the daemon's start).
    fn serve(&self, handles: &Handles) -> Result<Serving, ServeError>;
}
