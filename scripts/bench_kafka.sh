#!/usr/bin/env bash
# End-to-end Kafka benchmark: throughput against a no-op consume->produce
# pipe on the same broker in the same run, and p50/p99 latency at a fixed
# rate. Starts the test broker unless KAFKA_BOOTSTRAP is set.
#   BENCH_MESSAGES (50000)  BENCH_RATE (10000/s)  BENCH_SECONDS (5)
#   BENCH_BIN (target/release/classifyd: another build to compare)
#   BENCH_FETCH_WAIT_MS (10: fetch.wait.max.ms of classifyd and the no-op pipe)
#   BENCH_TRACE=1: also the worst latency in each 200 ms of sending
#   BENCH_BROKER=mock: librdkafka's mock cluster, inside the bench process,
#     instead of the test broker (no broker process on the shared cores); it
#     keeps only the last 5 MB of a partition, so at most 10,000 messages and
#     BENCH_RATE x BENCH_SECONDS <= 20,000
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
if [[ -z ${KAFKA_BOOTSTRAP:-} && ${BENCH_BROKER:-} != mock ]]; then
  export CLASSIFYD_BROKER_RUN=${TMPDIR:-/tmp}/classifyd-bench-broker-$$
  trap 'scripts/broker.sh stop' EXIT
  scripts/broker.sh start >/dev/null
  KAFKA_BOOTSTRAP=$(cat "$CLASSIFYD_BROKER_RUN/bootstrap")
  export KAFKA_BOOTSTRAP
fi
cargo bench --bench kafka_e2e
