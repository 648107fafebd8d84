#!/usr/bin/env bash
# The cost of --explain (docs/model.md, Explanations): `classifyd predict` over
# the SMS stream ten times over (55,740 messages) with a model learned from
# it, with --explain 0 and 5, alternated RUNS times; prints each run's
# messages/s and the medians. With BASE=path/to/older/classifyd it also
# times that build's predict (no --explain) on the same checkpoint, which
# it writes, so that an older build can read it.
#
#   scripts/bench_explain.sh [RUNS] [DATA_DIR]      (default: 5, ../shared/data)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
data=${2:-../shared/data}
cargo build --release -q
bin=target/release/classifyd
train=${BASE:-$bin}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$train" run --input "$data/sms_spam_collection/stream.jsonl" --output /dev/null --checkpoint-dir "$tmp/ck" 2>/dev/null
for _ in $(seq 10); do cat "$data/sms_spam_collection/stream.jsonl"; done > "$tmp/in.jsonl"
n=$(wc -l < "$tmp/in.jsonl")
time_one() { # label, command...
  local label=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@" --checkpoint-dir "$tmp/ck" --input "$tmp/in.jsonl" --output /dev/null 2>/dev/null
  t1=$(date +%s.%N)
  echo "$label $(python3 -c "print(round($n / ($t1 - $t0)))")"
}
{
  for _ in $(seq "$runs"); do
    [[ -n ${BASE:-} ]] && time_one base "$BASE" predict
    time_one explain-0 "$bin" predict --explain 0
    time_one explain-5 "$bin" predict --explain 5
  done
} | tee "$tmp/runs"
python3 - "$tmp/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    label, v = line.split()
    runs.setdefault(label, []).append(int(v))
for label, vs in runs.items():
    print(f"median {label}: {statistics.median(vs):,.0f} messages/s")
PY
