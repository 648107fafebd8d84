#!/usr/bin/env python3
"""Renames a stream's users into N users, for the memory check of issue 49.

Each user of the input becomes several, in proportion to its messages (at
least one; largest remainders make the total exactly N), and its messages
are dealt round-robin, in a seeded shuffled order, to its new users, so
every new user has at least one message and keeps the old one's
preferences. Messages without a user are copied as they are.

Usage: scripts/split_users.py IN.jsonl OUT.jsonl N [--seed 1]
"""
import argparse
import json
import random
import sys
from collections import Counter


def shares(counts, n):
    """Each user's number of new users: proportional, at least 1, summing to n."""
    total = sum(counts.values())
    if not len(counts) <= n <= total:
        sys.exit(f"N must be between the users ({len(counts)}) and their messages ({total}), got {n}")
    exact = {u: n * c / total for u, c in counts.items()}
    got = {u: max(1, min(counts[u], int(e))) for u, e in exact.items()}
    by_remainder = sorted(counts, key=lambda u: exact[u] - int(exact[u]), reverse=True)
    while sum(got.values()) != n:
        step = 1 if sum(got.values()) < n else -1
        for u in by_remainder if step == 1 else reversed(by_remainder):
            if sum(got.values()) == n:
                break
            if 1 <= got[u] + step <= counts[u]:
                got[u] += step
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("n", type=int)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with open(args.input) as f:
        records = [json.loads(line) for line in f if line.strip()]
    counts = Counter(r["user"] for r in records if "user" in r)
    per_user = shares(counts, args.n)
    rng = random.Random(args.seed)
    deals = {}
    for u, c in counts.items():
        order = [k % per_user[u] for k in range(c)]
        rng.shuffle(order)
        deals[u] = iter(order)
    with open(args.output, "w") as out:
        for r in records:
            if "user" in r:
                r["user"] = f"{r['user']}.{next(deals[r['user']])}"
            out.write(json.dumps(r) + "\n")
    print(f"{len(records)} messages, {sum(per_user.values())} users", file=sys.stderr)


if __name__ == "__main__":
    main()
