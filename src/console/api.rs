//! The console's requests: its assets, and a JSON API under `api/` that
//! reads the board and the copies and hands lessons to the loop. Every
//! answer carries the console's security headers; an API answer is never
//! cached. Queries with parameters are POSTed as JSON (no URL decoding to
//! get wrong).
//!
//! | request | access | answer |
//! |---|---|---|
//! | `GET api/access` | read | what this login may do, its reviewer, the classes |
//! | `GET api/status`, `GET api/series` | read | the status the loop posted; its series |
//! | `POST api/history` `{label, user, min, max, q, uncertain, limit, before}` | read | predictions, newest first, and whether older ones match |
//! | `POST api/export` (the history's filters) | read | every matching entry, as a JSON-lines file |
//! | `GET api/dead` | read | the last dead letters (reason, detail) and how many in all |
//! | `GET api/pool` | read | every instance of the pool as it last reported (null: no `--pool-topic`) |
//! | `POST api/review` `{limit}` | read | the uncertain predictions no one taught, oldest first, how many, the classes |
//! | `POST api/scan` `{text` or `email, user}` | read | the prediction, explained (kept in the history) |
//! | `POST api/look` `{id}` | read | a history entry predicted again, explained (nothing kept) |
//! | `GET api/model` | read | each class's strongest features |
//! | `POST api/teach` `{id, label` or `forget, text` or `email, user}` | write | what the loop did (the reporter is the login's) |
//! | `GET api/reporters` | read | every reporter lately heard from: trust, labels, those in the record, the latest |
//! | `POST api/forget_reporter` `{reporter}` | the operator's | every label of that reporter's the record holds, taken back |

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::users::{ANONYMOUS, Role};
use super::{Shared, TIMEOUT, assets};
use crate::pipeline::Raw;
use crate::serving::access::client_address;
use crate::serving::board::Seen;
use crate::serving::bounds::{BodyError, declared_length, read_body};
use crate::serving::{Tell, TellDone, Told, same_secret};

type Answer = Response<Full<Bytes>>;

/// Features a scan or a look explains.
const EXPLAIN: usize = 10;
/// Most history entries one answer carries.
const MAX_LIMIT: usize = 1000;
/// Features a class shows on the model page.
const MODEL_FEATURES: usize = 25;

/// The page may load its own script and style, talk to its own origin,
/// and nothing else: no inline script, no frames, no plugins.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; \
                   form-action 'self'";

/// What a request may do, and who asks.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Access {
    read: bool,
    write: bool,
    /// The named reviewer who logged in (`--console-users`).
    name: Option<String>,
}

impl Access {
    /// The reporter of this login's lessons: its reviewer, else "console"
    /// (a single secret, or an address --learn-from allows).
    fn reporter(&self) -> String {
        self.name.clone().unwrap_or_else(|| ANONYMOUS.into())
    }

    fn role(&self) -> &'static str {
        if self.write { "teach" } else { "read" }
    }

    /// Whether this login is the operator's (the learning secret, or an
    /// address --learn-from allows): who may forget a reporter.
    fn operator(&self) -> bool {
        self.write && self.name.is_none()
    }
}

/// The API's calls, as the metrics name them.
const CALLS: [&str; 14] = [
    "access",
    "status",
    "series",
    "history",
    "review",
    "scan",
    "look",
    "model",
    "teach",
    "reporters",
    "forget_reporter",
    "dead",
    "export",
    "pool",
];

/// What a request to `path` calls: an API call, "asset", or "other".
fn call_of(path: &str) -> &'static str {
    if assets::get(path).is_some() {
        return "asset";
    }
    let call = path.strip_prefix("/api/").unwrap_or("");
    CALLS.iter().find(|&&c| c == call).copied().unwrap_or("other")
}

/// Answers one request (every outcome is a response).
pub(super) async fn answer(req: Request<Incoming>, peer: IpAddr, ctx: Arc<Shared>) -> Result<Answer, Infallible> {
    let call = call_of(req.uri().path());
    let mut answer = match tokio::time::timeout(TIMEOUT, route(req, peer, &ctx)).await {
        Ok(a) => a,
        Err(_) => error(StatusCode::SERVICE_UNAVAILABLE, "no answer in time"),
    };
    crate::metrics::console_answered(call, answer.status().as_u16());
    let headers = answer.headers_mut();
    for (name, value) in [
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("x-frame-options", "DENY"),
    ] {
        headers.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
    }
    Ok(answer)
}

async fn route(req: Request<Incoming>, peer: IpAddr, ctx: &Shared) -> Answer {
    let path = req.uri().path().to_string();
    if let Some(asset) = assets::get(&path) {
        return match *req.method() {
            Method::GET | Method::HEAD => asset,
            _ => error(StatusCode::METHOD_NOT_ALLOWED, "assets are read with GET"),
        };
    }
    let Some(call) = path.strip_prefix("/api/") else {
        return error(StatusCode::NOT_FOUND, "no such page");
    };
    let forwarded = req.headers().get("x-forwarded-for").map(HeaderValue::as_bytes);
    let peer = client_address(peer, forwarded, &ctx.settings.trusted_proxy);
    let access = match access(&req, peer, ctx).await {
        Ok(a) => a,
        Err(refused) => return refused,
    };
    let method = req.method().clone();
    let body = match (method == Method::POST).then(|| body_of(req, ctx)) {
        Some(read) => match read.await {
            Ok(b) => b,
            Err(refused) => return refused,
        },
        None => Bytes::new(),
    };
    match method {
        Method::GET => get(call, &access, ctx).await,
        Method::POST => post(call, &body, &access, ctx).await,
        _ => error(StatusCode::NOT_FOUND, "no such call"),
    }
}

/// A read of the API (`GET api/<call>`).
async fn get(call: &str, access: &Access, ctx: &Shared) -> Answer {
    match call {
        "access" => json_ok(json!({
            "read": access.read,
            "write": access.write,
            "name": access.name,
            "role": access.role(),
            "reporter": access.reporter(),
            "teaches": ctx.told.is_some(),
            "operator": access.operator(),
            "keep_text": ctx.settings.keep_text,
            "classes": ctx.board.status().classes,
        })),
        "status" => status(ctx),
        "series" => json_ok(json!({ "points": ctx.board.series() })),
        "model" => {
            blocking(ctx, |handle| {
                json_ok(json!({ "classes": handle.strongest(MODEL_FEATURES) }))
            })
            .await
        }
        "dead" => json_ok(json!({
            "dead": ctx.board.dead_letters(),
            "total": ctx.board.status().bad,
            "kept": crate::serving::board::DEAD_KEPT,
        })),
        "reporters" => json_ok(json!({ "reporters": ctx.board.status().reporters })),
        "pool" => json_ok(json!({ "pool": ctx.board.pool(), "at_ms": crate::clock::now_ms() })),
        _ => error(StatusCode::NOT_FOUND, "no such call"),
    }
}

/// A query or a lesson (`POST api/<call>` with `body`).
async fn post(call: &str, body: &[u8], access: &Access, ctx: &Shared) -> Answer {
    match call {
        "history" => parsed(body, |q: HistoryQuery| history(ctx, &q)),
        "export" => parsed(body, |q: HistoryQuery| export(ctx, &q)),
        "review" => parsed(body, |q: ReviewQuery| review(ctx, &q)),
        "scan" => match serde_json::from_slice::<Message>(body) {
            Ok(m) => blocking(ctx, move |handle| scan(&*handle, &m)).await,
            Err(e) => error(StatusCode::BAD_REQUEST, &format!("not a message: {e}")),
        },
        "look" => match serde_json::from_slice::<Message>(body) {
            Ok(m) => look(ctx, m).await,
            Err(e) => error(StatusCode::BAD_REQUEST, &format!("not a message: {e}")),
        },
        "forget_reporter" if !access.operator() => error(
            StatusCode::FORBIDDEN,
            "forgetting a reporter asks for the operator's learning secret (--learn-password), not a reviewer's",
        ),
        "forget_reporter" => match serde_json::from_slice::<ForgetReporter>(body) {
            Ok(f) => forget_reporter(ctx, f.reporter, access.reporter()).await,
            Err(e) => error(StatusCode::BAD_REQUEST, &format!("not a reporter to forget: {e}")),
        },
        "teach" if !access.write => error(
            StatusCode::FORBIDDEN,
            "this login may read, not teach: teaching asks for the learning secret (--learn-password)",
        ),
        "teach" => match serde_json::from_slice::<Teach>(body) {
            Ok(t) => teach(ctx, t, access.reporter()).await,
            Err(e) => error(StatusCode::BAD_REQUEST, &format!("not a lesson: {e}")),
        },
        _ => error(StatusCode::NOT_FOUND, "no such call"),
    }
}

/// What `req` from `peer` may do, or the refusal (a wrong secret is
/// counted against the address, whose next answers wait longer).
async fn access(req: &Request<Incoming>, peer: IpAddr, ctx: &Shared) -> Result<Access, Answer> {
    let wait = ctx.failures.wait(peer);
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
    let given = (req.headers().get(AUTHORIZATION)).and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    let matches =
        |secret: &Option<String>| matches!((secret, given), (Some(s), Some(g)) if same_secret(s.as_bytes(), g));
    let s = &ctx.settings;
    let named = given.and_then(|g| s.users.find(g));
    if let Some(r) = named {
        ctx.failures.succeeded(peer);
        let write = r.role == Role::Teach;
        let name = Some(r.name.clone());
        return Ok(Access {
            read: true,
            write,
            name,
        });
    }
    let write = match &s.write_password {
        Some(_) => matches(&s.write_password),
        None => s.learn_from.iter().any(|c| c.contains(peer)),
    };
    let read = write
        || match &s.read_password {
            Some(_) => matches(&s.read_password),
            None => peer.is_loopback(),
        };
    let wrong = given.is_some() && !matches(&s.write_password) && !matches(&s.read_password);
    if wrong {
        ctx.failures.failed(peer);
    } else if given.is_some() {
        ctx.failures.succeeded(peer);
    }
    if !read || wrong {
        let mut a = error(
            StatusCode::UNAUTHORIZED,
            "the console asks for Authorization: Bearer <--console-password or --learn-password>",
        );
        a.headers_mut()
            .insert(hyper::header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return Err(a);
    }
    Ok(Access {
        read,
        write,
        name: None,
    })
}

/// The body of a POST, bounded.
async fn body_of(req: Request<Incoming>, ctx: &Shared) -> Result<Bytes, Answer> {
    let max = ctx
        .settings
        .max_message_bytes
        .saturating_mul(2)
        .max(super::MAX_BODY_BYTES);
    let declared = declared_length(req.headers());
    let within = ctx.settings.bounds.read_timeout;
    match read_body(req.into_body(), declared, max, within).await {
        Ok(b) => Ok(b),
        Err(BodyError::TooLarge(_)) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the body is over {max} bytes"),
        )),
        Err(BodyError::Slow) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            "no whole body within --read-timeout-ms",
        )),
        Err(BodyError::Broken(detail)) => Err(error(StatusCode::BAD_REQUEST, &detail)),
    }
}

fn status(ctx: &Shared) -> Answer {
    let status = ctx.board.status();
    let left = ctx.board.oldest(0, in_queue).1;
    let mut v = serde_json::to_value(&*status).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.insert("history".into(), json!(ctx.board.len()));
        o.insert("review_left".into(), json!(left));
    }
    json_ok(v)
}

/// Filters of the history.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct HistoryQuery {
    label: Option<String>,
    user: Option<String>,
    min: Option<f32>,
    max: Option<f32>,
    /// Words the text or the id must hold (all of them, any case).
    q: Option<String>,
    uncertain: Option<bool>,
    limit: Option<usize>,
    /// Only entries older than this place in the history (the page after
    /// one whose oldest entry had it).
    before: Option<u64>,
}

fn history(ctx: &Shared, q: &HistoryQuery) -> Answer {
    let limit = q.limit.unwrap_or(200).min(MAX_LIMIT);
    let entries = ctx.board.history(limit, filter(q));
    let more = entries.last().is_some_and(|last| {
        let older = HistoryQuery {
            before: Some(last.seq),
            ..q.clone()
        };
        !ctx.board.history(1, filter(&older)).is_empty()
    });
    json_ok(json!({ "entries": entries, "more": more }))
}

/// Every entry the filters keep, newest first, as JSON lines (a file to
/// save): at most the history's bound.
fn export(ctx: &Shared, q: &HistoryQuery) -> Answer {
    let mut out = Vec::new();
    for e in ctx.board.history(usize::MAX, filter(q)) {
        // A struct of strings and numbers always serializes.
        let _ = serde_json::to_writer(&mut out, &e);
        out.push(b'\n');
    }
    let mut r = Response::new(Full::new(Bytes::from(out)));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        hyper::header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"classifyd-history.jsonl\""),
    );
    r
}

/// What the history's filters `q` keep.
fn filter(q: &HistoryQuery) -> impl Fn(&Seen) -> bool + '_ {
    let words: Vec<String> = (q.q.iter())
        .flat_map(|q| q.split_whitespace())
        .map(str::to_lowercase)
        .collect();
    move |e: &Seen| {
        q.before.is_none_or(|b| e.seq < b)
            && q.label.as_ref().is_none_or(|l| l.is_empty() || *l == e.label)
            && q.user
                .as_ref()
                .is_none_or(|u| u.is_empty() || Some(u) == e.user.as_ref())
            && q.min.is_none_or(|m| e.margin >= m)
            && q.max.is_none_or(|m| e.margin <= m)
            && q.uncertain.is_none_or(|u| u == e.uncertain)
            && (words.is_empty() || {
                let (text, id) = (e.text.to_lowercase(), e.id.to_lowercase());
                words
                    .iter()
                    .all(|w| text.contains(w.as_str()) || id.contains(w.as_str()))
            })
    }
}

/// An entry waits for review: uncertain, nobody taught it yet, and no
/// person scanned it (they judged it already).
fn in_queue(e: &Seen) -> bool {
    e.uncertain && e.taught.is_none() && e.source != "scan"
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ReviewQuery {
    limit: Option<usize>,
}

fn review(ctx: &Shared, q: &ReviewQuery) -> Answer {
    let (waiting, left) = ctx.board.oldest(q.limit.unwrap_or(20).min(MAX_LIMIT), in_queue);
    json_ok(json!({ "left": left, "items": waiting, "classes": ctx.board.status().classes }))
}

/// A message to scan (or a history entry to look at again: its `id`).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Message {
    id: Option<String>,
    text: Option<String>,
    /// A raw e-mail (an .eml file's bytes, as text).
    email: Option<String>,
    user: Option<String>,
}

impl Message {
    /// Its id: the one given, else `console-` and a hash of its content
    /// (so that scanning it again, and teaching it, name the same message).
    fn id(&self) -> String {
        if let Some(id) = &self.id {
            return id.clone();
        }
        match (&self.email, &self.text) {
            // As spamd and rspamd name it: one message, one lesson.
            (Some(email), _) => crate::email::message_key(email.as_bytes()),
            (None, text) => {
                let text = text.as_deref().unwrap_or("");
                format!("console-{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
            }
        }
    }

    /// It predicted (and kept, with `keep`) by `handle`.
    fn predict(&self, handle: &dyn crate::serving::Classify, keep: bool) -> Answer {
        let id = self.id();
        let user = self.user.as_deref().filter(|u| !u.is_empty());
        let line;
        let raw = match (&self.email, &self.text) {
            (Some(email), _) => Raw::email(email.as_bytes(), &id, user),
            (None, Some(text)) => {
                let mut m = json!({"id": id, "text": text});
                if let Some(u) = user {
                    m["user"] = json!(u);
                }
                line = m.to_string();
                Raw::json(line.as_bytes())
            }
            (None, None) => return error(StatusCode::BAD_REQUEST, "a message has \"text\" or \"email\""),
        };
        let predicted = if keep {
            handle.scan(raw, EXPLAIN)
        } else {
            handle.look(raw, EXPLAIN)
        };
        match predicted {
            Ok(p) => {
                let mut out = Vec::new();
                p.write_json(&mut out);
                let v: Value = serde_json::from_slice(&out).unwrap_or(Value::Null);
                json_ok(v)
            }
            Err(bad) => error(
                StatusCode::BAD_REQUEST,
                &format!("{}: {}", bad.reason.as_str(), bad.detail),
            ),
        }
    }
}

fn scan(handle: &dyn crate::serving::Classify, m: &Message) -> Answer {
    m.predict(handle, true)
}

/// A history entry predicted again with the model as it stands, explained.
async fn look(ctx: &Shared, m: Message) -> Answer {
    let Some(id) = m.id.clone() else {
        return error(StatusCode::BAD_REQUEST, "look at a history entry by its \"id\"");
    };
    let Some(entry) = ctx.board.entry(&id) else {
        return error(StatusCode::NOT_FOUND, "no such message in the history");
    };
    let again = Message {
        id: Some(id),
        text: Some(entry.text),
        email: None,
        user: entry.user,
    };
    blocking(ctx, move |handle| again.predict(&*handle, false)).await
}

/// A lesson: a label for the message (with its text or e-mail, else the
/// message the record knows by its id), or a forget.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Teach {
    id: String,
    label: Option<String>,
    forget: bool,
    text: Option<String>,
    email: Option<String>,
    user: Option<String>,
}

/// Applies lesson `t` from `reporter` (the login's: never the body's).
async fn teach(ctx: &Shared, t: Teach, reporter: String) -> Answer {
    let lesson = match (&t.label, t.forget) {
        (Some(l), false) if !l.is_empty() => Tell::Learn(l.clone()),
        (None, true) => Tell::Forget,
        _ => return error(StatusCode::BAD_REQUEST, "a lesson has a \"label\" or \"forget\": true"),
    };
    if t.id.is_empty() {
        return error(StatusCode::BAD_REQUEST, "a lesson names its message's \"id\"");
    }
    // A forget takes the label back: the message waits for review again.
    let taught = t.label.clone().filter(|_| !t.forget);
    let told = |reply| Told {
        id: t.id.clone(),
        email: t.email.map(String::into_bytes).unwrap_or_default(),
        text: t.text.filter(|_| !t.forget),
        lesson,
        user: t.user.filter(|u| !u.is_empty()),
        reporter: Some(reporter.clone()),
        reply,
    };
    match tell(ctx, told).await {
        Ok(done @ (TellDone::Changed | TellDone::Unchanged)) => {
            ctx.board.taught(&t.id, taught, &reporter);
            json_ok(json!({"changed": done == TellDone::Changed, "by": reporter}))
        }
        Ok(TellDone::NotLabeled) => {
            ctx.board.taught(&t.id, None, &reporter);
            json_ok(json!({"changed": false, "labeled": false}))
        }
        Ok(TellDone::Unmatched) => error(
            StatusCode::NOT_FOUND,
            &format!(
                "the record does not hold message {:?} (never seen here, or past its window): teach it with its text or e-mail",
                t.id
            ),
        ),
        Ok(_) => error(StatusCode::CONFLICT, "this process neither learns nor forwards lessons"),
        Err(refused) => refused,
    }
}

/// Hands the lesson `told` makes (with the reply it is given) to the
/// loop and waits for what it did; a refusal is answered here (the
/// client is told: never "already learned" for a lesson not learned).
async fn tell(ctx: &Shared, told: impl FnOnce(Reply) -> Told) -> Result<TellDone, Answer> {
    let gone = || error(StatusCode::CONFLICT, "this process neither learns nor forwards lessons");
    let Some(to) = &ctx.told else {
        return Err(gone());
    };
    let (reply, answered) = tokio::sync::oneshot::channel();
    if to.try_send(told(reply)).is_err() {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many lessons waiting; try again",
        ));
    }
    match answered.await {
        Ok(TellDone::Bad(detail) | TellDone::UnknownLabel(detail)) => Err(error(StatusCode::BAD_REQUEST, &detail)),
        Ok(TellDone::NotDurable(detail)) => Err(error(StatusCode::SERVICE_UNAVAILABLE, &detail)),
        Ok(TellDone::NotLearner) | Err(_) => Err(gone()),
        Ok(done) => Ok(done),
    }
}

/// Where the loop answers a lesson.
type Reply = tokio::sync::oneshot::Sender<TellDone>;

/// A reporter to forget: every label of its the record holds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForgetReporter {
    reporter: String,
}

/// Forgets every label of `of`'s the record holds, asked by `by` (a
/// lesson like any other: durable before it is answered).
async fn forget_reporter(ctx: &Shared, of: String, by: String) -> Answer {
    if of.is_empty() {
        return error(StatusCode::BAD_REQUEST, "name the \"reporter\" to forget");
    }
    let told = |reply| Told {
        id: String::new(),
        email: Vec::new(),
        text: None,
        lesson: Tell::ForgetReporter(of),
        user: None,
        reporter: Some(by),
        reply,
    };
    match tell(ctx, told).await {
        Ok(TellDone::Changed) => json_ok(json!({"changed": true})),
        Ok(_) => json_ok(json!({"changed": false})),
        Err(refused) => refused,
    }
}

/// `f` on the blocking pool, with the copies.
async fn blocking(
    ctx: &Shared,
    f: impl FnOnce(Arc<dyn crate::serving::Classify>) -> Answer + Send + 'static,
) -> Answer {
    let handle = Arc::clone(&ctx.handle);
    match tokio::task::spawn_blocking(move || f(handle)).await {
        Ok(a) => a,
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the request failed"),
    }
}

/// `f` of the body parsed as `Q` (an empty body: the defaults).
fn parsed<Q: for<'de> Deserialize<'de> + Default>(body: &[u8], f: impl FnOnce(Q) -> Answer) -> Answer {
    if body.iter().all(u8::is_ascii_whitespace) {
        return f(Q::default());
    }
    match serde_json::from_slice(body) {
        Ok(q) => f(q),
        Err(e) => error(StatusCode::BAD_REQUEST, &format!("not a query: {e}")),
    }
}

fn json_ok(v: Value) -> Answer {
    json_answer(StatusCode::OK, &v)
}

fn error(code: StatusCode, detail: &str) -> Answer {
    json_answer(code, &json!({ "error": detail }))
}

fn json_answer(code: StatusCode, v: &Value) -> Answer {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())));
    *r.status_mut() = code;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(seq: u64, source: &'static str, uncertain: bool) -> Seen {
        Seen {
            seq,
            at_ms: 0,
            id: format!("m{seq}"),
            user: None,
            label: "spam".into(),
            margin: 0.1,
            uncertain,
            source,
            explanation: Vec::new(),
            text: "win a prize".into(),
            taught: None,
            taught_by: None,
            mail: false,
            email: None,
        }
    }

    /// The review queue holds the uncertain predictions nobody taught or
    /// scanned; a page of the history starts below the one before.
    #[test]
    fn scans_stay_out_of_the_queue_and_pages_go_back_in_time() {
        assert!(in_queue(&seen(1, "stream", true)) && in_queue(&seen(1, "request", true)));
        assert!(!in_queue(&seen(1, "scan", true)), "a person scanned it: judged already");
        assert!(!in_queue(&seen(1, "stream", false)));
        let mut taught = seen(1, "stream", true);
        taught.taught = Some("ham".into());
        assert!(!in_queue(&taught));
        let q = HistoryQuery {
            before: Some(5),
            q: Some("PRIZE".into()),
            ..HistoryQuery::default()
        };
        let keep = filter(&q);
        assert!(keep(&seen(4, "stream", false)) && !keep(&seen(5, "stream", false)));
    }
}
