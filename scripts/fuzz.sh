#!/usr/bin/env bash
# Fuzzes every target in fuzz/ (cargo-fuzz, on the nightly toolchain these
# machines have): input message parsing and the pipeline behind it,
# tokenizing and feature extraction, checkpoint decoding, model-topic
# records, raw e-mail, the mail protocols. Each target starts from a seed corpus made from tests/data and
# keeps what it finds in fuzz/corpus (not committed); a crash stops the
# script with the input in fuzz/artifacts.
#
#   scripts/fuzz.sh [RUNS]    each target for RUNS inputs (default 1000000)
#   FUZZ_SANITIZER            cargo-fuzz's sanitizer (default address)
#
# .ci/run runs it short (10000 inputs a target) and without a sanitizer
# (every dependency built again with AddressSanitizer took a minute more of
# CI; a panic is a crash either way, and the safe code is bounds-checked);
# docs/reliability.md has the figures of a long run, which keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1000000}
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "scripts/fuzz.sh needs the nightly toolchain (rustup's 'nightly'), which these machines have" >&2
  exit 1
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
root=$PWD
# Seeds: the SMS lines (messages and texts), a real checkpoint, real model records.
seed=$(mktemp -d)
trap 'rm -rf "$seed"' EXIT
cargo build --release -q
for t in message features checkpoint model_record email mail; do mkdir -p "fuzz/corpus/$t"; done
# Small seeds: a run handles every line of its input through the pipeline.
rm -f fuzz/corpus/message/sms_demo
split -l 8 -a 3 <(head -n 200 tests/data/sms_demo.jsonl) fuzz/corpus/message/sms-
head -n 50 tests/data/sms_head1000.jsonl | python3 -c '
import json, sys
for i, l in enumerate(sys.stdin):
    open(sys.argv[1] + "/sms-%d" % i, "w").write(json.loads(l)["text"])' fuzz/corpus/features
target/release/classifyd run --bits 12 --input tests/data/sms_head1000.jsonl --output /dev/null \
  --checkpoint-dir "$seed/ck" 2>/dev/null
cp "$(ls "$seed"/ck/*.ckpt | tail -n 1)" fuzz/corpus/checkpoint/sms
# Raw e-mail: the first 200 SpamAssassin messages, each cut to 4 KiB.
raw=../shared/data/spamassassin/raw
if [[ -d $raw ]]; then
  sed -n '2,201p' "$raw/index.tsv" | while IFS=$'\t' read -r pos _ _ file; do
    head -c 4096 "$raw/$file" > "fuzz/corpus/email/sa-$pos"
  done
fi
# mail: the heads spamc sends.
printf 'CHECK SPAMC/1.5\r\nUser: root\r\nContent-length: 12\r\n\r\nSubject: x\r\n' > fuzz/corpus/mail/check
printf 'TELL SPAMC/1.5\r\nMessage-class: spam\r\nSet: local,remote\r\nUser: root\r\nContent-length: 0\r\n\r\n' > fuzz/corpus/mail/tell
printf 'TELL SPAMC/1.5\r\nMessage-class: ham\r\nSet: local\r\nRemove: remote\r\n\r\n' > fuzz/corpus/mail/revoke
printf 'PING SPAMC/1.5\r\n\r\n' > fuzz/corpus/mail/ping
cd fuzz
for t in message features checkpoint model_record email mail; do
  out=$(cargo +nightly fuzz run -O -s "${FUZZ_SANITIZER:-address}" "$t" "corpus/$t" -- -runs="$runs" -rss_limit_mb=2048 -max_len=4096 2>&1) || {
    echo "$out" | tail -n 40
    echo "fuzz target $t failed: see fuzz/artifacts/$t" >&2
    exit 1
  }
  echo "$t: $(echo "$out" | grep -E '^Done [0-9]+ runs' | tail -n 1)"
done
cd "$root"
