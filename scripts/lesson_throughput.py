#!/usr/bin/env python3
"""Lesson throughput over spamc, and the lag from a lesson's answer to a check
that reflects it (issue 63).

A daemon learns the first 5,000 raw SpamAssassin messages (--learned) (JSON lines, a
checkpoint directory, the spamd endpoint); then `spamc -L spam|ham` teaches
it N more, one message per connection and one after another, as a user
training a folder does. Prints lessons a second. Then, for 20 more lessons,
the time from each answer until `spamc -R` shows a margin that moved (the
read-your-writes lag). With --base, the same against another build, runs
alternated. With --pipe the daemon reads its input from an open pipe (stdin,
as `tail -F | classifyd run` does) that stays open while it is taught: its
loop waits for lines, and a lesson must not wait for the reader (issue 70).

    python3 scripts/lesson_throughput.py [--bin B] [--base B2] [--lessons N] [--runs R] [--pipe]

Needs Debian's spamc (scripts/test.sh installs it).
"""

import argparse
import base64
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def messages(data):
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts/email_stream.py"), "--raw", os.path.join(data, "spamassassin/raw")],
        check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def spamc(port, args, raw):
    r = subprocess.run(["spamc", "-d", "127.0.0.1", "-p", str(port), "-t", "30", *args],
                       input=raw, capture_output=True)
    return r.stdout.decode(errors="replace")


def margin(report):
    m = re.search(r"\(margin (-?[0-9.e+-]+)", report)
    return float(m.group(1)) if m else None


def one_run(binary, stream, lessons, tmp, learned, pipe=False):
    model, taught = stream[:learned], stream[learned:learned + lessons + 20]
    path = os.path.join(tmp, "in.jsonl")
    with open(path, "w") as f:
        for m in model:
            f.write(json.dumps(m) + "\n")
    ck = tempfile.mkdtemp(dir=tmp)
    port = free_port()
    daemon = subprocess.Popen([binary, "run", "--input", "-" if pipe else path, "--output", "/dev/null",
                               "--checkpoint-dir", ck, "--spamd-addr", f"127.0.0.1:{port}"],
                              stdin=subprocess.PIPE if pipe else subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "CLASSIFYD_LOG": "error"})
    if pipe:
        # The model's lines, and the pipe left open.
        with open(path, "rb") as f:
            daemon.stdin.write(f.read())
        daemon.stdin.flush()
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        time.sleep(2 + learned / 2000)  # the input learned
        raws = [base64.b64decode(m["email_base64"]) for m in taught]
        labels = [m["label"] for m in taught]
        start = time.time()
        for raw, label in zip(raws[:lessons], labels[:lessons]):
            said = spamc(port, ["-L", label], raw)
            assert "un/learned" in said, said
        rate = lessons / (time.time() - start)
        lags = []
        for raw, label in zip(raws[lessons:], labels[lessons:]):
            before = margin(spamc(port, ["-R"], raw))
            spamc(port, ["-L", "spam" if label == "ham" else "ham"], raw)
            answered = time.time()
            while margin(spamc(port, ["-R"], raw)) == before and time.time() - answered < 5:
                pass
            lags.append(time.time() - answered)
        return rate, lags
    finally:
        if daemon.stdin:
            daemon.stdin.close()
        daemon.terminate()
        daemon.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/classifyd"))
    ap.add_argument("--base")
    ap.add_argument("--lessons", type=int, default=200)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--learned", type=int, default=5000, help="messages the daemon learns first")
    ap.add_argument("--data", default=os.path.join(ROOT, "../shared/data"))
    ap.add_argument("--pipe", action="store_true", help="the daemon reads an open pipe (stdin)")
    a = ap.parse_args()
    stream = messages(a.data)
    builds = [("this build", a.bin)] + ([("base", a.base)] if a.base else [])
    results = {name: [] for name, _ in builds}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.runs):
            for name, binary in builds:
                results[name].append(one_run(binary, stream, a.lessons, tmp, a.learned, a.pipe))
    print(f"{a.lessons} lessons over spamc after {a.learned} messages learned, one per connection, "
          f"one after another{', input an open pipe' if a.pipe else ''}; median of {a.runs} run(s)")
    print("| build | lessons/s | answer-to-check lag median ms | max ms |")
    print("|---|---:|---:|---:|")
    for name, runs in results.items():
        rate = statistics.median(r for r, _ in runs)
        lags = [lag for _, ls in runs for lag in ls]
        print(f"| {name} | {rate:.1f} | {1000 * statistics.median(lags):.0f} | {1000 * max(lags):.0f} |")


if __name__ == "__main__":
    main()
