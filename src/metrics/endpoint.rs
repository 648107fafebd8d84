//! The metrics and health endpoint (`--metrics-addr`): `GET /metrics`
//! (the Prometheus exposition, with the `process_*` metrics collected at
//! each scrape), `/healthz` (alive) and `/readyz` (model loaded and, on
//! Kafka, partitions assigned). The same HTTP stack as `POST /v1/classify`
//! (hyper, HTTP/1.1), on a single-threaded tokio runtime on a thread of
//! its own: a scrape renders a few hundred series, which takes well under
//! a millisecond, so one thread answers every client in turn.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;

use super::MetricsError;

/// What the endpoint answers from.
pub(super) struct Pages {
    pub(super) handle: PrometheusHandle,
    pub(super) ready: Arc<AtomicBool>,
    pub(super) process: metrics_process::Collector,
}

impl Pages {
    /// The answer to a request for `path`.
    fn answer(&self, path: &str) -> Response<Full<Bytes>> {
        match path {
            "/metrics" => {
                self.process.collect();
                self.handle.run_upkeep();
                text(StatusCode::OK, self.handle.render(), "text/plain; version=0.0.4")
            }
            "/healthz" => text(StatusCode::OK, "ok\n".into(), "text/plain"),
            "/readyz" if self.ready.load(Ordering::SeqCst) => text(StatusCode::OK, "ready\n".into(), "text/plain"),
            "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n".into(), "text/plain"),
            _ => text(StatusCode::NOT_FOUND, "not found\n".into(), "text/plain"),
        }
    }
}

fn text(code: StatusCode, body: String, kind: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = code;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    r
}

/// A bound listener and the runtime that will serve it: made on the
/// caller's thread, so that an address in use or a runtime that cannot
/// start is an error of `install`, not of a thread.
pub(super) struct Server {
    listener: std::net::TcpListener,
    runtime: tokio::runtime::Runtime,
}

impl Server {
    pub(super) fn bind(addr: std::net::SocketAddr, shown: &str) -> Result<Self, MetricsError> {
        let bind = |e: std::io::Error| MetricsError::Bind(shown.into(), e.to_string());
        let listener = std::net::TcpListener::bind(addr).map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(bind)?;
        Ok(Server { listener, runtime })
    }

    /// The address it listens on (the port the OS chose for port 0).
    pub(super) fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Answers requests for as long as the process lives.
    pub(super) fn serve(self, pages: Pages) {
        let Server { listener, runtime } = self;
        let pages = Arc::new(pages);
        runtime.block_on(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(error) => {
                    tracing::error!(%error, "cannot serve metrics");
                    return;
                }
            };
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        // Out of file descriptors, say: wait, then go on.
                        tracing::warn!(%error, "metrics endpoint: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let pages = Arc::clone(&pages);
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let answer = pages.answer(req.uri().path());
                        async move { Ok::<_, Infallible>(answer) }
                    });
                    // A client that hangs up mid-answer is its own affair.
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_path_gets_its_answer() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let pages = Pages {
            handle: recorder.handle(),
            ready: Arc::new(AtomicBool::new(false)),
            process: metrics_process::Collector::default(),
        };
        let code = |path: &str| pages.answer(path).status();
        assert_eq!(code("/healthz"), StatusCode::OK);
        assert_eq!(code("/readyz"), StatusCode::SERVICE_UNAVAILABLE);
        pages.ready.store(true, Ordering::SeqCst);
        assert_eq!(code("/readyz"), StatusCode::OK);
        assert_eq!(code("/nothing"), StatusCode::NOT_FOUND);
        let metrics = pages.answer("/metrics");
        assert_eq!(metrics.status(), StatusCode::OK);
        assert_eq!(metrics.headers()[CONTENT_TYPE], "text/plain; version=0.0.4");
    }
}
