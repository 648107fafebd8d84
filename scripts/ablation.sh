#!/usr/bin/env bash
# The ablation table of docs/accuracy.md: `classifyd eval --json` on the four
# shared streams for each variant (the defaults plus the flags of its row).
# Spam streams: progressive accuracy, 1-ROCA % and examples/s; topics:
# Reuters-21578 test micro-F1 and 20 Newsgroups test accuracy (after the
# default 5 passes). A row whose flags cannot change a topic stream (fusion
# is for binary tasks) skips the topics with --spam-only.
#
#   scripts/ablation.sh [DATA_DIR [ROWS_FILE]]
# ROWS_FILE holds one "name|flags[|spam-only]" per line; without it, the
# rows of docs/accuracy.md.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-${CLASSIFYD_DATA:-../shared/data}}
rows_file=${2:-}
cargo build --release -q
bin=target/release/classifyd

rows() {
  if [[ -n $rows_file ]]; then
    cat "$rows_file"
  else
    cat <<'EOF'
defaults|
before fusion (2^20 shared buckets, no fusion)|--bits 20 --split-views false --fusion false
split views, no fusion|--fusion false
fusion in 2^20 buckets (2^19 per view)|--bits 20
fusion rate 0.03|--fusion-rate 0.03|spam-only
fusion rate 0.1|--fusion-rate 0.1|spam-only
fusion alpha 0.003|--fusion-alpha 0.003|spam-only
fusion alpha 0.03|--fusion-alpha 0.03|spam-only
hinge|--model hinge|spam-only
hinge, no fusion|--model hinge --fusion false|spam-only
perceptron|--model perceptron|spam-only
perceptron, no fusion|--model perceptron --fusion false|spam-only
naive Bayes (words and characters)|--model naive-bayes --fusion false|spam-only
binary values|--value binary
character 4-grams only|--char-ngrams 4
character 2- to 5-grams|--char-ngrams 2-5
character 3- to 5-grams|--char-ngrams 3-5
characters from 10,000 bytes|--char-prefix-bytes 10000
lowercase characters|--char-lowercase true
word trigrams|--ngrams 3
2^22 buckets|--bits 22
no IDF|--idf false
learning rate 0.35|--learning-rate 0.35
learning rate 0.25|--learning-rate 0.25
averaged weights|--average true
TREC-style features (binary char 4-grams, 2^22, no IDF)|--value binary --idf false --char-ngrams 4 --bits 22 --split-views false --fusion false
EOF
  fi
}

eval_json() { # file flags... -> the report
  "$bin" eval --json --input "$@" 2>/dev/null
}

echo "| variant | SMS accuracy | SMS 1-ROCA % | SMS ex/s | SpamAssassin accuracy | SpamAssassin 1-ROCA % | SpamAssassin ex/s | Reuters test micro-F1 | 20 Newsgroups test accuracy | flags |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
rows | while IFS='|' read -r name flags only; do
  [[ -n $name ]] || continue
  read -ra f <<<"$flags"
  cells=""
  for s in sms_spam_collection spamassassin; do
    cells+=$(eval_json "$data/$s/stream.jsonl" "${f[@]}" | python3 -c '
import json, sys
r = json.load(sys.stdin); p = r["progressive"]
rate = "{:,.0f}".format(r["examples_per_second"])
print("| %.4f | %.3f | %s " % (p["accuracy"], p["one_minus_roca_percent"], rate), end="")')
  done
  if [[ $only == spam-only ]]; then
    cells+="| (binary only) | (binary only) "
  else
    cells+=$(eval_json "$data/reuters21578/stream.jsonl" "${f[@]}" | python3 -c '
import json, sys
print("| %.4f " % json.load(sys.stdin)["test"]["micro_f1"], end="")')
    cells+=$(eval_json "$data/20newsgroups/stream.jsonl" "${f[@]}" | python3 -c '
import json, sys
print("| %.4f " % json.load(sys.stdin)["test"]["accuracy"], end="")')
  fi
  echo "| $name $cells| \`${flags:-(none)}\` |"
done
