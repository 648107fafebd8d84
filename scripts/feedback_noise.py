#!/usr/bin/env python3
"""Feedback you cannot trust, measured as a deployment sees it: every
message of a labeled binary stream is sent to the JSON-lines daemon
without its label (so it is predicted), and its label follows at once as a
late-label line {"id", "label", "reporter"}. Each prediction is scored
against the message's true label, whatever the feedback said.

Scenarios (reporters r-0 .. r-9 are honest, one label in ten each at
random; a scenario changes what some of them say):

  clean            every label true
  flip10 / flip20 / flip30   that share of the labels flipped at random (seeds 1 and 2)
  ham-as-spam      10 % of the ham labelled spam (one-sided, as users who
                   report mailing lists do)
  flooder          an 11th reporter sends 5 % of all labels, every one flipped
  dictionary       3 % extra messages made of the stream's 400 most frequent
                   ham words, labelled spam by the 10 reporters (the extra
                   messages are not scored)
  focused          one sender's ham labelled spam by an attacker: the ham
                   with the stream's most frequent ham-only word (a mailing
                   list's name, a writer's habit) stands for one sender;
                   every one of those labels comes from "attacker", flipped.
                   The row also gives the false positives among them.

    scripts/feedback_noise.py [--input FILE ...] [--scenarios a,b] [--bin PATH] [-- FLAGS]

Prints a row per stream and scenario: errors, ham false positives, and
the ratio to the clean run of the same build. FLAGS go to `classifyd run`.
"""
import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data")
STREAMS = [
    os.path.join(DATA, "sms_spam_collection", "stream.jsonl"),
    os.path.join(DATA, "spamassassin", "stream.jsonl"),
]
HONEST = [f"r-{i}" for i in range(10)]
SCENARIOS = ["clean", "flip10", "flip20", "flip30", "ham-as-spam", "flooder", "dictionary", "focused"]


def load(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                v = json.loads(line)
                if isinstance(v.get("label"), str) and isinstance(v.get("text"), str):
                    rows.append(v)
    return rows


def other(label, labels):
    return next(l for l in labels if l != label)


def dictionary_messages(rows, n, rng):
    """`n` messages of the 400 most frequent ham words, as an attacker
    who wants ham to look like spam would write them."""
    counts = collections.Counter()
    for r in rows:
        if r["label"] == "ham":
            counts.update(re.findall(r"[a-z']+", r["text"].lower()))
    words = [w for w, _ in counts.most_common(400)]
    return [" ".join(rng.sample(words, min(len(words), 40))) for _ in range(n)]


def sender_word(rows):
    """The most frequent word found in ham and never in spam (at least 0.5 %
    of the ham): the ham with it stands for one sender's."""
    ham, spam = collections.Counter(), collections.Counter()
    for r in rows:
        words = set(re.findall(r"[a-z][a-z']{2,}", r["text"].lower()))
        (ham if r["label"] == "ham" else spam).update(words)
    n_ham = sum(1 for r in rows if r["label"] == "ham")
    pool = [(c, w) for w, c in ham.items() if spam[w] == 0 and c >= n_ham // 200]
    return max(pool)[1] if pool else None


def targeted(rows):
    """The ids of one sender's ham (see `sender_word`)."""
    w = sender_word(rows)
    if w is None:
        return set()
    pat = re.compile(rf"\b{re.escape(w)}\b")
    return {r.get("id") or f"m-{i}" for i, r in enumerate(rows) if r["label"] == "ham" and pat.search(r["text"].lower())}


def scenario_lines(rows, scenario, seed):
    """The input lines of a scenario and the ids to score (with their truth)."""
    rng = random.Random(seed)
    labels = sorted({r["label"] for r in rows})
    truth, out = {}, []
    extra = []
    if scenario == "dictionary":
        extra = dictionary_messages(rows, max(1, len(rows) * 3 // 100), rng)
    every = len(rows) // max(1, len(extra)) if extra else 0
    flip = {"flip10": 0.1, "flip20": 0.2, "flip30": 0.3}.get(scenario, 0.0)
    target = targeted(rows) if scenario == "focused" else set()
    for i, r in enumerate(rows):
        mid = r.get("id") or f"m-{i}"
        truth[mid] = r["label"]
        out.append({"id": mid, "text": r["text"]})
        label, reporter = r["label"], rng.choice(HONEST)
        if rng.random() < flip:
            label = other(label, labels)
        if scenario == "ham-as-spam" and label == "ham" and rng.random() < 0.1:
            label = "spam"
        if scenario == "flooder" and rng.random() < 0.05:
            label, reporter = other(r["label"], labels), "flooder"
        if mid in target:
            label, reporter = "spam", "attacker"
        out.append({"id": mid, "label": label, "reporter": reporter})
        if extra and i % every == every - 1 and extra:
            eid = f"dict-{i}"
            out.append({"id": eid, "text": extra.pop()})
            out.append({"id": eid, "label": "spam", "reporter": rng.choice(HONEST)})
    return out, truth


def run(binary, lines, flags):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "in.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for v in lines:
                f.write(json.dumps(v) + "\n")
        out = subprocess.run(
            [binary, "run", "--input", path, "--output", "-"] + flags,
            capture_output=True,
            env=dict(os.environ, CLASSIFYD_LOG="error"),
            check=True,
        )
    return [json.loads(l) for l in out.stdout.decode().splitlines() if l.strip()]


def score(preds, truth):
    errors = ham_fp = 0
    for p in preds:
        t = truth.get(p["id"])
        if t is None:
            continue
        if p.get("label") != t:
            errors += 1
            if t == "ham":
                ham_fp += 1
    return errors, ham_fp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", action="append")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "classifyd"))
    ap.add_argument("flags", nargs="*")
    a = ap.parse_args()
    print("| stream | scenario | errors | ham false positives | errors / clean |")
    print("|---|---|---:|---:|---:|")
    for path in a.input or STREAMS:
        rows = load(path)
        name = os.path.basename(os.path.dirname(path)) or path
        clean = None
        for scenario in a.scenarios.split(","):
            seeds = [1, 2] if scenario.startswith("flip") else [1]
            for seed in seeds:
                lines, truth = scenario_lines(rows, scenario, seed)
                preds = run(a.bin, lines, a.flags)
                errors, fp = score(preds, truth)
                if scenario == "clean":
                    clean = errors
                ratio = f"{errors / clean:.2f}" if clean else "-"
                label = scenario if len(seeds) == 1 else f"{scenario} (seed {seed})"
                if scenario == "focused":
                    target = targeted(rows)
                    hit = sum(1 for p in preds if p["id"] in target and p.get("label") != "ham")
                    label += f" ({len(target)} ham with \"{sender_word(rows)}\", {hit} false positives among them)"
                print(f"| {name} ({len(rows)}) | {label} | {errors} | {fp} | {ratio} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
