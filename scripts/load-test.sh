#!/usr/bin/env bash
# Load test over loopback: starts `quorum serve` (default models), waits until ready, sends 200
# streaming Inference.Generate requests from 32 concurrent clients to Qwen2.5-Coder-0.5B, prints
# the JSON report, stops the server. Bounded in requests and time.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/quorum-target}
ADDR=127.0.0.1:${QUORUM_PORT:-50061}
cargo build -p quorum-server --bin quorum -p quorum-benches --bin quorum-load
Q=$CARGO_TARGET_DIR/debug/quorum
"$Q" serve --listen "$ADDR" --metrics-listen "" >/tmp/quorum-load-server.log 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null' EXIT
# Readiness: a question through the full path.
"$Q" ask --server "http://$ADDR" --wait-secs 900 "How many singers do we have?" >/dev/null
"$CARGO_TARGET_DIR/debug/quorum-load" --server "http://$ADDR" "$@"
