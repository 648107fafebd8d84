#!/usr/bin/env bash
# Requests while the daemon learns (issue 42, docs/http.md): a standalone
# JSON-lines daemon learns a stream read from stdin, checkpointing every
# 2 s, while scripts/http_load.py sends POST /v1/classify at a steady rate.
# Prints http_load.py's JSON (latency percentiles from each request's
# scheduled time) and the daemon's peak RSS.
#
#   scripts/http_while_learning.sh [BIN] [STREAM] [RATE] [SECONDS]
#
# BIN defaults to target/release/classifyd, STREAM to 20 Newsgroups (the
# largest model of the shared streams), RATE to 100/s, SECONDS to 25.
# With SPAMD=1 the load is spamd's CHECK on --spamd-addr (docs/mail.md)
# instead of POST /v1/classify.
# With BROKERS=host:port, a Kafka learner (--role learner, publishing to a
# model topic) learns the stream from an input topic instead (produced
# first, labels with every message: demo-produce --holdback-every 0).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/target/release/classifyd}
stream=${2:-$here/../shared/data/20newsgroups/stream.jsonl}
rate=${3:-100}
seconds=${4:-25}
port=${PORT:-18931}
front=(--http-addr "127.0.0.1:$port")
load=()
if [[ -n ${SPAMD:-} ]]; then
    front=(--spamd-addr "127.0.0.1:$port")
    load=(--spamd)
fi
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT

# The stream twice, so that learning outlasts the load.
cat "$stream" "$stream" >"$work/twice.jsonl"
if [[ -n ${BROKERS:-} ]]; then
    t=httpload$$
    "$bin" --log warn demo-produce --brokers "$BROKERS" --input "$work/twice.jsonl" --rate 0 \
        --holdback-every 0 --input-topic "$t-in" --feedback-topic "$t-fb"
    "$bin" --log warn run --brokers "$BROKERS" --role learner --input-topic "$t-in" \
        --feedback-topic "$t-fb" --output-topic "$t-out" --model-topic "$t-model" --group-id "$t" \
        --checkpoint-dir "$work/ck" --checkpoint-interval-secs 2 "${front[@]}" &
else
    "$bin" --log warn run --input - --output "$work/out.jsonl" \
        --checkpoint-dir "$work/ck" --checkpoint-interval-secs 2 \
        "${front[@]}" <"$work/twice.jsonl" &
fi
pid=$!
for _ in $(seq 1 300); do
    if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then
        break
    fi
    sleep 0.1
done
python3 "$here/scripts/http_load.py" --addr "127.0.0.1:$port" --rate "$rate" --seconds "$seconds" \
    --messages "$stream" "${load[@]}"
echo "daemon peak RSS: $(awk '/VmHWM/ {print $2, $3}' "/proc/$pid/status")"
