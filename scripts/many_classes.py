#!/usr/bin/env python3
"""A many-class topic stream for classifyd's many-class benchmark.

Writes JSON lines {"id", "text", "label"}: K topics ("topic0000" ...), N
short messages (about 180 bytes) spread evenly over them (N/K each), in a
random order. A message mixes a shared background vocabulary (Zipf-like
ranks) with its topic's own words and word pairs, with some capitalisation
and punctuation noise and 2 % of labels flipped: a router that must learn
each topic from a few dozen examples, as a growing label set gives it.

    scripts/many_classes.py --classes 1000 --n 50000 --seed 1 > stream.jsonl
"""
import argparse
import json
import random
import sys

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vi", "so", "pe", "da",
             "go", "ze", "bu", "fi", "ha", "jo", "ly", "wa", "xo", "qu"]


def vocabulary(rng, n):
    words, seen = [], set()
    while len(words) < n:
        w = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def pick(rng, words):
    """A word by a heavy-headed rank: rank r with probability about 1/r."""
    return words[min(int(len(words) ** rng.random()) - 1, len(words) - 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--noise", type=float, default=0.02, help="fraction of labels flipped")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    background = vocabulary(rng, 3000)
    own = vocabulary(rng, 3000 + 100 * a.classes)[3000:]
    labels = ["topic%04d" % k for k in range(a.classes)]
    words = {lab: own[k * 100:(k + 1) * 100] for k, lab in enumerate(labels)}
    pairs = {lab: [(rng.choice(background), rng.choice(background)) for _ in range(10)] for lab in labels}
    order = [labels[i % a.classes] for i in range(a.n)]
    rng.shuffle(order)
    out = sys.stdout
    for i, lab in enumerate(order):
        tokens = []
        while sum(len(t) + 1 for t in tokens) < 170:
            u = rng.random()
            if u < 0.2:
                tokens.append(pick(rng, words[lab]))
            elif u < 0.26:
                tokens.extend(rng.choice(pairs[lab]))
            else:
                tokens.append(pick(rng, background))
        text = " ".join(t.capitalize() if rng.random() < 0.1 else t for t in tokens)
        if rng.random() < a.noise:
            lab = rng.choice(labels)
        out.write(json.dumps({"id": "mc-%06d" % i, "text": text, "label": lab}) + "\n")


if __name__ == "__main__":
    main()
