#!/usr/bin/env bash
# The accuracy table of the README: `classifyd eval --json` with the defaults
# on the four shared streams (progressive for the spam streams, held-out test
# after the default 5 passes for the split ones), then on the two raw e-mail
# corpora (SpamAssassin, CSDMC2010) as scripts/email_stream.py streams them.
#
#   scripts/accuracy.sh [DATA_DIR] [extra classifyd eval flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data}
shift || true
cargo build --release -q
echo "| stream | examples | progressive accuracy | 1-ROCA % | test accuracy | test micro-F1 | test macro-F1 | seconds |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for name in sms_spam_collection spamassassin reuters21578 20newsgroups; do
  target/release/classifyd eval --input "$data/$name/stream.jsonl" --json "$@" | python3 -c "
import json, sys
r = json.load(sys.stdin); p = r['progressive']; t = r.get('test') or {}
f = lambda v, d=4: '-' if v is None else f'{v:.{d}f}'
print(f\"| $name | {r['examples']} | {f(p['accuracy'])} | {f(p.get('one_minus_roca_percent'), 3)} | {f(t.get('accuracy'))} | {f(t.get('micro_f1'))} | {f(t.get('macro_f1'))} | {r['seconds']:.1f} |\")"
done
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
for name in spamassassin csdmc2010; do
  python3 scripts/email_stream.py --raw "$data/$name/raw" > "$raw/$name.jsonl"
  target/release/classifyd eval --input "$raw/$name.jsonl" --json "$@" | python3 -c "
import json, sys
r = json.load(sys.stdin); p = r['progressive']
print(f\"| $name raw | {r['examples']} | {p['accuracy']:.4f} | {p.get('one_minus_roca_percent'):.4f} | - | - | - | {r['seconds']:.1f} |\")"
done
