//! The listening half of every endpoint: a listener served by a tokio
//! runtime on a thread of its own ([`Listener`]), the accept loop with its
//! bound on open connections ([`accept_loop`]). An endpoint brings its protocol
//! (a function from a connection to its answers) and nothing else.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, oneshot};

use super::ServeError;
use super::bounds::{Bounds, PerAddress};

/// The door a [`Listener`] opens: the endpoint's flag and what it serves, for errors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Door {
    pub flag: &'static str,
    pub what: &'static str,
}

/// A listener served on a thread of its own by a tokio current-thread
/// runtime (`max_blocking` threads for the work a request does off it);
/// dropping it stops the runtime (connections in flight are cut after at
/// most a second).
pub(crate) struct Listener {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Listener {
    /// Binds `addr` (an error here stops the daemon's start) and runs
    /// `serve` over the listener until dropped; returns the address bound.
    pub(crate) fn start<F, Fut>(
        at: Door,
        addr: &str,
        max_blocking: usize,
        serve: F,
    ) -> Result<(Listener, SocketAddr), ServeError>
    where
        F: FnOnce(TcpListener) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let sock: SocketAddr = addr.parse().map_err(|e| ServeError::Addr(at.flag, addr.into(), e))?;
        let bind = |e| ServeError::Bind(at.what, addr.into(), e);
        let listener = std::net::TcpListener::bind(sock).map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let bound = listener.local_addr().map_err(bind)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name(at.what)
            .max_blocking_threads(max_blocking.max(1))
            .build()
            .map_err(|e| ServeError::Runtime(at.what, e))?;
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
            .map_err(|e| ServeError::Runtime(at.what, e))?;
        Ok((
            Listener {
                stop: Some(stop),
                thread: Some(thread),
            },
            bound,
        ))
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts connections while fewer than `bounds.connections` are open,
/// and fewer than `bounds.per_address` from the same address, each served
/// by `handle` on a task of its own; past either bound a new one is
/// closed at once and counted (`refused`: `too_many_connections`,
/// `too_many_from_address`). A failed accept (out of file descriptors,
/// say) pauses, never ends it.
pub(crate) async fn accept_loop<H, Fut>(listener: TcpListener, bounds: Bounds, refused: fn(&'static str), handle: H)
where
    H: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let open = Arc::new(Semaphore::new(bounds.connections.max(1)));
    let per_address = PerAddress::default();
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
        let Some(held) = per_address.take(peer.ip(), bounds.per_address) else {
            refused("too_many_from_address");
            drop(stream);
            continue;
        };
        let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
            refused("too_many_connections");
            drop(stream);
            continue;
        };
        let served = handle(stream, peer);
        tokio::spawn(async move {
            served.await;
            drop((permit, held));
        });
    }
}
