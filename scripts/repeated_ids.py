#!/usr/bin/env python3
"""The late-label cache whatever the ids: peak RSS of `classifyd run` over
N unlabeled messages (JSON lines on stdin, predictions to /dev/null) whose
ids are all distinct, against the same messages under one repeated id
(but the first, whose entry waits for its label at the head of the
cache). The cache holds one entry per id, under its entry and byte caps,
so the repeated run must not take more memory than the distinct one
(before, behind a waiting head the ids that repeat queued up, ~38 bytes
a message, until the head's TTL).

    scripts/repeated_ids.py [N (3000000)] [--bin PATH]

Prints both peaks and their ratio; exits 1 if the repeated run's peak is
over 1.10 x the distinct run's.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXTS = [
    "see you at lunch tomorrow?",
    "WINNER!! claim your free prize now, call 09061701461",
    "ok i'll be home late, save me some dinner",
    "URGENT your mobile number has won a cash award",
]


def feed(pipe, n, repeated):
    chunk = []
    for i in range(n):
        mid = f"m-{i}" if not repeated or i == 0 else "same-id"
        chunk.append(f'{{"id": "{mid}", "text": "{TEXTS[i % 4]} {i}"}}\n')
        if len(chunk) == 10000:
            pipe.write("".join(chunk).encode())
            chunk = []
    pipe.write("".join(chunk).encode())
    pipe.close()


def peak_rss_mib(binary, n, repeated):
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CLASSIFYD_LOG="warn")
        p = subprocess.Popen(
            [binary, "run", "--input", "-", "--output", "/dev/null", "--checkpoint-dir", os.path.join(tmp, "ck")],
            stdin=subprocess.PIPE,
            env=env,
        )
        t = threading.Thread(target=feed, args=(p.stdin, n, repeated))
        started = time.time()
        t.start()
        _, status, usage = os.wait4(p.pid, 0)
        t.join()
        if status != 0:
            sys.exit(f"classifyd run failed: status {status}")
        return usage.ru_maxrss / 1024.0, time.time() - started


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=3_000_000)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "classifyd"))
    a = ap.parse_args()
    distinct, t1 = peak_rss_mib(a.bin, a.n, False)
    repeated, t2 = peak_rss_mib(a.bin, a.n, True)
    print(f"{a.n} messages. distinct ids: {distinct:.1f} MiB ({t1:.0f} s); one repeated id: {repeated:.1f} MiB ({t2:.0f} s); "
          f"ratio {repeated / distinct:.3f}")
    sys.exit(0 if repeated <= 1.10 * distinct else 1)


if __name__ == "__main__":
    main()
