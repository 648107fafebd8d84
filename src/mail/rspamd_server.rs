//! rspamd's endpoints: the normal worker (`--rspamd-addr`: `POST /checkv2`,
//! `/ping`) and the controller (`--rspamd-controller-addr`: `POST
//! /learnspam`, `/learnham`, classifyd's `/forget`, and `/ping`), on
//! HTTP/1.x as rspamc and rspamd's proxy speak it. The body is the raw
//! message, read up to the largest message; learning needs the secret in
//! `Password` or an address `--learn-from` allows; every request is
//! answered within the timeout, its refusals counted.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;

use super::front::{Asked, Front, Unanswered};
use super::rspamd::{self, Actions, RspamdSettings};
use super::{MailSettings, REPORT_FEATURES};
use crate::serving::bounds::{BodyError, declared_length};
use crate::serving::{Door, Listener, ServeError, Tell, TellDone, accept_loop};

type Answer = Response<Full<Bytes>>;

/// Which of rspamd's workers an endpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Worker {
    Normal,
    Controller,
}

/// What every connection shares.
struct Shared {
    front: Arc<Front>,
    worker: Worker,
    actions: Actions,
    max_message_bytes: usize,
    timeout: Duration,
    /// The time a client has to send a request's head, and again its body.
    read_timeout: Duration,
}

/// The running rspamd endpoints; dropping it stops them.
pub struct RspamdServer {
    _listeners: Vec<Listener>,
}

impl RspamdServer {
    /// Binds the workers `r` asks for, each on a thread of its own.
    pub(super) fn start(r: &RspamdSettings, mail: &MailSettings, front: Arc<Front>) -> Result<Self, ServeError> {
        let mut serving = Vec::new();
        let workers = [
            (Worker::Normal, &r.addr, "--rspamd-addr", "rspamd"),
            (
                Worker::Controller,
                &r.controller_addr,
                "--rspamd-controller-addr",
                "rspamd-controller",
            ),
        ];
        for (worker, addr, flag, what) in workers {
            let Some(addr) = addr else { continue };
            let ctx = Arc::new(Shared {
                front: Arc::clone(&front),
                worker,
                actions: r.actions,
                max_message_bytes: mail.max_message_bytes,
                timeout: mail.timeout,
                read_timeout: mail.bounds.read_timeout,
            });
            let bounds = mail.bounds;
            let serve = move |listener| {
                accept_loop(listener, bounds, refused_connection, move |stream, peer| {
                    connection(stream, peer, Arc::clone(&ctx))
                })
            };
            let (s, bound) = Listener::start(Door { flag, what }, addr, mail.max_concurrent, serve)?;
            tracing::info!(addr = %bound, worker = what, "serving rspamd's protocol");
            serving.push(s);
        }
        Ok(RspamdServer { _listeners: serving })
    }
}

fn refused_connection(reason: &'static str) {
    crate::metrics::mail_refused("rspamd", reason);
}

async fn connection(stream: TcpStream, peer: SocketAddr, ctx: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let service = service_fn(|req| answer(req, peer, Arc::clone(&ctx)));
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(ctx.read_timeout)
        // A client that closes its side once its request is sent still
        // gets the answer.
        .half_close(true)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(error) = served {
        tracing::debug!(%error, "rspamd connection ended");
    }
}

async fn answer(req: Request<Incoming>, peer: SocketAddr, ctx: Arc<Shared>) -> Result<Answer, Infallible> {
    let started = Instant::now();
    let answer = match tokio::time::timeout(ctx.timeout, route(req, peer, &ctx)).await {
        Ok(Ok((command, answer))) => {
            crate::metrics::mail_answered("rspamd", command, started.elapsed());
            answer
        }
        Ok(Err(r)) => {
            crate::metrics::mail_refused("rspamd", r.reason);
            error(r.status, &r.detail)
        }
        Err(_) => {
            crate::metrics::mail_refused("rspamd", "timeout");
            error(StatusCode::SERVICE_UNAVAILABLE, "no answer within the timeout")
        }
    };
    Ok(answer)
}

/// A request refused: the reason it is counted under, its status, why.
struct Refused {
    reason: &'static str,
    status: StatusCode,
    detail: String,
}

fn refused(reason: &'static str, status: StatusCode, detail: impl Into<String>) -> Refused {
    Refused {
        reason,
        status,
        detail: detail.into(),
    }
}

/// An answer (and the command it is counted under), or a refusal.
type Routed = Result<(&'static str, Answer), Refused>;

async fn route(req: Request<Incoming>, peer: SocketAddr, ctx: &Shared) -> Routed {
    let path = req.uri().path().to_string();
    if path == "/ping" {
        return Ok(("ping", plain("pong\r\n")));
    }
    let (method, headers) = (req.method().clone(), req.headers().clone());
    // Read before any refusal (bounded), so that the answer is not lost to
    // a reset of a connection closed with its request unread.
    let body = read_body(req, ctx.max_message_bytes, ctx.read_timeout).await?;
    let lesson = match (ctx.worker, path.as_str()) {
        (Worker::Normal, "/checkv2") => None,
        (Worker::Controller, "/learnspam") => Some(Tell::Learn(ctx.front.spam_label.clone())),
        (Worker::Controller, "/learnham") => Some(Tell::Learn(ctx.front.ham_label.clone())),
        (Worker::Controller, "/forget") => Some(Tell::Forget),
        _ => {
            let detail = format!("no such path {path:?} on this worker");
            return Err(refused("not_found", StatusCode::NOT_FOUND, detail));
        }
    };
    // rspamd's proxy hands a local upstream the message in shared memory:
    // a GET with its segment's name.
    let body = match headers.get("shm") {
        Some(name) => from_shm(name.as_bytes(), &headers, ctx.max_message_bytes)?,
        None if method != Method::POST => {
            return Err(refused(
                "bad_method",
                StatusCode::METHOD_NOT_ALLOWED,
                "POST the message",
            ));
        }
        None => body,
    };
    if lesson.is_some()
        && !ctx
            .front
            .may_learn(peer.ip(), headers.get("password").map(HeaderValue::as_bytes))
    {
        let detail = if ctx.front.has_password() {
            "learning needs the right Password (--learn-password)".to_string()
        } else {
            format!("learning is not allowed from {} (--learn-from)", peer.ip())
        };
        return Err(refused("unauthenticated", StatusCode::FORBIDDEN, detail));
    }
    let user = envelope_user(&headers).map_err(|d| refused("bad_user", StatusCode::BAD_REQUEST, d))?;
    match lesson {
        None => check(body, user, ctx).await,
        Some(lesson) => learn(body, lesson, user, ctx).await,
    }
}

/// The message's user, from its envelope headers.
fn envelope_user(h: &HeaderMap) -> Result<Option<String>, String> {
    let get = |name: &str| h.get(name).and_then(|v| v.to_str().ok());
    rspamd::user_of(get("deliver-to"), get("user"), get("rcpt"))
}

async fn read_body(req: Request<Incoming>, max: usize, within: Duration) -> Result<Vec<u8>, Refused> {
    let declared = declared_length(req.headers());
    match crate::serving::bounds::read_body(req.into_body(), declared, max, within).await {
        Ok(b) => Ok(b.to_vec()),
        Err(BodyError::TooLarge(_)) => Err(too_large(max)),
        Err(BodyError::Slow) => Err(refused(
            "timeout",
            StatusCode::REQUEST_TIMEOUT,
            "no whole body within --read-timeout-ms",
        )),
        Err(BodyError::Broken(detail)) => Err(refused("bad_body", StatusCode::BAD_REQUEST, detail)),
    }
}

/// The message rspamd's proxy put in the shared memory segment `name`
/// (`/rhm.` and hex, as rspamd names them; nothing else is opened), at
/// `Shm-Offset` for `Shm-Length` bytes.
fn from_shm(name: &[u8], h: &HeaderMap, max: usize) -> Result<Vec<u8>, Refused> {
    let bad = |d: &str| refused("bad_shm", StatusCode::BAD_REQUEST, d);
    let name = std::str::from_utf8(name).map_err(|_| bad("Shm is not a name"))?;
    let hex = name
        .strip_prefix("/rhm.")
        .filter(|h| !h.is_empty() && h.len() <= 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| bad("Shm names no segment of rspamd's (/rhm.<hex>)"))?;
    let number = |header: &str| -> Result<Option<u64>, Refused> {
        match h.get(header) {
            None => Ok(None),
            Some(v) => v
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .map(Some)
                .ok_or_else(|| bad(&format!("{header} is not a number"))),
        }
    };
    let offset = number("shm-offset")?.unwrap_or(0);
    let length = number("shm-length")?;
    if length.is_some_and(|l| l > max as u64) {
        return Err(too_large(max));
    }
    use std::io::{Read, Seek, SeekFrom};
    let path = std::path::Path::new("/dev/shm").join(format!("rhm.{hex}"));
    let mut f = std::fs::File::open(&path).map_err(|e| bad(&format!("cannot open {}: {e}", path.display())))?;
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| bad(&format!("Shm-Offset {offset}: {e}")))?;
    let mut raw = Vec::new();
    let want = length.unwrap_or(max as u64 + 1);
    f.take(want)
        .read_to_end(&mut raw)
        .map_err(|e| bad(&format!("cannot read {}: {e}", path.display())))?;
    if raw.len() > max {
        return Err(too_large(max));
    }
    Ok(raw)
}

async fn check(raw: Vec<u8>, user: Option<String>, ctx: &Shared) -> Routed {
    let asked = Asked {
        raw,
        user,
        explain: REPORT_FEATURES,
    };
    match ctx.front.check(asked, ctx.actions.add_header).await {
        Ok((checked, _)) => Ok((
            "checkv2",
            json(StatusCode::OK, rspamd::checked_json(&checked, &ctx.actions)),
        )),
        Err(u) => Err(unanswered(u)),
    }
}

async fn learn(raw: Vec<u8>, lesson: Tell, user: Option<String>, ctx: &Shared) -> Routed {
    let command = match &lesson {
        Tell::Forget | Tell::ForgetReporter(_) => "forget",
        Tell::Learn(l) if *l == ctx.front.spam_label => "learnspam",
        Tell::Learn(_) => "learnham",
    };
    match ctx.front.tell(raw, lesson, user).await {
        Ok(TellDone::Changed) => Ok((command, json(StatusCode::OK, rspamd::success_json()))),
        // rspamd's answer to a message learned already.
        Ok(TellDone::Unchanged | TellDone::NotLabeled) => Ok((
            command,
            error(
                StatusCode::ALREADY_REPORTED,
                "already learned so (or nothing to forget): no update",
            ),
        )),
        Ok(TellDone::Bad(detail)) => Err(refused("bad_message", StatusCode::BAD_REQUEST, detail)),
        // A mail lesson carries its message: never joined by id alone.
        Ok(TellDone::Unmatched) => Err(refused("bad_message", StatusCode::BAD_REQUEST, "no such message")),
        Ok(TellDone::NotLearner) => Err(unanswered(Unanswered::NotLearner)),
        Ok(TellDone::NotDurable(detail)) => Err(refused("not_durable", StatusCode::SERVICE_UNAVAILABLE, detail)),
        Ok(TellDone::UnknownLabel(detail)) => Err(refused("unknown_label", StatusCode::BAD_REQUEST, detail)),
        Err(u) => Err(unanswered(u)),
    }
}

fn unanswered(u: Unanswered) -> Refused {
    match u {
        Unanswered::Bad(bad) => refused(
            bad.reason.as_str(),
            StatusCode::BAD_REQUEST,
            format!("{}: {}", bad.reason.as_str(), bad.detail),
        ),
        Unanswered::Busy => refused(
            "overloaded",
            StatusCode::SERVICE_UNAVAILABLE,
            "too many requests waiting: try again",
        ),
        Unanswered::NotLearner => refused(
            "not_learning",
            StatusCode::SERVICE_UNAVAILABLE,
            "this process does not learn (a predictor): teach the learner",
        ),
    }
}

fn too_large(max: usize) -> Refused {
    let detail = format!("a message over the largest read ({max} bytes, --max-message-bytes)");
    refused("too_large", StatusCode::PAYLOAD_TOO_LARGE, detail)
}

fn error(status: StatusCode, detail: &str) -> Answer {
    json(status, rspamd::error_json(detail))
}

fn json(status: StatusCode, body: Vec<u8>) -> Answer {
    let mut a = Response::new(Full::new(Bytes::from(body)));
    *a.status_mut() = status;
    a.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    a
}

fn plain(body: &'static str) -> Answer {
    let mut a = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    a.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    a
}
