//! Predictions on request: `POST /v1/classify` (`--http-addr`), on every
//! role and transport. A tokio runtime on a thread of its own serves
//! HTTP/1.1 (hyper) through the serving part's listener, and reaches the
//! model only through a [`Classify`] handle, whose call runs on tokio's
//! blocking pool, never on the daemon's loop thread nor on the runtime's.
//! The handle is the serving part's copies of the model, a publication
//! behind the one that learns: a request never waits for learning.
//!
//! Bounded everywhere (docs/http.md): connections (`--http-max-connections`;
//! past it a new one is closed at once and counted), requests classified
//! at once (`--http-max-concurrent`; the rest wait for a turn within the
//! timeout), the body (`--http-max-body-bytes`, refused with 413 from its
//! Content-Length or while it streams in), and the whole request, headers
//! to answer (`--http-timeout-ms`, 503 past it). Bad requests are answered
//! 4xx with the reason; nothing a client sends ends the server.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::serving::{Bounds, Classify, Door, Endpoint, Handles, Listener, ServeError, Serving, accept_loop};

mod classify;

/// Default `--http-max-body-bytes`: a batch of a few hundred messages.
pub(crate) const DEFAULT_MAX_BODY_BYTES: usize = 8 << 20;
/// Default `--http-max-connections`.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default `--http-max-concurrent`: a copy of the model answers one
/// message at a time, so more only queue on its lock.
pub(crate) const DEFAULT_MAX_CONCURRENT: usize = 4;
/// Default `--http-timeout-ms`.
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 5_000;

/// Where and how bounded the endpoint serves.
#[derive(Clone, Debug)]
pub struct HttpSettings {
    pub addr: String,
    /// Asked of every request as `Authorization: Bearer ...` when set
    /// (`--learn-password`).
    pub password: Option<String>,
    pub max_body_bytes: usize,
    /// Connections open at once, per address, and the time to send a
    /// request.
    pub bounds: Bounds,
    pub max_concurrent: usize,
    pub timeout: Duration,
}

impl HttpSettings {
    /// The defaults, on `addr`.
    pub fn on(addr: &str) -> Self {
        HttpSettings {
            addr: addr.into(),
            password: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            bounds: Bounds::of(DEFAULT_MAX_CONNECTIONS),
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            timeout: Duration::from_millis(DEFAULT_TIMEOUT_MS),
        }
    }
}

/// The endpoint in the serving part's terms: its flag and what it serves.
const DOOR: Door = Door {
    flag: "--http-addr",
    what: "/v1/classify",
};

impl Endpoint for HttpSettings {
    fn serve(&self, handles: &Handles) -> Result<Serving, ServeError> {
        Ok(Box::new(HttpServer::start(self.clone(), Arc::clone(&handles.copies))?))
    }
}

/// What every connection's requests share.
struct Shared {
    handle: Arc<dyn Classify>,
    settings: HttpSettings,
    /// Turns at the model (`max_concurrent`).
    turns: Arc<Semaphore>,
}

/// The running endpoint; dropping it stops it (connections in flight are
/// cut after at most a second).
pub(crate) struct HttpServer {
    _listener: Listener,
}

impl HttpServer {
    /// Binds `settings.addr` (an error here stops the daemon's start) and
    /// serves on a thread of its own.
    pub(crate) fn start(settings: HttpSettings, handle: Arc<dyn Classify>) -> Result<Self, ServeError> {
        let addr = settings.addr.clone();
        let max_blocking = settings.max_concurrent.max(1);
        let bounds = settings.bounds;
        let ctx = Arc::new(Shared {
            handle,
            turns: Arc::new(Semaphore::new(settings.max_concurrent.max(1))),
            settings,
        });
        let serve = move |listener| {
            accept_loop(listener, bounds, crate::metrics::http_refused, move |stream, _| {
                connection(stream, Arc::clone(&ctx))
            })
        };
        let (listener, bound) = Listener::start(DOOR, &addr, max_blocking, serve)?;
        tracing::info!(addr = %bound, "serving POST /v1/classify");
        Ok(HttpServer { _listener: listener })
    }
}

/// One HTTP connection: its requests until it closes or goes silent.
async fn connection(stream: TcpStream, ctx: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let service = service_fn(|req| classify::answer(req, Arc::clone(&ctx)));
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(ctx.settings.bounds.read_timeout)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(error) = served {
        tracing::debug!(%error, "HTTP connection ended");
    }
}
