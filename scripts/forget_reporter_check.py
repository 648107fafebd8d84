#!/usr/bin/env python3
"""Taking one reporter back, measured through the JSON-lines daemon (issue 71,
docs/feedback.md "Forgetting a reporter"), in the form of
../shared/tools/corrections_check.py's forget.

Every message comes unlabeled, then its label as a late feedback line. The
labels come from three honest reporters (r1, r2, r3) and one reporter,
"flipper", that gives FLIP of them (seeded) and flips every label it gives.

  with      every label, the flipper's among them
  forget    the same, then {"forget_reporter": "flipper"} at the end
  without   the flipper's messages never labeled (what the forget should reach)

Figures: each final model's predictions on the whole stream (`predict` with
the last checkpoint) and their agreement with `without`'s. Floor: forget's
agreement >= 0.998. `with` shows what the flipper cost before the forget.

Usage: scripts/forget_reporter_check.py [STREAM] [BIN] [--flip 0.05]
(STREAM: ../shared/data/sms_spam_collection/stream.jsonl; BIN:
target/release/classifyd). Exits 1 when the floor falls short."""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SMS = os.path.join(ROOT, "..", "shared", "data", "sms_spam_collection", "stream.jsonl")


def load(src):
    out = []
    for i, line in enumerate(open(src)):
        r = json.loads(line)
        if "label" in r and r.get("split") != "test":
            out.append(("m%d" % i, r["text"], r["label"]))
    return out


def run(bin_, lines, work, name):
    d = os.path.join(work, name)
    os.makedirs(d)
    inp, ck = os.path.join(d, "in.jsonl"), os.path.join(d, "ck")
    with open(inp, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    subprocess.run([bin_, "run", "--input", inp, "--output", os.devnull, "--checkpoint-dir", ck,
                    "--dead-letter", os.path.join(d, "dead.jsonl")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    info = json.loads(subprocess.run([bin_, "inspect", "--checkpoint-dir", ck, "--json"],
                                     check=True, capture_output=True, text=True).stdout)
    return ck, info


def final_labels(bin_, ck, msgs, work, name):
    probe = os.path.join(work, name + "-probe.jsonl")
    with open(probe, "w") as f:
        for mid, text, _ in msgs:
            f.write(json.dumps({"id": mid, "text": text}) + "\n")
    out = subprocess.run([bin_, "predict", "--checkpoint-dir", ck, "--input", probe],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line)["label"] for line in out.splitlines() if line.strip()]


def streams(msgs, flip_share, seed=11):
    rng = random.Random(seed)
    labels = sorted({m[2] for m in msgs})
    out = {"with": [], "forget": [], "without": []}
    flipped = 0
    for mid, text, lab in msgs:
        for s in out.values():
            s.append({"id": mid, "text": text})
        if rng.random() < flip_share:
            wrong = rng.choice([x for x in labels if x != lab])
            bad = {"id": mid, "label": wrong, "reporter": "flipper"}
            out["with"].append(bad)
            out["forget"].append(bad)
            flipped += 1
        else:
            fb = {"id": mid, "label": lab, "reporter": rng.choice(["r1", "r2", "r3"])}
            for s in out.values():
                s.append(fb)
    out["forget"].append({"forget_reporter": "flipper", "reporter": "admin"})
    return out, flipped


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stream", nargs="?", default=SMS)
    ap.add_argument("bin", nargs="?", default=os.path.join(ROOT, "target", "release", "classifyd"))
    ap.add_argument("--flip", type=float, default=0.05, help="share of the labels the flipper gives")
    a = ap.parse_args()
    msgs = load(a.stream)
    lines, flipped = streams(msgs, a.flip)
    work = tempfile.mkdtemp(prefix="forget-reporter-")
    final, forgotten = {}, None
    for name, ls in lines.items():
        ck, info = run(a.bin, ls, work, name)
        final[name] = final_labels(a.bin, ck, msgs, work, name)
        if name == "forget":
            forgotten = info["feedback"]["labels_forgotten"]
    ref = final["without"]

    def agree(name):
        return sum(x == y for x, y in zip(final[name], ref)) / len(ref)

    short = agree("forget") < 0.998
    stream = os.path.basename(os.path.dirname(os.path.abspath(a.stream)))
    print(f"{stream}: {len(msgs)} labels, {flipped} flipped by one reporter; "
          f"{forgotten} labels forgotten; agreement with a run without them: "
          f"with {agree('with'):.4f}, after the forget {agree('forget'):.4f} (floor 0.998)"
          + (" SHORT" if short else ""))
    sys.exit(1 if short else 0)


if __name__ == "__main__":
    main()
