#!/usr/bin/env bash
# Behaviour kept: `classifyd eval --json` of two builds on the six public
# streams (SMS, SpamAssassin text and raw, CSDMC2010 raw, Reuters-21578,
# 20 Newsgroups), compared on every field but the timings. For a change
# that must not change what the daemon learns (a restructuring).
#
#   scripts/eval_same.sh BASE_BIN [THIS_BIN]     THIS_BIN: target/release/classifyd
#
# Prints one line per stream (same / DIFFERENT and the fields that differ);
# exits 1 when any stream differs. Environment: DATA (../shared/data).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: scripts/eval_same.sh BASE_BIN [THIS_BIN]}
ours=${2:-target/release/classifyd}
data=${DATA:-../shared/data}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 scripts/email_stream.py --raw "$data/spamassassin/raw" > "$work/sa_raw.jsonl"
python3 scripts/email_stream.py --raw "$data/csdmc2010/raw" > "$work/csdmc_raw.jsonl"
declare -A input=(
  [sms]=$data/sms_spam_collection/stream.jsonl
  [sa]=$data/spamassassin/stream.jsonl
  [sa_raw]=$work/sa_raw.jsonl
  [csdmc_raw]=$work/csdmc_raw.jsonl
  [reuters]=$data/reuters21578/stream.jsonl
  [news]=$data/20newsgroups/stream.jsonl
)
status=0
for name in sms sa sa_raw csdmc_raw reuters news; do
  for side in base ours; do
    bin=$base; [[ $side == ours ]] && bin=$ours
    prlimit --data=4294967296 "$bin" eval --input "${input[$name]}" --json > "$work/$name.$side.json"
  done
  python3 - "$work/$name.base.json" "$work/$name.ours.json" "$name" <<'PY' || status=1
import json, sys
def flat(v, at=""):
    if isinstance(v, dict):
        for k, x in v.items():
            if "second" in k:  # every timing: seconds, rates per (CPU) second
                continue
            yield from flat(x, f"{at}.{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from flat(x, f"{at}[{i}]")
    else:
        yield at, v
a = dict(flat(json.load(open(sys.argv[1]))))
b = dict(flat(json.load(open(sys.argv[2]))))
diff = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
print(f"{sys.argv[3]:10} {'same' if not diff else 'DIFFERENT'} ({len(a)} fields){'' if not diff else ': ' + ', '.join(diff[:8])}")
sys.exit(1 if diff else 0)
PY
done
exit $status
