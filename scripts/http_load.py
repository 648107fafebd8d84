#!/usr/bin/env python3
"""Load on POST /v1/classify (docs/http.md), or with --spamd on the spamd
protocol's CHECK (docs/mail.md: one connection a request, as spamc asks;
each text sent as a small e-mail): a steady request rate, with
latency measured from each request's scheduled time (so a stall is not
hidden by the requests it delays), then a flood of connections.

    scripts/http_load.py --addr 127.0.0.1:8080 --rate 1000 --seconds 60 \
        --messages ../shared/data/sms_spam_collection/stream.jsonl [--flood 10000] [--spamd]

Prints one JSON object: the rate asked and achieved, answers by status,
latency percentiles (ms), and with --flood what became of the connections
and whether the daemon still answered afterwards. Standard library only.
"""

import argparse
import http.client
import json
import resource
import socket
import threading
import time


def messages(path, n=2000, spamd=False):
    """Unlabeled messages (the label dropped) from a JSON-lines stream; for
    spamd, whole CHECK requests of each text as an e-mail."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            v = json.loads(line)
            if "text" not in v:
                continue
            if spamd:
                mail = ("Message-ID: <load-%d@classifyd>\r\nSubject: load\r\n\r\n%s" % (len(out), v["text"])).encode()
                out.append(b"CHECK SPAMC/1.5\r\nContent-length: %d\r\n\r\n" % len(mail) + mail)
            else:
                out.append(json.dumps({"id": v.get("id"), "text": v["text"]}).encode())
            if len(out) >= n:
                break
    return out


def spamd_check(host, port, request):
    """One CHECK on a connection of its own: the spamd status code."""
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        answer = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    parts = answer.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else "bad_answer"


def worker(addr, bodies, start, period, offset, count, out, spamd=False):
    """Sends `count` requests on one keep-alive connection, the k-th at
    start + offset + k * period, and records (status, latency from the
    scheduled time, service time)."""
    host, port = addr.rsplit(":", 1)
    conn = None
    for k in range(count):
        due = start + offset + k * period
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        sent = time.perf_counter()
        body = bodies[(k * 7919 + int(offset * 1e6)) % len(bodies)]
        try:
            if spamd:
                status = spamd_check(host, port, body)
            else:
                if conn is None:
                    conn = http.client.HTTPConnection(host, int(port), timeout=10)
                conn.request("POST", "/v1/classify", body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                status = r.status
        except (OSError, http.client.HTTPException) as e:
            status = type(e).__name__
            conn = None
        done = time.perf_counter()
        out.append((status, done - due, done - sent))


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    i = min(len(sorted_values) - 1, int(q * len(sorted_values)))
    return round(sorted_values[i] * 1000, 3)


def steady(addr, bodies, rate, seconds, connections, spamd=False):
    total = int(rate * seconds)
    per = total // connections
    period = connections / rate
    results = [[] for _ in range(connections)]
    start = time.perf_counter() + 0.2
    threads = [
        threading.Thread(target=worker, args=(addr, bodies, start, period, i / rate, per, results[i], spamd))
        for i in range(connections)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    flat = [r for rs in results for r in rs]
    by_status = {}
    for status, _, _ in flat:
        by_status[str(status)] = by_status.get(str(status), 0) + 1
    latency = sorted(r[1] for r in flat)
    service = sorted(r[2] for r in flat)
    return {
        "rate_asked": rate,
        "seconds": round(elapsed, 2),
        "requests": len(flat),
        "rate_achieved": round(len(flat) / elapsed, 1),
        "status": by_status,
        "latency_ms": {q: percentile(latency, p) for q, p in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0)]},
        "service_ms": {q: percentile(service, p) for q, p in [("p50", 0.5), ("p99", 0.99)]},
    }


def ask(addr, body, timeout=10):
    host, port = addr.rsplit(":", 1)
    try:
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        conn.request("POST", "/v1/classify", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        conn.close()
        return r.status
    except (OSError, http.client.HTTPException) as e:
        return type(e).__name__


def flood(addr, n):
    """Opens n connections at once and sends nothing on them; counts how
    many the server closed, then closes them all and asks once more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 1000)), hard))
    host, port = addr.rsplit(":", 1)
    socks, failed = [], 0
    t0 = time.perf_counter()
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        err = s.connect_ex((host, int(port)))
        if err not in (0, 115):  # EINPROGRESS
            failed += 1
            s.close()
            continue
        socks.append(s)
    during = ask(addr, b'{"text":"during the flood"}', timeout=15)
    time.sleep(1.0)
    closed = 0
    for s in socks:
        try:
            closed += s.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    for s in socks:
        s.close()
    time.sleep(0.5)
    after = ask(addr, b'{"text":"after the flood"}')
    return {
        "connections": n,
        "opened": len(socks),
        "connect_failed": failed,
        "closed_by_server": closed,
        "left_open": len(socks) - closed,
        "request_during": during,
        "request_after": after,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--messages", required=True)
    ap.add_argument("--rate", type=float, default=1000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--flood", type=int, default=0, help="then open this many connections at once")
    ap.add_argument("--spamd", action="store_true", help="spamd's CHECK instead of POST /v1/classify")
    a = ap.parse_args()
    bodies = messages(a.messages, spamd=a.spamd)
    out = {"steady": steady(a.addr, bodies, a.rate, a.seconds, a.connections, a.spamd)}
    if a.flood:
        out["flood"] = flood(a.addr, a.flood)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
