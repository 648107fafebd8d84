#!/usr/bin/env bash
# The project's test command (the README's): every unit, integration and doc
# test, in release mode (the learners are slow unoptimised), against a real
# Kafka-protocol broker on 127.0.0.1 and a real Prometheus server; then the
# web console in a real browser (headless Debian chromium).
#
# Without KAFKA_BOOTSTRAP it installs (once) and starts the test broker
# (scripts/broker.sh) and stops it at the end. To run the same tests against
# Apache Kafka or Redpanda, export KAFKA_BOOTSTRAP=host:port (topics are
# created by the tests; the outage test also needs KAFKA_BROKER_PID, the pid
# of a broker it may pause, or skip it with: -- --skip broker_paused).
#
# The whole suite on its own brokers runs the two outage binaries, which
# pause their broker (SIGSTOP) for seconds at a time, on a second broker
# beside the rest of the suite, which never sees a pause: they wait more
# than they work, and about 100 of the suite's 330 s of tests overlap.
set -euo pipefail
cd "$(dirname "$0")/.."
own_brokers=0
outage_run=${TMPDIR:-/tmp}/classifyd-broker-outage-$$
if [[ -z ${KAFKA_BOOTSTRAP:-} ]]; then
  own_brokers=1
  export CLASSIFYD_BROKER_RUN=${TMPDIR:-/tmp}/classifyd-broker-$$
  trap 'scripts/broker.sh stop; CLASSIFYD_BROKER_RUN=$outage_run scripts/broker.sh stop' EXIT
  scripts/broker.sh start >/dev/null
  KAFKA_BOOTSTRAP=$(cat "$CLASSIFYD_BROKER_RUN/bootstrap")
  KAFKA_BROKER_PID=$(cat "$CLASSIFYD_BROKER_RUN/broker.pid")
  export KAFKA_BOOTSTRAP KAFKA_BROKER_PID
  echo "test broker (tansu) on $KAFKA_BOOTSTRAP, pid $KAFKA_BROKER_PID" >&2
fi
# Debian's packages: Prometheus for the scrape test (and promtool for
# deploy/check.sh); the mail protocols' own clients, spamc (tests/spamd.rs)
# and rspamd's rspamc (tests/rspamd.rs; the rspamd daemon is not started).
packages=()
command -v prometheus >/dev/null 2>&1 || packages+=(prometheus)
command -v spamc >/dev/null 2>&1 || packages+=(spamc)
command -v rspamc >/dev/null 2>&1 || packages+=(rspamd)
# The console's browser test (tests/browser/console_test.py): Debian's
# chromium, driven by Playwright from PyPI through its executable path.
command -v chromium >/dev/null 2>&1 || packages+=(chromium)
if [[ ${#packages[@]} -gt 0 ]]; then
  sudo=""; [[ $(id -u) -eq 0 ]] || sudo=sudo
  $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi
export PROMETHEUS_BIN=${PROMETHEUS_BIN:-$(command -v prometheus)}
python3 -c 'import playwright' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check 'playwright>=1.40,<2'
if [[ $# -gt 0 || $own_brokers -eq 0 ]]; then
  cargo test --release "$@"
else
  # Everything built first, then the outage binaries on their broker
  # beside the rest (their output after the rest's).
  cargo test --release --no-run
  CLASSIFYD_BROKER_RUN=$outage_run scripts/broker.sh start >/dev/null
  outage=(--test kafka_outage --test kafka_outage_lessons)
  others=()
  for f in tests/*.rs; do
    name=$(basename "$f" .rs)
    [[ $name == kafka_outage || $name == kafka_outage_lessons ]] || others+=(--test "$name")
  done
  outage_log=$outage_run/tests.log
  (
    KAFKA_BOOTSTRAP=$(cat "$outage_run/bootstrap") KAFKA_BROKER_PID=$(cat "$outage_run/broker.pid") \
      cargo test --release "${outage[@]}" >"$outage_log" 2>&1
  ) &
  outage_pid=$!
  status=0
  cargo test --release --lib --bins "${others[@]}" || status=$?
  cargo test --release --doc || status=$?
  wait "$outage_pid" || status=$?
  echo "--- the outage tests, on a broker of their own:"
  cat "$outage_log"
  [[ $status -eq 0 ]] || exit "$status"
fi
# The whole suite (no test named) ends with the console in a real browser.
if [[ $# -eq 0 ]]; then
  python3 tests/browser/console_test.py
fi
