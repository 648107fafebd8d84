//! The spamd endpoint (`--spamd-addr`): one request per connection, as
//! spamd serves spamc. The head is read up to [`spamd::MAX_HEAD_BYTES`],
//! the body to its `Content-length` (at most the largest message; no
//! more is read), all within `--mail-timeout-ms` from the first byte; a
//! check runs on the blocking pool against the served copies of the model,
//! a `TELL` goes to the daemon's loop and waits for what it did. Whatever a
//! client sends is answered with a spamd status or the connection closed,
//! and counted; nothing ends the server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::front::{Asked, Front, Unanswered};
use super::spamd::{self, Class, Command, Refusal, Request, Status};
use super::{MailSettings, REPORT_FEATURES, SpamdSettings};
use crate::serving::{Door, Listener, ServeError, Tell, TellDone, accept_loop};

/// What every connection shares.
struct Shared {
    front: Arc<Front>,
    required: f32,
    max_message_bytes: usize,
    timeout: Duration,
    /// The time a client has to send a request's head, and again its body.
    read_timeout: Duration,
}

/// The running spamd endpoint; dropping it stops it.
pub struct SpamdServer {
    _listener: Listener,
}

impl SpamdServer {
    /// Binds `spamd.addr` and serves on a thread of its own, checking and
    /// learning through `front`.
    pub(super) fn start(spamd: &SpamdSettings, mail: &MailSettings, front: Arc<Front>) -> Result<Self, ServeError> {
        let at = Door {
            flag: "--spamd-addr",
            what: "spamd",
        };
        let bounds = mail.bounds;
        let ctx = Arc::new(Shared {
            front,
            required: spamd.required,
            max_message_bytes: mail.max_message_bytes,
            timeout: mail.timeout,
            read_timeout: mail.bounds.read_timeout,
        });
        let serve = move |listener| {
            accept_loop(listener, bounds, refused_connection, move |stream, peer| {
                connection(stream, peer, Arc::clone(&ctx))
            })
        };
        let (serving, bound) = Listener::start(at, &spamd.addr, mail.max_concurrent, serve)?;
        tracing::info!(addr = %bound, "serving the spamd protocol");
        Ok(SpamdServer { _listener: serving })
    }
}

fn refused_connection(reason: &'static str) {
    crate::metrics::mail_refused("spamd", reason);
}

/// One connection: one request read, answered, and the connection closed.
/// A refused `TELL` is answered by no status line at all: Debian's spamc
/// (4.0.1) reports every spamd status to a `TELL` but EX_OK as "already
/// learned" and exits 0, while a connection closed without an answer
/// makes it exit 74 (EX_IOERR): the one answer it reports as a failure
/// (docs/mail.md). The reason is counted and logged instead.
async fn connection(mut stream: TcpStream, peer: SocketAddr, ctx: Arc<Shared>) {
    let started = Instant::now();
    let timeout = ctx.timeout;
    let mut head = Vec::with_capacity(4096);
    let (command, answer) = match tokio::time::timeout(timeout, request(&mut stream, &mut head, peer, &ctx)).await {
        Ok(Ok((command, answer))) => (Some(command), answer),
        Ok(Err(refusal)) => (None, refuse(&refusal, spamd::is_tell(&head))),
        Err(_) => {
            let late = Refusal::new(Status::Timeout, "timeout", "no whole request within --mail-timeout-ms");
            (None, refuse(&late, spamd::is_tell(&head)))
        }
    };
    if let Some(command) = command {
        crate::metrics::mail_answered("spamd", command_name(command), started.elapsed());
    }
    if !answer.is_empty() {
        let _ = tokio::time::timeout(timeout, stream.write_all(&answer)).await;
    }
    let _ = stream.shutdown().await;
}

/// Counts a refusal and makes its answer: none for a lesson (the
/// connection closes without a status line), spamd's status otherwise.
fn refuse(r: &Refusal, lesson: bool) -> Vec<u8> {
    crate::metrics::mail_refused("spamd", r.reason);
    if lesson {
        // Debug-quoted: a detail may carry a client's bytes (no line breaks in the log).
        tracing::warn!(reason = r.reason, detail = ?r.detail, "a spamd TELL refused: closed without an answer");
        return Vec::new();
    }
    spamd::refusal(r)
}

/// Reads one request and makes its answer (empty: close without one);
/// `buf` keeps what was read of the head (what follows it, the body's
/// start, is taken into the body).
async fn request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    peer: SocketAddr,
    ctx: &Shared,
) -> Result<(Command, Vec<u8>), Refusal> {
    let slow = || Refusal::new(Status::Timeout, "timeout", "no whole request within --read-timeout-ms");
    let head_len = (tokio::time::timeout(ctx.read_timeout, read_head(stream, buf)).await).map_err(|_| slow())??;
    let req = spamd::parse_head(&buf[..head_len])?;
    match req.command {
        Command::Ping => return Ok((req.command, spamd::pong())),
        Command::Skip => return Ok((req.command, Vec::new())),
        _ => {}
    }
    if req.compressed {
        return Err(Refusal::new(
            Status::Protocol,
            "compressed",
            "Compress is not supported: run spamc without -z",
        ));
    }
    let body = read_body(stream, buf, head_len, &req, ctx.max_message_bytes);
    let body = (tokio::time::timeout(ctx.read_timeout, body).await).map_err(|_| slow())??;
    let answer = match req.command {
        Command::Tell => tell(&req, body, peer, ctx).await?,
        command => check(command, &req, body, ctx).await?,
    };
    Ok((req.command, answer))
}

/// Reads until the head's blank line; returns the head's length (what
/// follows it in `buf` is the body's start).
async fn read_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<usize, Refusal> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = spamd::head_end(buf) {
            return Ok(end);
        }
        if buf.len() > spamd::MAX_HEAD_BYTES {
            return Err(Refusal::new(
                Status::Protocol,
                "bad_head",
                format!("a request head over {} bytes", spamd::MAX_HEAD_BYTES),
            ));
        }
        let n = stream.read(&mut chunk).await.map_err(|e| closed(&e.to_string()))?;
        if n == 0 {
            // A request line alone then the end (`PING` from some clients).
            if !buf.is_empty() && buf.ends_with(b"\n") {
                return Ok(buf.len());
            }
            return Err(closed("the connection ended inside the request head"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn closed(detail: &str) -> Refusal {
    Refusal::new(Status::Protocol, "short_request", detail)
}

/// The body, exactly its `Content-length` bytes.
async fn read_body(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    head_len: usize,
    req: &Request,
    max: usize,
) -> Result<Vec<u8>, Refusal> {
    let Some(length) = req.content_length else {
        return Err(Refusal::new(
            Status::Protocol,
            "bad_length",
            "a message needs its Content-length",
        ));
    };
    if length > max {
        return Err(Refusal::new(
            Status::DataErr,
            "too_large",
            format!("a message of {length} bytes, over the largest read ({max}, --max-message-bytes)"),
        ));
    }
    let mut body = buf.split_off(head_len);
    body.truncate(length);
    body.reserve_exact(length - body.len());
    let mut chunk = [0u8; 16 << 10];
    while body.len() < length {
        let want = (length - body.len()).min(chunk.len());
        let n = stream
            .read(&mut chunk[..want])
            .await
            .map_err(|e| closed(&e.to_string()))?;
        if n == 0 {
            return Err(closed(&format!(
                "the connection ended after {} of the {length} bytes its Content-length said",
                body.len()
            )));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(body)
}

/// A checking command, answered from the served copies of the model.
async fn check(command: Command, req: &Request, body: Vec<u8>, ctx: &Shared) -> Result<Vec<u8>, Refusal> {
    let explain = match command {
        Command::Report | Command::ReportIfSpam => REPORT_FEATURES,
        _ => 0,
    };
    let asked = Asked {
        raw: body,
        user: req.user.clone(),
        explain,
    };
    match ctx.front.check(asked, ctx.required).await {
        Ok((checked, raw)) => Ok(spamd::checked(command, &checked, &raw)),
        Err(u) => Err(unanswered(u)),
    }
}

/// A `TELL`: from an allowed address, handed to the loop, answered with
/// what the loop did.
async fn tell(req: &Request, body: Vec<u8>, peer: SocketAddr, ctx: &Shared) -> Result<Vec<u8>, Refusal> {
    // spamd's protocol carries no secret: the address decides.
    if !ctx.front.allowed(peer.ip()) {
        return Err(Refusal::new(
            Status::NoPerm,
            "unauthenticated",
            format!("TELL is not allowed from {} (--learn-from)", peer.ip()),
        ));
    }

    let lesson = match (&req.set, &req.remove, req.class) {
        (Some(_), _, Some(Class::Spam)) => Tell::Learn(ctx.front.spam_label.clone()),
        (Some(_), _, Some(Class::Ham)) => Tell::Learn(ctx.front.ham_label.clone()),
        (Some(_), _, None) => return Err(usage("Set: needs a Message-class: spam or ham")),
        (None, Some(_), _) => Tell::Forget,
        (None, None, _) => return Err(usage("TELL needs Set: or Remove:")),
    };
    match ctx.front.tell(body, lesson, req.user.clone()).await {
        // One model for every database: a label learned (or replaced) is
        // set where asked and removed from where asked (spamc -C revoke).
        Ok(TellDone::Changed) => Ok(spamd::told(req.set.as_deref(), req.remove.as_deref())),
        // Already so: spamc -L says "already un/learned" when nothing is
        // said done; a report or revoke (spamc -C, which sets or removes
        // "remote" too) is told done, since the message is where it was
        // asked to be (spamc would say "Unable to report/revoke" and the
        // client retry for ever).
        Ok(TellDone::Unchanged | TellDone::NotLabeled)
            if req.set.iter().chain(&req.remove).any(|d| d.contains("remote")) =>
        {
            Ok(spamd::told(req.set.as_deref(), req.remove.as_deref()))
        }
        Ok(TellDone::Unchanged | TellDone::NotLabeled) => Ok(spamd::told(None, None)),
        // A mail lesson carries its message: never joined by id alone.
        Ok(TellDone::Unmatched) => Err(Refusal::new(Status::DataErr, "bad_message", "no such message")),
        Ok(TellDone::Bad(detail)) => Err(Refusal::new(Status::DataErr, "bad_message", detail)),
        Ok(TellDone::NotLearner) => Err(unanswered(Unanswered::NotLearner)),
        Ok(TellDone::NotDurable(detail)) => Err(Refusal::new(Status::TempFail, "not_durable", detail)),
        Ok(TellDone::UnknownLabel(detail)) => Err(Refusal::new(Status::DataErr, "unknown_label", detail)),
        Err(u) => Err(unanswered(u)),
    }
}

fn unanswered(u: Unanswered) -> Refusal {
    match u {
        Unanswered::Bad(bad) => Refusal::new(
            Status::DataErr,
            bad.reason.as_str(),
            format!("{}: {}", bad.reason.as_str(), bad.detail),
        ),
        Unanswered::Busy => Refusal::new(Status::TempFail, "overloaded", "too many requests waiting: try again"),
        Unanswered::NotLearner => Refusal::new(
            Status::Unavailable,
            "not_learning",
            "this process does not learn (a predictor): teach the learner",
        ),
    }
}

fn usage(detail: &str) -> Refusal {
    Refusal::new(Status::Usage, "bad_tell", detail)
}

fn command_name(c: Command) -> &'static str {
    match c {
        Command::Check => "check",
        Command::Symbols => "symbols",
        Command::Report => "report",
        Command::ReportIfSpam => "report_ifspam",
        Command::Process => "process",
        Command::Headers => "headers",
        Command::Ping => "ping",
        Command::Skip => "skip",
        Command::Tell => "tell",
    }
}
