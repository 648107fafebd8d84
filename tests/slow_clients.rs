//! Slow clients cannot starve the others (issue 70): 500 connections from
//! one address (127.0.0.2) each sending one byte a second, reconnecting
//! when cut, while another client (127.0.0.1) runs 200 ordinary spamc
//! checks one after another. Each address holds at most
//! `--max-connections-per-address` of the endpoint's connections, and a
//! request not sent whole within `--read-timeout-ms` is cut.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::mail::*;

/// A connection to `to` from `from` (a loopback address of its own).
fn connect_from(from: &str, to: SocketAddr) -> Option<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    let from: SocketAddr = format!("{from}:0").parse().ok()?;
    socket.bind(&from.into()).ok()?;
    socket.connect_timeout(&to.into(), Duration::from_secs(1)).ok()?;
    Some(socket.into())
}

/// `n` connections from 127.0.0.2 to `to`, each sent one byte of a spamd
/// request a second (a lost one connected again), until `stop`.
fn slow_clients(to: SocketAddr, n: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let request = b"CHECK SPAMC/1.5\r\nContent-length: 100\r\n\r\n";
        let mut conns: Vec<Option<(TcpStream, usize)>> = (0..n).map(|_| None).collect();
        let mut connected = 0;
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            for c in conns.iter_mut() {
                let alive = match c {
                    Some((s, at)) => {
                        s.write_all(&request[*at % request.len()..][..1]).is_ok() && {
                            *at += 1;
                            true
                        }
                    }
                    None => false,
                };
                if !alive {
                    *c = connect_from("127.0.0.2", to).map(|s| (s, 0));
                    connected += c.is_some() as usize;
                }
            }
            std::thread::sleep(Duration::from_secs(1).saturating_sub(started.elapsed()));
        }
        connected
    })
}

#[test]
fn five_hundred_slow_connections_do_not_starve_spamc() {
    let addr = local_addr();
    let Learned {
        daemon,
        held,
        tmp: _tmp,
    } = learned(Some(200), &["--spamd-addr", &addr]);
    let stop = Arc::new(AtomicBool::new(false));
    let slow = slow_clients(addr.parse().unwrap(), 500, Arc::clone(&stop));
    // Let every slow connection be made and start its drip.
    std::thread::sleep(Duration::from_secs(3));
    let (host, port) = addr.rsplit_once(':').unwrap();
    let mut took = Vec::new();
    let checks = 200;
    for i in 0..checks {
        let message = &held[i % held.len()].1;
        let started = Instant::now();
        let (out, _, code) = client(
            "spamc",
            "spamc",
            &["-d", host, "-p", port, "-t", "5", "-x", "-c"],
            message,
        );
        // -x: no "safe fallback" (spamc -c prints 0/0 when refused).
        if (code == 0 || code == 1) && out.trim_end().ends_with("/5.0") {
            took.push(started.elapsed());
        }
    }
    stop.store(true, Ordering::Relaxed);
    let connected = slow.join().unwrap();
    daemon.stop();
    took.sort();
    let answered = took.len() as f64 / checks as f64;
    let p99 = took
        .get((took.len() * 99 / 100).min(took.len().saturating_sub(1)))
        .copied();
    eprintln!(
        "slow clients: {connected} connections made by the slow clients; spamc checks answered {}/{checks} ({:.1} %), p50 {:?}, p99 {p99:?}",
        took.len(),
        answered * 100.0,
        took.get(took.len() / 2)
    );
    assert!(connected >= 500, "the slow clients connected: {connected}");
    assert!(answered >= 0.95, "{} of {checks} checks answered", took.len());
}
