//! Who may read and who may teach: address blocks ([`Cidr`]: who may teach
//! without a secret, `--learn-from`), a secret compared in time that does
//! not depend on it ([`same_secret`]), and repeated failures slowed, by
//! address ([`Failures`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::lock;

/// An address block (`127.0.0.0/8`, `::1/128`, or one address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    bits: u8,
}

impl Cidr {
    /// Loopback, v4 and v6: who may `TELL` by default.
    pub fn loopback() -> Vec<Cidr> {
        vec![
            Cidr {
                net: IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 0)),
                bits: 8,
            },
            Cidr {
                net: IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
                bits: 128,
            },
        ]
    }

    pub fn parse(s: &str) -> Result<Cidr, String> {
        let (addr, bits) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let net: IpAddr = addr
            .trim()
            .parse()
            .map_err(|e| format!("{s:?} is not an address or address/bits: {e}"))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&b| b <= max)
                .ok_or_else(|| format!("{s:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(Cidr { net, bits })
    }

    /// Whether `ip` is in the block (a v4 address mapped into v6 counts as v4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(&n.octets(), &a.octets(), self.bits),
            (IpAddr::V6(n), IpAddr::V6(a)) => prefix_eq(&n.octets(), &a.octets(), self.bits),
            _ => false,
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let whole = usize::from(bits / 8);
    let rest = bits % 8;
    if a[..whole] != b[..whole] {
        return false;
    }
    rest == 0 || {
        let mask = 0xffu8 << (8 - rest);
        a[whole] & mask == b[whole] & mask
    }
}

/// Compares a secret with what a client gave (surrounding whitespace
/// dropped), in time that depends on the lengths only.
pub(crate) fn same_secret(want: &[u8], given: &[u8]) -> bool {
    let given = given.trim_ascii();
    want.len() == given.len() && want.iter().zip(given).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// The client's address: `peer`, or when `peer` is a proxy of `trusted`,
/// the nearest address of `forwarded_for` (an `X-Forwarded-For` value,
/// each proxy appending the address it heard from) that is no trusted
/// proxy. A client cannot spoof its way past a trusted proxy: only what
/// the proxies appended is read, right to left; an entry that is no
/// address stops the walk at the hop that wrote it.
pub(crate) fn client_address(peer: IpAddr, forwarded_for: Option<&[u8]>, trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    let Some(list) = forwarded_for.filter(|_| is_trusted(peer)) else {
        return peer;
    };
    let mut client = peer;
    for hop in list.rsplit(|&b| b == b',') {
        let Some(ip) = std::str::from_utf8(hop)
            .ok()
            .and_then(|h| h.trim().parse::<IpAddr>().ok())
        else {
            break;
        };
        client = ip;
        if !is_trusted(ip) {
            break;
        }
    }
    client
}

/// Addresses remembered at most (the oldest failure forgotten past it).
const FAILURES_KEPT: usize = 4096;
/// The wait after each failure, doubling up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(250);
const MAX_WAIT: Duration = Duration::from_secs(8);
/// A failure is forgotten this long after the last one.
const FORGET_AFTER: Duration = Duration::from_secs(600);

/// Failed logins by address: each failure makes the next answer to that
/// address wait longer (doubling, up to [`MAX_WAIT`]); a success clears it.
#[derive(Debug, Default)]
pub(crate) struct Failures {
    by_peer: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

impl Failures {
    /// How long an answer to `peer` waits now.
    pub(crate) fn wait(&self, peer: IpAddr) -> Duration {
        let map = lock(&self.by_peer);
        match map.get(&peer) {
            Some(&(n, at)) if at.elapsed() < FORGET_AFTER && n > 0 => {
                FIRST_WAIT.saturating_mul(1 << (n - 1).min(5)).min(MAX_WAIT)
            }
            _ => Duration::ZERO,
        }
    }

    /// Counts a failure of `peer`'s.
    pub(crate) fn failed(&self, peer: IpAddr) {
        let mut map = lock(&self.by_peer);
        if map.len() >= FAILURES_KEPT && !map.contains_key(&peer) {
            let oldest = map.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| *k);
            if let Some(k) = oldest {
                map.remove(&k);
            }
        }
        let e = map.entry(peer).or_insert((0, Instant::now()));
        *e = (e.0.saturating_add(1), Instant::now());
    }

    /// `peer` gave a right secret.
    pub(crate) fn succeeded(&self, peer: IpAddr) {
        lock(&self.by_peer).remove(&peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_slow_the_next_answer_and_a_success_clears_them() {
        let f = Failures::default();
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(f.wait(peer), Duration::ZERO);
        f.failed(peer);
        assert_eq!(f.wait(peer), FIRST_WAIT);
        for _ in 0..10 {
            f.failed(peer);
        }
        assert_eq!(f.wait(peer), MAX_WAIT);
        assert_eq!(f.wait("10.0.0.2".parse().unwrap()), Duration::ZERO);
        f.succeeded(peer);
        assert_eq!(f.wait(peer), Duration::ZERO);
    }

    #[test]
    fn a_trusted_proxy_names_the_client_and_nobody_else_does() {
        let proxies = [Cidr::parse("10.0.0.0/24").unwrap()];
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let proxy = ip("10.0.0.5");
        assert_eq!(client_address(proxy, Some(b"203.0.113.9"), &proxies), ip("203.0.113.9"));
        // A client's own header, then what the proxies appended: the
        // nearest untrusted hop, never the client's claim.
        let spoofed = b"127.0.0.1, 198.51.100.7, 10.0.0.3";
        assert_eq!(client_address(proxy, Some(spoofed), &proxies), ip("198.51.100.7"));
        assert_eq!(
            client_address(ip("192.0.2.1"), Some(b"127.0.0.1"), &proxies),
            ip("192.0.2.1"),
            "not a proxy"
        );
        assert_eq!(client_address(proxy, None, &proxies), proxy);
        assert_eq!(client_address(proxy, Some(b"junk, 10.0.0.3"), &proxies), ip("10.0.0.3"));
        assert_eq!(
            client_address(proxy, Some(b"203.0.113.9"), &[]),
            proxy,
            "no proxy trusted"
        );
    }

    #[test]
    fn a_secret_matches_only_itself() {
        assert!(same_secret(b"s3cret", b"s3cret"));
        assert!(same_secret(b"s3cret", b" s3cret\r\n"), "header whitespace trimmed");
        assert!(!same_secret(b"s3cret", b"s3cre"));
        assert!(!same_secret(b"s3cret", b"s3creT"));
        assert!(!same_secret(b"s3cret", b""));
    }
}
