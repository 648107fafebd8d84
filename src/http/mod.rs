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
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};

use crate::message::Bad;
use crate::pipeline::Prediction;

mod classify;
mod feed;
mod images;

pub use feed::Feed;
pub use images::Images;

/// Default `--http-max-body-bytes`: a batch of a few hundred messages.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 << 20;
/// Default `--http-max-connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default `--http-max-concurrent`: a copy of the model answers one
/// message at a time, so more only queue on its lock.
pub const DEFAULT_MAX_CONCURRENT: usize = 4;
/// Default `--http-timeout-ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;

/// Where and how bounded the endpoint serves.
#[derive(Clone, Debug)]
pub struct HttpSettings {
    pub addr: String,
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
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            timeout: Duration::from_millis(DEFAULT_TIMEOUT_MS),
        }
    }
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("invalid --http-addr {0:?}: {1}")]
    Addr(String, #[source] std::net::AddrParseError),
    #[error("cannot serve /v1/classify on {0}: {1}")]
    Bind(String, #[source] std::io::Error),
    #[error("cannot start the HTTP endpoint's runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// What the endpoint asks of a daemon: one message (the input's JSON)
/// predicted with a published copy of the model, as the output topic
/// would carry it.
pub trait Classify: Send + Sync + 'static {
    fn classify(&self, raw: &[u8], explain: Option<usize>) -> Result<Prediction, Bad>;
}

/// Starts the endpoint when `settings` asks for one, answering from the
/// copies `images` (both transports call this, once the copies serve).
pub fn serve(settings: Option<&HttpSettings>, images: Option<Arc<Images>>) -> Result<Option<HttpServer>, HttpError> {
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
pub struct HttpServer {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HttpServer {
    /// Binds `settings.addr` (an error here stops the daemon's start) and
    /// serves on a thread of its own.
    pub fn start(settings: HttpSettings, handle: Arc<dyn Classify>) -> Result<Self, HttpError> {
        let sock: SocketAddr = settings
            .addr
            .parse()
            .map_err(|e| HttpError::Addr(settings.addr.clone(), e))?;
        let bind = |e| HttpError::Bind(settings.addr.clone(), e);
        let listener = std::net::TcpListener::bind(sock).map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let addr = listener.local_addr().map_err(bind)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("http")
            .max_blocking_threads(settings.max_concurrent.max(1))
            .build()
            .map_err(HttpError::Runtime)?;
        let (stop, stopped) = oneshot::channel();
        let ctx = Arc::new(Ctx {
            handle,
            turns: Arc::new(Semaphore::new(settings.max_concurrent.max(1))),
            settings,
        });
        let thread = std::thread::Builder::new()
            .name("http".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let accept = match TcpListener::from_std(listener) {
                        Ok(l) => tokio::spawn(accept_loop(l, ctx)),
                        Err(error) => {
                            tracing::error!(%error, "cannot serve /v1/classify");
                            return;
                        }
                    };
                    // The sender dropped is a stop too.
                    let _ = stopped.await;
                    accept.abort();
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(HttpError::Runtime)?;
        tracing::info!(%addr, "serving POST /v1/classify");
        Ok(HttpServer {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts connections while fewer than `max_connections` are open; a
/// failed accept (out of file descriptors, say) pauses, never ends it.
async fn accept_loop(listener: TcpListener, ctx: Arc<Ctx>) {
    let open = Arc::new(Semaphore::new(ctx.settings.max_connections.max(1)));
    let mut failing = false;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                if !failing {
                    tracing::warn!(%error, "cannot accept a connection; pausing");
                }
                failing = true;
                crate::metrics::http_refused("accept_error");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        failing = false;
        let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
            crate::metrics::http_refused("too_many_connections");
            drop(stream);
            continue;
        };
        let ctx = Arc::clone(&ctx);
        tokio::spawn(async move {
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
            drop(permit);
        });
    }
}
