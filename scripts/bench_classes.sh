#!/usr/bin/env bash
# The many-class benchmark (README "Many classes", docs/many-classes.md):
# 50,000 short messages (about 180 bytes) over 10, 100 and 1,000 topics
# from scripts/many_classes.py, learned by `classifyd eval` with the
# defaults and with --model hinge. Prints peak RSS (/usr/bin/time),
# examples/s and progressive accuracy per class count. Every run is capped
# at 4 GiB of data (prlimit), so a regression cannot take the machine.
#
#   scripts/bench_classes.sh [CLASS_COUNTS...]      (default: 10 100 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
counts=("$@")
[[ ${#counts[@]} -gt 0 ]] || counts=(10 100 1000)
cargo build --release -q
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| classes | model | peak RSS MB | examples/s | progressive accuracy |"
echo "|---:|---|---:|---:|---:|"
for k in "${counts[@]}"; do
  python3 scripts/many_classes.py --classes "$k" --n 50000 --seed 1 > "$tmp/stream.jsonl"
  for model in auto hinge; do
    /usr/bin/time -f '%M' -o "$tmp/rss" prlimit --data=4294967296 \
      target/release/classifyd eval --input "$tmp/stream.jsonl" --json --model "$model" 2>/dev/null > "$tmp/report.json"
    python3 - "$k" "$model" "$tmp/rss" "$tmp/report.json" <<'PY'
import json, sys
k, model, rss, report = sys.argv[1:]
r = json.load(open(report))
mb = int(open(rss).read().split()[-1]) / 1024
print(f"| {k} | {model} | {mb:.0f} | {r['examples_per_second']:,.0f} | {r['progressive']['accuracy']:.4f} |")
PY
  done
done
