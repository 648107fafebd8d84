//! The web console (`--console-addr`, docs/console.md): the daemon's own
//! page for reviewers and mail admins, on every role and transport. Pages
//! (status, history, review, scan and teach, model) are static assets
//! compiled into the binary ([`assets`]), which read and teach through a
//! small JSON API ([`api`]) over the serving part: the copies answer
//! scans, the board holds the status and the history, lessons go the way
//! every endpoint's go (durable before they are answered; a predictor
//! forwards them).
//!
//! Access: reading asks for the read secret (`--console-password`) or,
//! without one, a loopback peer; teaching asks for the learning secret
//! (`--learn-password`) or, without one, an address of `--learn-from`; a
//! named reviewer's secret (`--console-users`, [`users`]) reads or teaches
//! as its role says, and its lessons carry its name. Behind a proxy of
//! `--trusted-proxy`, the client's address is X-Forwarded-For's.
//! Secrets come as `Authorization: Bearer` (never a cookie a cross-site
//! page could ride), and each failure slows the next answer to that
//! address. Message content is hostile: the page shows every field as text
//! under a strict Content-Security-Policy (no inline script).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;

use crate::serving::access::Failures;
use crate::serving::board::Board;
use crate::serving::{
    Bounds, Cidr, Classify, Door, Endpoint, Handles, Listener, ServeError, Serving, Teller, accept_loop,
};

mod api;
mod assets;
pub mod users;

pub use users::Reviewers;

/// Default `--console-history`: the predictions the history keeps.
pub const DEFAULT_HISTORY: usize = 10_000;
/// Connections open at once; past it a new one is closed.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// The largest body a scan or a lesson may send (a message).
pub const MAX_BODY_BYTES: usize = 4 << 20;
/// From a request's first byte to its answer.
const TIMEOUT: Duration = Duration::from_secs(10);

const DOOR: Door = Door {
    flag: "--console-addr",
    what: "the console",
};

/// Where the console serves, who may read and teach, what it keeps.
#[derive(Clone, Debug)]
pub struct ConsoleSettings {
    pub addr: String,
    /// The secret that lets a client read (`--console-password`); without
    /// one, loopback peers read.
    pub read_password: Option<String>,
    /// The secret that lets a client teach (`--learn-password`); without
    /// one, the addresses of `learn_from` teach.
    pub write_password: Option<String>,
    /// Who may teach without a secret (`--learn-from`).
    pub learn_from: Vec<Cidr>,
    /// Predictions the history keeps (`--console-history`).
    pub history: usize,
    /// Whether the history keeps a message's start, or only its subject
    /// or first line (`--console-keep-text`).
    pub keep_text: bool,
    /// The longest message a scan or a lesson may carry.
    pub max_message_bytes: usize,
    /// Connections open at once, per address, and the time to send a
    /// request.
    pub bounds: Bounds,
    /// Named reviewers (`--console-users`), beside the two secrets.
    pub users: Reviewers,
    /// Proxies whose `X-Forwarded-For` names the client
    /// (`--trusted-proxy`).
    pub trusted_proxy: Vec<Cidr>,
}

/// What every request shares.
struct Shared {
    settings: ConsoleSettings,
    handle: Arc<dyn Classify>,
    board: Arc<Board>,
    told: Option<Teller>,
    failures: Failures,
}

/// The running console; dropped, it stops.
struct ConsoleServer {
    _listener: Listener,
}

/// The console `self` asks for, answering from the copies and the board,
/// teaching where the handles say (none: this process neither learns nor
/// forwards).
impl Endpoint for ConsoleSettings {
    fn teaches(&self) -> bool {
        true
    }

    fn board(&self) -> Option<Board> {
        Some(Board::new(self.history, self.keep_text))
    }

    fn serve(&self, handles: &Handles) -> Result<Serving, ServeError> {
        let Some(board) = handles.board.clone() else {
            return Err(ServeError::Runtime(
                DOOR.what,
                std::io::Error::other("the daemon made no board for the console"),
            ));
        };
        let ctx = Arc::new(Shared {
            settings: self.clone(),
            handle: Arc::clone(&handles.copies),
            board,
            told: handles.lessons.clone(),
            failures: Failures::default(),
        });
        let bounds = self.bounds;
        let serve = move |listener| {
            accept_loop(
                listener,
                bounds,
                |_| {},
                move |stream, peer| connection(stream, peer, Arc::clone(&ctx)),
            )
        };
        let (listener, bound) = Listener::start(DOOR, &self.addr, 4, serve)?;
        tracing::info!(addr = %bound, "serving the console");
        Ok(Box::new(ConsoleServer { _listener: listener }))
    }
}

/// One connection: its requests until it closes or goes silent.
async fn connection(stream: TcpStream, peer: SocketAddr, ctx: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let service = service_fn(|req| api::answer(req, peer.ip(), Arc::clone(&ctx)));
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(ctx.settings.bounds.read_timeout)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(error) = served {
        tracing::debug!(%error, "console connection ended");
    }
}
