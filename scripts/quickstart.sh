#!/usr/bin/env bash
# Quick start: fetch the default models, build `quorum`, serve the default models over the Spider
# dev databases on loopback, ask one question through gRPC, print the answer, stop the server.
#   scripts/quickstart.sh ["question" [db_id]]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/quorum-target}
QUESTION=${1:-How many singers do we have?}
DB=${2:-concert_singer}
ADDR=127.0.0.1:${QUORUM_PORT:-50051}

scripts/fetch-models.sh >/dev/null
cargo build -p quorum-server --bin quorum
Q=$CARGO_TARGET_DIR/debug/quorum
LOG=$(mktemp)
"$Q" serve --listen "$ADDR" --metrics-listen "" >"$LOG" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -f "$LOG"' EXIT
if ! "$Q" ask --server "http://$ADDR" --db "$DB" --wait-secs 900 "$QUESTION"; then
  echo "--- server log ---" >&2; tail -40 "$LOG" >&2; exit 1
fi
