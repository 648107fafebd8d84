#!/usr/bin/env bash
# Active learning on the shared spam streams: `classifyd eval --label-budget B`
# asking for the least confident messages (--query uncertainty) against
# asking at random at the same budget (--query random, seeds 1-5).
# Prints one markdown row per stream and budget: progressive accuracy and
# 1-ROCA % over all examples, and the labels each asked for.
#
#   scripts/label_budget.sh [BUDGET...]      (default: 0.1)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${CLASSIFYD_DATA:-../shared/data}
budgets=("$@")
[[ ${#budgets[@]} -gt 0 ]] || budgets=(0.1)
cargo build --release --quiet
bin=target/release/classifyd

one() { # file budget query-flags... -> "accuracy roca asked"
  local file=$1 budget=$2
  shift 2
  "$bin" eval --json --input "$file" --label-budget "$budget" "$@" 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
p = r["progressive"]
print(p["accuracy"], p.get("one_minus_roca_percent") or 0, r["label_budget"]["asked"])'
}

echo "| stream | budget | uncertainty: accuracy / 1-ROCA % / labels | random (5 seeds): accuracy mean [min-max] / 1-ROCA % mean / labels mean |"
echo "|---|---|---|---|"
for stream in sms_spam_collection spamassassin; do
  file=$data/$stream/stream.jsonl
  [[ -f $file ]] || { echo "| $stream | missing: $file |"; continue; }
  for b in "${budgets[@]}"; do
    read -r ua ur un < <(one "$file" "$b" --query uncertainty)
    rand=$(for seed in 1 2 3 4 5; do one "$file" "$b" --query random --seed "$seed"; done)
    python3 - "$stream" "$b" "$ua" "$ur" "$un" "$rand" <<'EOF'
import statistics as s, sys
stream, b, ua, ur, un, rand = sys.argv[1:]
rows = [list(map(float, l.split())) for l in rand.strip().splitlines()]
acc = [r[0] for r in rows]
print(f"| {stream} | {b} | {float(ua):.4f} / {float(ur):.3f} / {un} | "
      f"{s.mean(acc):.4f} [{min(acc):.4f}-{max(acc):.4f}] / {s.mean(r[1] for r in rows):.3f} / "
      f"{s.mean(r[2] for r in rows):.0f} |")
EOF
  done
done
