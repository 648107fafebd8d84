#!/usr/bin/env python3
"""The raw SpamAssassin messages as a JSON-lines stream for classifyd, in
the order of raw/index.tsv (the text stream's, by delivery time).

    scripts/email_stream.py [--as base64|string] [--raw DIR] > OUT.jsonl

--as base64 (default): {"id", "email_base64", "label"}, the bytes exactly.
--as string: {"id", "email", "label"}, the bytes as UTF-8 (invalid bytes,
as 8-bit mail has, replaced by U+FFFD, as a JSON producer would do).
"""
import argparse
import base64
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--as", dest="form", choices=["base64", "string"], default="base64")
    ap.add_argument("--raw", default=os.path.join(ROOT, "..", "shared", "data", "spamassassin", "raw"))
    a = ap.parse_args()
    out = sys.stdout
    with open(os.path.join(a.raw, "index.tsv"), encoding="utf-8") as index:
        for line in index:
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 4 or not fields[0].isdigit():
                continue
            _, mid, label, path = fields[:4]
            with open(os.path.join(a.raw, path), "rb") as f:
                raw = f.read()
            v = {"id": mid, "label": label}
            if a.form == "base64":
                v["email_base64"] = base64.b64encode(raw).decode("ascii")
            else:
                v["email"] = raw.decode("utf-8", errors="replace")
            out.write(json.dumps(v) + "\n")


if __name__ == "__main__":
    main()
