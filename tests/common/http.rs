//! A real HTTP client (ureq) for the tests of `POST /v1/classify`.

use std::time::Duration;

use serde_json::Value;

use super::wait_for;

/// A client that hands back 4xx and 5xx answers instead of failing on them.
pub fn client() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// POSTs `body` to `/v1/classify` (with `query`): (status, parsed answer).
pub fn classify(agent: &ureq::Agent, addr: &str, query: &str, body: &str) -> (u16, Value) {
    let mut r = agent
        .post(format!("http://{addr}/v1/classify{query}"))
        .header("content-type", "application/json")
        .send(body)
        .expect("an answer");
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().expect("a body");
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")),
    )
}

/// Waits until the endpoint answers a probe.
pub fn wait_for_endpoint(agent: &ureq::Agent, addr: &str) {
    wait_for("the HTTP endpoint", Duration::from_secs(60), || {
        agent
            .post(format!("http://{addr}/v1/classify"))
            .send(r#"{"text":"probe"}"#)
            .is_ok_and(|r| r.status() == 200)
    });
}

/// A prediction without its "uncertain" mark, which says where the
/// uncertain band stood when it was made (the band moves as predictions
/// are made; docs/http.md).
pub fn settled(mut prediction: Value) -> Value {
    prediction.as_object_mut().map(|o| o.remove("uncertain"));
    prediction
}
