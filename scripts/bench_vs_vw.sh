#!/usr/bin/env bash
# End-to-end eval throughput against Vowpal Wabbit's command line, on the same
# files, in the same run (the machines are shared and noisy: compare ratios).
#
#   scripts/bench_vs_vw.sh [DATA_DIR] [RUNS]
#
# DATA_DIR defaults to ../shared/data; BENCH_BIN=PATH times that binary
# instead of building this checkout. VW runs through ../shared/tools/peers
# (its harness times VW's own driver on a pre-formatted file); the venv is
# made in .venv-peers on first use. classifyd runs twice per file: with VW's
# features (lowercased word unigrams + bigrams, 2^20 buckets, no character
# n-grams, no IDF) and with its defaults. Prints medians over RUNS runs:
# wall seconds, and message-text MB per wall second and per CPU second (eval
# reads and featurizes on one thread while the model learns on another, so
# the second is the throughput per core).
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data}
runs=${2:-5}
peers=../shared/tools/peers
if [[ ! -x .venv-peers/bin/python ]]; then
  python3 -m venv .venv-peers
  .venv-peers/bin/pip install -q -r "$peers/requirements.txt"
fi
# BENCH_BIN runs another build (e.g. an older commit's, for an A/B in one session).
bin=${BENCH_BIN:-target/release/classifyd}
[[ -n ${BENCH_BIN:-} ]] || cargo build --release -q
report=$(mktemp)
trap 'rm -f "$report"' EXIT
seconds() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["seconds"], r["cpu_seconds"])' "$1"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf '| stream | text MB | VW wall s | classifyd (VW features) wall s | VW/classifyd | MB/s | MB/CPU-s | classifyd (defaults) wall s | MB/s | MB/CPU-s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for name in sms_spam_collection spamassassin; do
  f=$data/$name/stream.jsonl
  mb=$(python3 -c "import json,sys; print(sum(len(json.loads(l)['text'].encode()) for l in open('$f'))/1e6)")
  vw=(); ours=(); ocpu=(); dflt=(); dcpu=()
  for _ in $(seq "$runs"); do
    vw+=("$(.venv-peers/bin/python "$peers/run_peers.py" "$f" --peers vw_cli --json /tmp/classifyd-vw.json >/dev/null 2>&1 &&
      python3 -c "import json; print(json.load(open('/tmp/classifyd-vw.json'))['results'][0]['wall_s'])")")
    # The report goes to a file and is read after the run: a python3
    # reading the pipe starts while `eval` runs and takes a core from it
    # (SpamAssassin: 0.11-0.12 s piped against 0.08-0.09 s, back to back).
    $bin eval --input "$f" --json --char-ngrams 0 --idf false --bits 20 --split-views false --fusion false >"$report"
    read -r s c < <(seconds "$report")
    ours+=("$s"); ocpu+=("$c")
    $bin eval --input "$f" --json >"$report"
    read -r s c < <(seconds "$report")
    dflt+=("$s"); dcpu+=("$c")
  done
  v=$(printf '%s\n' "${vw[@]}" | median); o=$(printf '%s\n' "${ours[@]}" | median); d=$(printf '%s\n' "${dflt[@]}" | median)
  oc=$(printf '%s\n' "${ocpu[@]}" | median); dc=$(printf '%s\n' "${dcpu[@]}" | median)
  python3 -c "print(f'| $name | {$mb:.1f} | {$v:.3f} | {$o:.3f} | {$v/$o:.2f} | {$mb/$o:.1f} | {$mb/$oc:.1f} | {$d:.3f} | {$mb/$d:.1f} | {$mb/$dc:.1f} |')"
done
