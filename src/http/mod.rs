//! Predictions on request: `POST /v1/classify` (`--http-addr`), on every
//! role and transport. The one async part of the daemon: a tokio runtime
//! on a thread of its own serves HTTP/1.1 (hyper), and reaches the model
//! only through a [`Classify`] handle, whose call runs on tokio's blocking
//! pool, never on the daemon's loop thread nor on the runtime's. The
//! handle is two copies of the model, a publication behind the one that
//! learns ([`images`], published by [`feed`]): a request never waits for
//! learning.
//!
//! Bounded everywhere (docs/http.md): connections (`--http-max-connections`;
//! past it a new one is closed at once and counted), requests classified
//! at once (`--http-max-concurrent`; the rest wait for a turn within the
//! timeout), the body (`--http-max-body-bytes`, refused with 413 from its
//! Content-Length or while it streams in), and the whole request, headers
//! to answer (`--http-timeout-ms`, 503 past it). Bad requests are answered
//! 4xx with the reason; nothing a client sends ends the server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, oneshot};

use crate::message::Bad;
use crate::pipeline::{Asked, Prediction};

mod classify;
mod feed;
mod images;

pub(crate) use feed::Feed;
pub(crate) use images::Images;

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
    pub max_connections: usize,
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
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            timeout: Duration::from_millis(DEFAULT_TIMEOUT_MS),
        }
    }
}

/// Why an endpoint (this one, or a mail protocol's) could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("invalid {0} {1:?}: {2}")]
    Addr(&'static str, String, #[source] std::net::AddrParseError),
    #[error("cannot serve {0} on {1}: {2}")]
    Bind(&'static str, String, #[source] std::io::Error),
    #[error("cannot start the runtime of {0}: {1}")]
    Runtime(&'static str, #[source] std::io::Error),
}

/// What the endpoint asks of a daemon: one message (the input's JSON)
/// predicted with a published copy of the model, as the output topic
/// would carry it.
pub trait Classify: Send + Sync + 'static {
    /// `asked` (the input's JSON, or a mail protocol's raw e-mail named
    /// for its user) predicted with `explain` features in the answer.
    fn classify(&self, asked: Asked<'_>, explain: Option<usize>) -> Result<Prediction, Bad>;
}

/// Starts the endpoint when `settings` asks for one, answering from the
/// copies `images` (both transports call this, once the copies serve).
pub(crate) fn serve(
    settings: Option<&HttpSettings>,
    images: Option<Arc<Images>>,
) -> Result<Option<HttpServer>, HttpError> {
    let (Some(settings), Some(images)) = (settings, images) else {
        return Ok(None);
    };
    HttpServer::start(settings.clone(), images).map(Some)
}

/// What every connection's requests share.
struct Ctx {
    handle: Arc<dyn Classify>,
    settings: HttpSettings,
    /// Turns at the model (`max_concurrent`).
    turns: Arc<Semaphore>,
}

/// The running endpoint; dropping it stops it (connections in flight are
/// cut after at most a second).
pub(crate) struct HttpServer {
    _serving: Serving,
}

impl HttpServer {
    /// Binds `settings.addr` (an error here stops the daemon's start) and
    /// serves on a thread of its own.
    pub(crate) fn start(settings: HttpSettings, handle: Arc<dyn Classify>) -> Result<Self, HttpError> {
        let addr = settings.addr.clone();
        let max_blocking = settings.max_concurrent.max(1);
        let max_connections = settings.max_connections;
        let ctx = Arc::new(Ctx {
            handle,
            turns: Arc::new(Semaphore::new(settings.max_concurrent.max(1))),
            settings,
        });
        let serve = move |listener| {
            accept_loop(
                listener,
                max_connections,
                crate::metrics::http_refused,
                move |stream, _| connection(stream, Arc::clone(&ctx)),
            )
        };
        let (serving, bound) = Serving::start(Endpoint::HTTP, &addr, max_blocking, serve)?;
        tracing::info!(addr = %bound, "serving POST /v1/classify");
        Ok(HttpServer { _serving: serving })
    }
}

/// One HTTP connection: its requests until it closes or goes silent.
async fn connection(stream: TcpStream, ctx: Arc<Ctx>) {
    let _ = stream.set_nodelay(true);
    let service = service_fn(|req| classify::answer(req, Arc::clone(&ctx)));
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(ctx.settings.timeout)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(error) = served {
        tracing::debug!(%error, "HTTP connection ended");
    }
}

/// Which endpoint a [`Serving`] is: its flag and what it serves, for errors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Endpoint {
    pub flag: &'static str,
    pub what: &'static str,
}

impl Endpoint {
    const HTTP: Endpoint = Endpoint {
        flag: "--http-addr",
        what: "/v1/classify",
    };
}

/// A listener served on a thread of its own by a tokio current-thread
/// runtime (`max_blocking` threads for the work a request does off it);
/// dropping it stops the runtime (connections in flight are cut after at
/// most a second).
pub(crate) struct Serving {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Serving {
    /// Binds `addr` (an error here stops the daemon's start) and runs
    /// `serve` over the listener until dropped; returns the address bound.
    pub(crate) fn start<F, Fut>(
        at: Endpoint,
        addr: &str,
        max_blocking: usize,
        serve: F,
    ) -> Result<(Serving, SocketAddr), HttpError>
    where
        F: FnOnce(TcpListener) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let sock: SocketAddr = addr.parse().map_err(|e| HttpError::Addr(at.flag, addr.into(), e))?;
        let bind = |e| HttpError::Bind(at.what, addr.into(), e);
        let listener = std::net::TcpListener::bind(sock).map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let bound = listener.local_addr().map_err(bind)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name(at.what)
            .max_blocking_threads(max_blocking.max(1))
            .build()
            .map_err(|e| HttpError::Runtime(at.what, e))?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(at.what.into())
            .spawn(move || {
                runtime.block_on(async move {
                    let accept = match TcpListener::from_std(listener) {
                        Ok(l) => tokio::spawn(serve(l)),
                        Err(error) => {
                            tracing::error!(%error, endpoint = at.what, "cannot serve");
                            return;
                        }
                    };
                    // The sender dropped is a stop too.
                    let _ = stopped.await;
                    accept.abort();
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(|e| HttpError::Runtime(at.what, e))?;
        Ok((
            Serving {
                stop: Some(stop),
                thread: Some(thread),
            },
            bound,
        ))
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts connections while fewer than `max_connections` are open, each
/// served by `handle` on a task of its own; past the bound a new one is
/// closed at once and counted (`refused`). A failed accept (out of file
/// descriptors, say) pauses, never ends it.
pub(crate) async fn accept_loop<H, Fut>(
    listener: TcpListener,
    max_connections: usize,
    refused: fn(&'static str),
    handle: H,
) where
    H: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let open = Arc::new(Semaphore::new(max_connections.max(1)));
    let mut failing = false;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                if !failing {
                    tracing::warn!(%error, "cannot accept a connection; pausing");
                }
                failing = true;
                refused("accept_error");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        failing = false;
        let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
            refused("too_many_connections");
            drop(stream);
            continue;
        };
        let served = handle(stream, peer);
        tokio::spawn(async move {
            served.await;
            drop(permit);
        });
    }
}

/// Compares a secret with what a client gave (surrounding whitespace
/// dropped), in time that depends on the lengths only.
pub(crate) fn same_secret(want: &[u8], given: &[u8]) -> bool {
    let given = given.trim_ascii();
    want.len() == given.len() && want.iter().zip(given).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn a_secret_matches_only_itself() {
        assert!(same_secret(b"s3cret", b"s3cret"));
        assert!(same_secret(b"s3cret", b" s3cret\r\n"), "header whitespace trimmed");
        assert!(!same_secret(b"s3cret", b"s3cre"));
        assert!(!same_secret(b"s3cret", b"s3creT"));
        assert!(!same_secret(b"s3cret", b""));
    }
}
