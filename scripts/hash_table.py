#!/usr/bin/env python3
"""The feature hash's versions side by side (issue 51, item 2): `classifyd
eval --json --feature-hash v1` and `v2` on the public streams, their
errors, 1-ROCA and accuracy (binary streams) or micro-F1 (Reuters, many
labels), and the relative change of each.

    scripts/hash_table.py [--bin target/release/classifyd] [--data ../shared/data] [--seeds N]

With --seeds N, each cell is the mean over hash seeds 0 to N-1
(`--hash-seed`), with the range of errors: a hash is one draw of a random
function, and on these streams the draws of one version spread wider than
the versions differ (SMS 70 to 75 errors over ten seeds of version 1).

The raw e-mail streams are built into target/ab/ (scripts/email_stream.py)
when missing.
"""
import argparse, json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def raw_stream(name, raw_dir):
    path = os.path.join(ROOT, "target", "ab", f"{name}.jsonl")
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as out:
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "email_stream.py"), "--raw", raw_dir],
                           stdout=out, check=True)
    return path


def evaluate(binary, stream, version, seed):
    run = subprocess.run([binary, "eval", "--json", "--input", stream, "--feature-hash", version,
                          "--hash-seed", str(seed)], capture_output=True, text=True, check=True)
    p = json.loads(run.stdout)["progressive"]
    return {
        "errors": round((1 - p["accuracy"]) * p["examples"]),
        "accuracy": p["accuracy"],
        "micro_f1": p["micro_f1"],
        "roca": p.get("one_minus_roca_percent"),
    }


def mean_over(binary, stream, version, seeds):
    runs = [evaluate(binary, stream, version, s) for s in range(seeds)]
    mean = {k: (None if runs[0][k] is None else sum(r[k] for r in runs) / seeds) for k in runs[0]}
    mean["range"] = (min(r["errors"] for r in runs), max(r["errors"] for r in runs))
    return mean


def change(a, b):
    return "-" if a is None or b is None or a == 0 else f"{(b - a) / a * 100:+.1f} %"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "classifyd"))
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    ap.add_argument("--seeds", type=int, default=1)
    a = ap.parse_args()
    streams = [
        ("SMS", os.path.join(a.data, "sms_spam_collection", "stream.jsonl")),
        ("SpamAssassin text", os.path.join(a.data, "spamassassin", "stream.jsonl")),
        ("raw SpamAssassin", raw_stream("sa_raw", os.path.join(a.data, "spamassassin", "raw"))),
        ("raw CSDMC2010", raw_stream("csdmc_raw", os.path.join(a.data, "csdmc2010", "raw"))),
        ("Reuters-21578", os.path.join(a.data, "reuters21578", "stream.jsonl")),
        ("20 Newsgroups", os.path.join(a.data, "20newsgroups", "stream.jsonl")),
    ]
    print("| stream | v1 errors / 1-ROCA / accuracy | v2 errors / 1-ROCA / accuracy | errors | 1-ROCA |")
    print("|---|---|---|---:|---:|")
    for name, path in streams:
        v1, v2 = mean_over(a.bin, path, "v1", a.seeds), mean_over(a.bin, path, "v2", a.seeds)
        # Reuters is many labels a message: micro-F1 says more than accuracy.
        key = "micro_f1" if name.startswith("Reuters") else "accuracy"
        roca = lambda r: "-" if r["roca"] is None else "%.4f %%" % r["roca"]
        spread = lambda r: "" if a.seeds == 1 else " (%d-%d)" % r["range"]
        cell = lambda r: f"{r['errors']:.1f}{spread(r)} / {roca(r)} / {r[key]:.4f}"
        print(f"| {name} | {cell(v1)} | {cell(v2)} | {change(v1['errors'], v2['errors'])} | "
              f"{change(v1['roca'], v2['roca'])} |", flush=True)


if __name__ == "__main__":
    main()
