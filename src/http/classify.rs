//! One request to the endpoint: the route, the body read within its
//! bounds, one message or a batch (a JSON array) classified on the
//! blocking pool, and the answer: the output topic's prediction JSON (an
//! array of them for a batch), or `{"reason": ..., "error": ...}` with a
//! 4xx or 5xx status. The reasons are the dead-letter reasons, plus
//! `timeout`, `overloaded`, `not_found` and `method_not_allowed`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use http_body_util::Full;
use hyper::body::{Body as _, Bytes, Incoming};
use hyper::header::{ALLOW, AUTHORIZATION, CONNECTION, CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::value::RawValue;

use super::Shared;
use crate::message::{Bad, BadReason};
use crate::pipeline::{Prediction, Raw};
use crate::serving::bounds::{BodyError, declared_length, read_body};

/// The path of predictions on request.
pub(super) const CLASSIFY_PATH: &str = "/v1/classify";
/// Features explained when a request asks `?explain` without a number.
const DEFAULT_EXPLAIN: usize = 10;

type Answer = Response<Full<Bytes>>;

/// Answers one request; every outcome is a response (the connection
/// stays up for the next one unless the body was left unread).
pub(super) async fn answer(req: Request<Incoming>, ctx: Arc<Shared>) -> Result<Answer, Infallible> {
    let started = Instant::now();
    let answer = match tokio::time::timeout(ctx.settings.timeout, route(req, &ctx)).await {
        Ok(answer) => answer,
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            "no answer within --http-timeout-ms",
        ),
    };
    crate::metrics::http_answered(answer.status().as_u16(), started.elapsed());
    Ok(answer)
}

async fn route(req: Request<Incoming>, ctx: &Shared) -> Answer {
    let has_body = !req.body().is_end_stream();
    let (body, explain) = match read_request(req, ctx).await {
        Ok(read) => read,
        Err(mut refused) => {
            // Its body left unread, the connection ends with this answer:
            // said, so that a client sends its next request on another.
            if has_body {
                refused
                    .headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            return refused;
        }
    };
    let Ok(turn) = Arc::clone(&ctx.turns).acquire_owned().await else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "the endpoint is stopping",
        );
    };
    let handle = Arc::clone(&ctx.handle);
    let done = tokio::task::spawn_blocking(move || {
        let answer = classify_body(&body, &*handle, explain);
        drop(turn);
        answer
    });
    match done.await {
        Ok(answer) => answer,
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the prediction failed"),
    }
}

/// The request's body and `?explain`, or the answer that refuses it
/// (before its body is read whole).
async fn read_request(req: Request<Incoming>, ctx: &Shared) -> Result<(Bytes, Option<usize>), Answer> {
    if req.uri().path() != CLASSIFY_PATH {
        let detail = format!("no such path: predictions are asked for with POST {CLASSIFY_PATH}");
        return Err(error(StatusCode::NOT_FOUND, "not_found", &detail));
    }
    if let Some(want) = &ctx.settings.password {
        let given = req
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        if !given.is_some_and(|g| crate::serving::same_secret(want.as_bytes(), g)) {
            let mut a = error(
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                "this endpoint asks for Authorization: Bearer <--learn-password>",
            );
            a.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return Err(a);
        }
    }
    if req.method() != Method::POST {
        let mut a = error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "POST the message (or a JSON array of messages)",
        );
        a.headers_mut().insert(ALLOW, HeaderValue::from_static("POST"));
        return Err(a);
    }
    let explain = match explain_of(req.uri().query()) {
        Ok(e) => e,
        Err(detail) => return Err(error(StatusCode::BAD_REQUEST, "bad_query", &detail)),
    };
    let max = ctx.settings.max_body_bytes;
    let declared = declared_length(req.headers());
    let within = ctx.settings.bounds.read_timeout;
    let body = match read_body(req.into_body(), declared, max, within).await {
        Ok(b) => b,
        Err(BodyError::TooLarge(length)) => return Err(too_large(length, max)),
        Err(BodyError::Slow) => {
            let detail = "no whole body within --read-timeout-ms";
            return Err(error(StatusCode::REQUEST_TIMEOUT, "timeout", detail));
        }
        Err(BodyError::Broken(detail)) => return Err(error(StatusCode::BAD_REQUEST, "bad_body", &detail)),
    };
    Ok((body, explain))
}

/// `?explain` (the default count), `?explain=N`, `explain=true|false`.
fn explain_of(query: Option<&str>) -> Result<Option<usize>, String> {
    let Some(query) = query else {
        return Ok(None);
    };
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key != "explain" {
            continue;
        }
        return match value {
            "" | "true" => Ok(Some(DEFAULT_EXPLAIN)),
            "false" => Ok(Some(0)),
            n => n
                .parse::<usize>()
                .map(|n| Some(n.min(100)))
                .map_err(|_| format!("explain={n:?}: expected a number of features, true or false")),
        };
    }
    Ok(None)
}

/// One message (a JSON object) or a batch (a JSON array of them).
fn classify_body(body: &[u8], handle: &dyn super::Classify, explain: Option<usize>) -> Answer {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'[') {
        return match handle.classify(Raw::json(body), explain) {
            Ok(p) => json(StatusCode::OK, prediction_json(&p)),
            Err(bad) => refused(&bad),
        };
    }
    let messages: Vec<&RawValue> = match serde_json::from_slice(body) {
        Ok(m) => m,
        Err(e) => return error(StatusCode::BAD_REQUEST, BadReason::BadJson.as_str(), &e.to_string()),
    };
    let mut out = Vec::with_capacity(body.len() / 4 + 2);
    out.push(b'[');
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match handle.classify(Raw::json(m.get().as_bytes()), explain) {
            Ok(p) => p.write_json(&mut out),
            Err(bad) => out.extend_from_slice(&bad_json(&bad)),
        }
    }
    out.push(b']');
    json(StatusCode::OK, out)
}

fn prediction_json(p: &Prediction) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    p.write_json(&mut out);
    out
}

fn bad_json(bad: &Bad) -> Vec<u8> {
    serde_json::json!({"reason": bad.reason.as_str(), "error": bad.detail})
        .to_string()
        .into_bytes()
}

/// A message refused: 413 when too large, else 400.
fn refused(bad: &Bad) -> Answer {
    let status = match bad.reason {
        BadReason::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        _ => StatusCode::BAD_REQUEST,
    };
    json(status, bad_json(bad))
}

fn too_large(length: u64, max: usize) -> Answer {
    let detail = format!("a body of {length} bytes or more, over --http-max-body-bytes {max}");
    error(StatusCode::PAYLOAD_TOO_LARGE, BadReason::TooLarge.as_str(), &detail)
}

fn error(status: StatusCode, reason: &str, detail: &str) -> Answer {
    let body = serde_json::json!({"reason": reason, "error": detail}).to_string();
    json(status, body.into_bytes())
}

fn json(status: StatusCode, body: Vec<u8>) -> Answer {
    let mut a = Response::new(Full::new(Bytes::from(body)));
    *a.status_mut() = status;
    a.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    a
}

#[cfg(test)]
mod tests {
    use super::explain_of;

    #[test]
    fn explain_is_read_from_the_query() {
        assert_eq!(explain_of(None), Ok(None));
        assert_eq!(explain_of(Some("a=1")), Ok(None));
        assert_eq!(explain_of(Some("explain")), Ok(Some(10)));
        assert_eq!(explain_of(Some("x=2&explain=3")), Ok(Some(3)));
        assert_eq!(explain_of(Some("explain=false")), Ok(Some(0)));
        assert_eq!(explain_of(Some("explain=1000")), Ok(Some(100)));
        assert!(explain_of(Some("explain=lots")).is_err());
    }
}
