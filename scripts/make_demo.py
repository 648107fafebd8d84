#!/usr/bin/env python3
"""Builds tests/data/sms_demo.jsonl from tests/data/sms_head1000.jsonl.

Every 10th message loses its label (a prediction request); for every other
one of those, the gold label follows 25 lines later on a feedback line
({"id", "label"}); two malformed lines show the dead-letter path.
"""
import json
import sys

src = sys.argv[1] if len(sys.argv) > 1 else "tests/data/sms_head1000.jsonl"
rows = [json.loads(line) for line in open(src, encoding="utf-8")]
out, pending = [], []
for i, r in enumerate(rows):
    if i % 10 == 9:
        out.append(json.dumps({"id": r["id"], "text": r["text"]}, ensure_ascii=False))
        if i % 20 == 19:
            pending.append((i + 25, {"id": r["id"], "label": r["label"]}))
    else:
        out.append(json.dumps(r, ensure_ascii=False))
    for due, fb in [p for p in pending if p[0] == i]:
        out.append(json.dumps(fb))
    pending = [p for p in pending if p[0] != i]
    if i == 500:
        out.append('{"id": "broken-1", "text": ')
        out.append('{"id": "broken-2", "text": 42}')
sys.stdout.write("\n".join(out) + "\n")
