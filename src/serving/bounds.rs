//! What one client may hold of a door (every endpoint: spamd, rspamd,
//! HTTP, the console): connections open at once from one address, and how
//! long it may take to send a request's head and its body. A slow client
//! (one byte a second, or silent) is cut at the read deadline and can hold
//! no more than its address's share of the connections, so it cannot
//! starve the others (docs/mail.md, "Bounds and bad input").

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Limited};
use hyper::body::{Bytes, Incoming};

/// Default `--max-connections-per-address`.
pub(crate) const DEFAULT_PER_ADDRESS: usize = 64;
/// Default `--read-timeout-ms`: from a connection's first byte to its
/// request's last (head and body).
pub(crate) const DEFAULT_READ_TIMEOUT_MS: u64 = 2_000;

/// A door's bounds on its clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Connections open at once (past it a new one is closed).
    pub connections: usize,
    /// Connections open at once from one address.
    pub per_address: usize,
    /// The time a client has to send a whole request, head and body.
    pub read_timeout: Duration,
}

impl Bounds {
    /// `connections` at once, and the defaults for one address.
    pub fn of(connections: usize) -> Self {
        Bounds {
            connections,
            per_address: DEFAULT_PER_ADDRESS,
            read_timeout: Duration::from_millis(DEFAULT_READ_TIMEOUT_MS),
        }
    }
}

/// Connections open per address; a [`Held`] place is given back when
/// dropped.
#[derive(Clone, Default)]
pub(crate) struct PerAddress {
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One address's place, held while its connection is open.
pub(crate) struct Held {
    of: PerAddress,
    addr: IpAddr,
}

impl PerAddress {
    /// A place for a connection from `addr`, unless it holds `most`.
    pub(crate) fn take(&self, addr: IpAddr, most: usize) -> Option<Held> {
        let mut open = super::lock(&self.open);
        let n = open.entry(addr).or_insert(0);
        if *n >= most.max(1) {
            return None;
        }
        *n += 1;
        Some(Held { of: self.clone(), addr })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = super::lock(&self.of.open);
        if let Some(n) = open.get_mut(&self.addr) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.addr);
            }
        }
    }
}

/// Why a request's body was not read.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Over `max` (the length it declared, or more than `max` sent).
    TooLarge(u64),
    /// Not whole within the read deadline.
    Slow,
    /// The connection broke, or the body was malformed.
    Broken(String),
}

/// The whole body of a request that declared `declared` bytes (its
/// `Content-Length`), at most `max`, within `within`.
pub(crate) async fn read_body(
    body: Incoming,
    declared: Option<u64>,
    max: usize,
    within: Duration,
) -> Result<Bytes, BodyError> {
    if let Some(length) = declared.filter(|&l| l > max as u64) {
        return Err(BodyError::TooLarge(length));
    }
    match tokio::time::timeout(within, Limited::new(body, max).collect()).await {
        Err(_) => Err(BodyError::Slow),
        Ok(Ok(b)) => Ok(b.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge(max as u64 + 1)),
        Ok(Err(e)) => Err(BodyError::Broken(format!("cannot read the body: {e}"))),
    }
}

/// The `Content-Length` a request declares.
pub(crate) fn declared_length(headers: &hyper::HeaderMap) -> Option<u64> {
    headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An address holds at most its share; a place comes back when its
    /// connection ends; other addresses are not counted against it.
    #[test]
    fn an_address_holds_at_most_its_share() {
        let per = PerAddress::default();
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.2".parse().unwrap(), "127.0.0.1".parse().unwrap());
        let held: Vec<Held> = (0..3).map(|_| per.take(a, 3).expect("a place")).collect();
        assert!(per.take(a, 3).is_none(), "a fourth from the same address");
        let other = per.take(b, 3).expect("another address has its own share");
        drop(held.into_iter().next());
        assert!(per.take(a, 3).is_some(), "a place given back");
        drop(other);
        assert!(
            !super::super::lock(&per.open).contains_key(&b),
            "no entry kept for an address gone"
        );
    }
}
