#!/usr/bin/env bash
# One model, many instances, through a real broker: published accuracy of
# one standalone daemon, two in one group, and one learner with two
# predictors on the SMS stream (demo-produce, one label in five late);
# model staleness p50/p99 and bytes published; predict-path throughput and
# peak RSS of a standalone daemon, one predictor and two. Starts the test
# broker unless KAFKA_BOOTSTRAP is set.
#   BENCH_DATA (../shared/data/sms_spam_collection/stream.jsonl)
#   BENCH_RATE (500 msg/s)  BENCH_MESSAGES (50000)
#   BENCH_LOG (the daemons' CLASSIFYD_LOG, warn)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
if [[ -z ${KAFKA_BOOTSTRAP:-} ]]; then
  export CLASSIFYD_BROKER_RUN=${TMPDIR:-/tmp}/classifyd-bench-broker-$$
  trap 'scripts/broker.sh stop' EXIT
  scripts/broker.sh start >/dev/null
  KAFKA_BOOTSTRAP=$(cat "$CLASSIFYD_BROKER_RUN/bootstrap")
  export KAFKA_BOOTSTRAP
fi
cargo bench --bench replicas
