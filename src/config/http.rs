//! The flags of predictions on request (`--http-addr` and its bounds).

use std::time::Duration;

use clap::Args;

use super::{at_least_one, at_least_one_usize};
use crate::http::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_CONNECTIONS, DEFAULT_TIMEOUT_MS, HttpSettings,
};
use crate::serving::Bounds;

#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// Predictions on request: POST /v1/classify with an input message (or
    /// a JSON array of them), answered with the prediction JSON, e.g.
    /// 127.0.0.1:8080. Off by default.
    #[arg(long, env = "CLASSIFYD_HTTP_ADDR")]
    pub http_addr: Option<String>,
    /// Largest request body (a message, or a batch of them).
    #[arg(long, env = "CLASSIFYD_HTTP_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES,
          value_parser = at_least_one_usize(), hide = true)]
    pub http_max_body_bytes: usize,
    /// Connections open at once; past it a new one is closed unserved.
    #[arg(long, env = "CLASSIFYD_HTTP_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS,
          value_parser = at_least_one_usize(), hide = true)]
    pub http_max_connections: usize,
    /// Requests classified at once; the others wait their turn.
    #[arg(long, env = "CLASSIFYD_HTTP_MAX_CONCURRENT", default_value_t = DEFAULT_MAX_CONCURRENT,
          value_parser = at_least_one_usize(), hide = true)]
    pub http_max_concurrent: usize,
    /// Milliseconds from a request's first byte to its answer (503 past it).
    #[arg(long, env = "CLASSIFYD_HTTP_TIMEOUT_MS", default_value_t = DEFAULT_TIMEOUT_MS,
          value_parser = at_least_one(), hide = true)]
    pub http_timeout_ms: u64,
}

impl HttpArgs {
    /// The endpoint's settings, if it is on; `password` (`--learn-password`)
    /// is asked of every request.
    pub fn settings(&self, password: Option<&str>, door: Bounds) -> Option<HttpSettings> {
        let addr = self.http_addr.as_ref()?;
        Some(HttpSettings {
            addr: addr.clone(),
            password: password.map(str::to_string),
            max_body_bytes: self.http_max_body_bytes,
            bounds: Bounds {
                connections: self.http_max_connections,
                ..door
            },
            max_concurrent: self.http_max_concurrent,
            timeout: Duration::from_millis(self.http_timeout_ms),
        })
    }
}
