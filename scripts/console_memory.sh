#!/usr/bin/env bash
# The console's history in memory (issue 64, docs/console.md): a JSON-lines
# daemon learns 1,000 SMS messages and predicts 100,000 more (the SMS texts
# again, with ids): without an endpoint, with POST /v1/classify only (the
# two copies of the model every endpoint answers from), and with the
# console at its default bound (--console-history 10,000, texts kept);
# each run's peak RSS (GNU time) once every prediction is written, and
# what the console adds over the copies (its history and series).
#
#   scripts/console_memory.sh [BIN] [PREDICTIONS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/target/release/classifyd}
n=${2:-100000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$here/../shared/data/sms_spam_collection/stream.jsonl" "$n" >"$work/in.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for m in lines[:1000]:
    print(json.dumps(m))
for i in range(int(sys.argv[2])):
    print(json.dumps({"id": f"p{i}", "text": lines[i % len(lines)]["text"]}))
PY
run() {
  local name=$1; shift
  rm -rf "$work/ck" "$work/out"
  /usr/bin/time -f %M -o "$work/$name.rss" "$bin" --log warn run --input "$work/in.jsonl" \
    --output "$work/out" --checkpoint-dir "$work/ck" "$@" &
  local pid=$!
  # With the console on, the daemon serves on after its input: stopped once
  # every prediction is out (without it, it ends by itself).
  while kill -0 "$pid" 2>/dev/null && [[ $( (cat "$work/out" 2>/dev/null || true) | wc -l) -lt $n ]]; do sleep 0.5; done
  sleep 3
  pkill -TERM -P "$pid" 2>/dev/null || true
  wait "$pid" || true
  echo "$name: peak RSS $(cat "$work/$name.rss") KB"
}
run without
run copies --http-addr 127.0.0.1:0
run console --console-addr 127.0.0.1:0
echo "the copies: $(( $(cat "$work/copies.rss") - $(cat "$work/without.rss") )) KB"
echo "the console over the copies: $(( $(cat "$work/console.rss") - $(cat "$work/copies.rss") )) KB"
