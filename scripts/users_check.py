#!/usr/bin/env python3
"""Where users agree, personalisation must not hurt (issue 49).

Gives each message of SMS and SpamAssassin text a user drawn at random out
of 60 (one stream per seed), runs `classifyd eval --json` on each and on
the stream without users, and prints the errors: without users, and with
users as the mean over the seeds (their range). One seed alone moves the
errors by a few either way (SMS: 72 to 78 at one build), more than the
2 % the issue allows, so the check is on the mean.

Usage: scripts/users_check.py [--bin target/release/classifyd]
           [--data ../shared/data | --stream FILE ...] [--seeds 10]
           [--bar 0.02] [-- EXTRA EVAL FLAGS, e.g. --personal-scale 2]
--stream checks labeled JSON-lines streams of your own instead (their
"user" fields are replaced). Exits 1 when a stream's mean is past the bar.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

STREAMS = {
    "SMS": "sms_spam_collection/stream.jsonl",
    "SpamAssassin text": "spamassassin/stream.jsonl",
}
USERS = 60


def errors(binary, path, extra):
    """The progressive errors `eval --json` counts on the stream at `path`."""
    run = subprocess.run(
        [binary, "eval", "--json", "--input", path, *extra],
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        sys.exit(f"{binary} eval --input {path} failed ({run.returncode}): {run.stderr.strip()}")
    report = json.loads(run.stdout)
    return round(report["examples"] * (1.0 - report["progressive"]["accuracy"]))


def with_users(src, dst, seed):
    """Writes `src`'s records to `dst`, each with a user drawn by `seed`."""
    rng = random.Random(seed)
    with open(src) as f, open(dst, "w") as out:
        for line in f:
            if not line.strip():
                continue
            record = json.loads(line)
            record["user"] = f"u{rng.randrange(USERS)}"
            out.write(json.dumps(record) + "\n")


def check(binary, streams, seeds, extra, tmp):
    """One row per (name, path) of `streams`: (name, errors without
    users, errors per seed)."""
    rows = []
    for name, src in streams:
        base = errors(binary, src, extra)
        per_seed = []
        for seed in range(1, seeds + 1):
            dst = os.path.join(tmp, f"{seed}.jsonl")
            with_users(src, dst, seed)
            per_seed.append(errors(binary, dst, extra))
        rows.append((name, base, per_seed))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="target/release/classifyd")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--stream", action="append", default=[], help="a labeled stream of yours (repeatable)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--bar", type=float, default=0.02)
    ap.add_argument("extra", nargs="*", help="flags passed to every eval")
    args = ap.parse_args()
    if args.seeds < 1:
        ap.error("--seeds must be at least 1")
    streams = [(os.path.basename(p), p) for p in args.stream] or [
        (name, os.path.join(args.data, rel)) for name, rel in STREAMS.items()
    ]
    with tempfile.TemporaryDirectory() as tmp:
        rows = check(args.bin, streams, args.seeds, args.extra, tmp)
    print(f"| stream | without users | with users, mean of {args.seeds} seeds (range) | change |")
    print("|---|---:|---:|---:|")
    failed = False
    for name, base, per_seed in rows:
        mean = statistics.mean(per_seed)
        change = mean / base - 1.0 if base else 0.0
        failed |= change > args.bar
        print(f"| {name} | {base} | {mean:.1f} ({min(per_seed)}-{max(per_seed)}) | {change:+.1%} |")
    if failed:
        print(f"a stream's mean is more than {args.bar:.0%} past its errors without users", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
