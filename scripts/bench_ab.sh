#!/usr/bin/env bash
# The speed guard: this checkout's `eval` against another commit's, runs
# alternated in one session (these machines are noisy: only ratios taken
# in the same run mean anything). Run it against the last landed commit
# before every stop that touches src/, and put its table in the note; a
# ratio under 0.95 is explained or fixed. Beside the times, each build's
# peak RSS (the highest of its runs), so that a memory regression shows
# the day it lands, as a speed one does.
#
#   scripts/bench_ab.sh REV [RUNS]        RUNS: alternated pairs (default 5)
#
# REV is built in a worktree (target dir shared with this checkout, so only
# classifyd itself compiles; each build's binary is kept under target/ab/ by
# commit, so a second run against the same REV builds nothing). Streams:
# SMS, SpamAssassin text, raw SpamAssassin (scripts/email_stream.py) and 20
# Newsgroups, each with the defaults and with Vowpal Wabbit's features. For
# each, the median wall seconds of both builds and their ratio (REV's over
# this build's: over 1 means this build is faster), and whether both
# builds' reports agree (every field but the timings, on the fields both
# builds report).
#
# Environment: DATA (../shared/data), STREAMS (names to run, space
# separated: sms sa sa_raw news; reuters too), AB_BIN (a binary to use as this build's,
# skipping the build), COMMAND (eval, the default, or run: the daemon on
# JSON lines, `run --input S --output F --checkpoint-dir D`, timed whole;
# its "report" is the checkpoint's `inspect --json` and the predictions'
# SHA-256, so "identical" means the same model and the same outputs).
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: scripts/bench_ab.sh REV [RUNS]}
runs=${2:-5}
data=${DATA:-../shared/data}
streams=${STREAMS:-sms sa sa_raw news}
root=$PWD
mkdir -p target/ab
sha=$(git rev-parse --verify "$rev^{commit}")
base=target/ab/classifyd-${sha:0:12}

if [[ ! -x $base ]]; then
  tree=$(mktemp -d "${TMPDIR:-/tmp}/classifyd-ab-XXXXXX")
  git worktree add -q --detach "$tree" "$sha"
  (cd "$tree" && CARGO_TARGET_DIR=$root/target cargo build --release -q --bin classifyd)
  cp target/release/classifyd "$base"
  git worktree remove --force "$tree"
  # Cargo names a workspace's outputs by paths relative to it, so REV's
  # build wrote this checkout's library and fingerprints, newer than this
  # checkout's sources: a plain `cargo build` would then find them fresh
  # and leave REV's binary in place. Cleaning classifyd's own outputs
  # makes the build below compile this checkout again (the dependencies
  # stay built).
  cargo clean --release -q -p classifyd
fi
if [[ -n ${AB_BIN:-} ]]; then
  ours=$AB_BIN
else
  # Built after REV (and its cleaning) so that target/release/classifyd
  # is this checkout's again.
  cargo build --release -q --bin classifyd
  ours=target/ab/classifyd-current
  cp target/release/classifyd "$ours"
fi

raw=target/ab/sa_raw.jsonl
[[ -s $raw ]] || python3 scripts/email_stream.py --raw "$data/spamassassin/raw" >"$raw"
file_of() {
  case $1 in
    sms) echo "$data/sms_spam_collection/stream.jsonl" ;;
    sa) echo "$data/spamassassin/stream.jsonl" ;;
    sa_raw) echo "$raw" ;;
    news) echo "$data/20newsgroups/stream.jsonl" ;;
    reuters) echo "$data/reuters21578/stream.jsonl" ;;
    *) echo "unknown stream $1" >&2; exit 2 ;;
  esac
}
vw_flags=(--ngrams 2 --char-ngrams 0 --bits 20 --model logistic --split-views false --fusion false)

report=$(mktemp -d)
trap 'rm -rf "$report"' EXIT
# One eval; prints its wall seconds. The report goes to a file and is read
# after the run (a reader on the pipe would take a core from it).
command=${COMMAND:-eval}
# Peak RSS of each run, by GNU time (Debian's `time`), into "$out.rss";
# without it the column reads "-".
timed=()
[[ -x /usr/bin/time ]] && timed=(/usr/bin/time -q -f %M -o)
one() {
  local bin=$1 out=$2
  shift 2
  local measure=()
  [[ ${#timed[@]} -gt 0 ]] && measure=("${timed[@]}" "$out.rss")
  if [[ $command == run ]]; then
    local ck start end
    ck=$(mktemp -d "$report/ck-XXXXXX")
    start=$(date +%s.%N)
    "${measure[@]}" "$bin" --log warn run "$@" --output "$out.pred" --checkpoint-dir "$ck" 2>/dev/null
    end=$(date +%s.%N)
    "$bin" inspect --json --checkpoint-dir "$ck" | python3 -c '
import hashlib, json, sys
report = json.load(sys.stdin)
report.pop("checkpoint", None)
report["predictions_sha256"] = hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()
json.dump(report, open(sys.argv[2], "w"))' "$out.pred" "$out"
    rm -rf "$ck" "$out.pred"
    python3 -c "print($end - $start)"
    return
  fi
  "${measure[@]}" "$bin" eval --json "$@" >"$out" 2>/dev/null
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"])' "$out"
}
# Whether two reports agree on every field but the timings: "identical",
# "identical (+ new fields)" when one build reports fields the other has
# not (compared on the fields both have), else "DIFFER: <first field>".
agree() {
  python3 -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
extra = []
def diff(x, y, path):
    if isinstance(x, dict) and isinstance(y, dict):
        if set(x) != set(y):
            extra.append(path)
        for k in sorted(set(x) & set(y)):
            if "second" in k or k in ("build", "peak_rss_bytes"):
                continue
            d = diff(x[k], y[k], path + "." + k)
            if d:
                return d
        return None
    return None if x == y else path or "."
d = diff(a, b, "")
print("DIFFER: " + d if d else "identical" + (" (+ new fields)" if extra else ""))' "$1" "$2"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

printf 'A/B of %s against %s (%s), %s alternated pairs, medians of wall seconds\n\n' "$command" "$rev" "${sha:0:12}" "$runs"
printf '| stream | flags | %s s | this build s | ratio | %s peak RSS MB | this build MB | reports |\n|---|---|---:|---:|---:|---:|---:|---|\n' "${sha:0:7}" "${sha:0:7}"
for s in $streams; do
  f=$(file_of "$s")
  for flags in defaults vw; do
    args=(--input "$f")
    [[ $flags == vw ]] && args+=("${vw_flags[@]}")
    a=(); b=(); ra=(); rb=()
    for _ in $(seq "$runs"); do
      a+=("$(one "$base" "$report/a.json" "${args[@]}")")
      ra+=("$(cat "$report/a.json.rss" 2>/dev/null || echo 0)")
      b+=("$(one "$ours" "$report/b.json" "${args[@]}")")
      rb+=("$(cat "$report/b.json.rss" 2>/dev/null || echo 0)")
    done
    same=$(agree "$report/a.json" "$report/b.json")
    ma=$(printf '%s\n' "${a[@]}" | median)
    mb=$(printf '%s\n' "${b[@]}" | median)
    # The highest peak of the runs, in MB (KiB from time).
    pa=$(printf '%s\n' "${ra[@]}" | sort -g | tail -1)
    pb=$(printf '%s\n' "${rb[@]}" | sort -g | tail -1)
    python3 -c "
rss = lambda k: f'{k / 1024:.0f}' if k else '-'
print(f'| $s | $flags | {$ma:.3f} | {$mb:.3f} | {$ma/$mb:.2f} | {rss($pa)} | {rss($pb)} | $same |')"
  done
done
