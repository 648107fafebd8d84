#!/usr/bin/env bash
# The whole loop on one machine without Docker, as plain processes: the test
# broker (scripts/broker.sh), classifyd, Prometheus (Debian's package)
# scraping it with the alert rules, and the demo producer streaming the SMS
# collection with some labels held back and sent later as feedback.
# Prints where to look; Ctrl-C stops everything (classifyd checkpoints first).
#
#   deploy/local.sh            (state in ${TMPDIR:-/tmp}/classifyd-local)
set -euo pipefail
cd "$(dirname "$0")/.."
state=${CLASSIFYD_LOCAL_DIR:-${TMPDIR:-/tmp}/classifyd-local}
kafka_port=${KAFKA_PORT:-19092}
metrics=127.0.0.1:${METRICS_PORT:-9464}
prom=127.0.0.1:${PROMETHEUS_PORT:-9090}
# The test broker keeps its data in memory: a new broker has new topics, so
# the offsets in an old checkpoint would point past their ends. Start clean.
rm -rf "$state/checkpoints" "$state/tsdb"
mkdir -p "$state"
if ! command -v prometheus >/dev/null 2>&1; then
  sudo=""; [[ $(id -u) -eq 0 ]] || sudo=sudo
  $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
cargo build --release -q
bin=target/release/classifyd
export CLASSIFYD_BROKER_RUN=$state/broker
pids=()
cleanup() {
  trap - INT TERM EXIT
  echo "stopping..."
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  scripts/broker.sh stop
}
trap cleanup INT TERM EXIT
scripts/broker.sh start "$kafka_port" >/dev/null
brokers=127.0.0.1:$kafka_port
# Short sessions: the test broker holds a first group join for the session timeout.
"$bin" run --brokers "$brokers" --checkpoint-dir "$state/checkpoints" --metrics-addr "$metrics" \
  --checkpoint-interval-secs 10 -X session.timeout.ms=6000 --log info >"$state/classifyd.log" 2>&1 &
pids+=($!)
sed "s/127.0.0.1:9464/$metrics/" deploy/prometheus/prometheus.yml >"$state/prometheus.yml"
cp deploy/prometheus/alerts.yml "$state/alerts.yml"
prometheus --config.file="$state/prometheus.yml" --storage.tsdb.path="$state/tsdb" \
  --web.listen-address="$prom" >"$state/prometheus.log" 2>&1 &
pids+=($!)
"$bin" demo-produce --brokers "$brokers" --input tests/data/sms_head1000.jsonl --rate 50 --loop \
  >"$state/producer.log" 2>&1 &
pids+=($!)
cat <<MSG
classifyd loop is up (logs and state in $state):
  metrics      http://$metrics/metrics   (health: /healthz, /readyz)
  Prometheus   http://$prom/graph?g0.expr=classifyd_progressive_accuracy_ratio
  accuracy     curl -s 'http://$prom/api/v1/query?query=classifyd_progressive_accuracy_ratio'
  predictions  topic "predictions" on $brokers
Ctrl-C stops everything.
MSG
wait -n "${pids[@]}" || true
