#!/usr/bin/env bash
# Throughput and latency of N replicas behind nginx's gRPC proxy, on loopback: starts N
# `quorum serve` replicas (SmolLM2), waits until each is SERVING, runs the load generator
# (`quorum-load`: streaming Inference.Generate from concurrent clients) against nginx, prints its
# JSON report with the replica count and this CPU's flags. Run it for 1 and for 3 replicas to
# compare (docs/RESULTS.md).
#   scripts/replicas_load.sh N [quorum-load flags, e.g. --requests 96 --clients 12]
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quorum-target}"
target="$CARGO_TARGET_DIR"
replicas="${1:?usage: scripts/replicas_load.sh N [quorum-load flags]}"
shift
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

(cd "$repo" && cargo build --quiet -p quorum-server --bin quorum -p quorum-benches --bin quorum-load)
# shellcheck source=scripts/replicas_lib.sh
. "$repo/scripts/replicas_lib.sh"
start_replicas "$replicas"
for port in "${ports[@]}"; do
    for _ in $(seq 1 600); do
        "$target/debug/quorum" health --server "http://127.0.0.1:$port" >/dev/null 2>&1 && break
        sleep 0.5
    done
    "$target/debug/quorum" health --server "http://127.0.0.1:$port" >/dev/null 2>&1 \
        || { echo "replica on $port never became SERVING" >&2; exit 1; }
done
start_nginx
sleep 0.5
flags="$(grep -m1 flags /proc/cpuinfo)"
isa=avx2
[[ " $flags " == *" avx512_vnni "* ]] && isa=avx512_vnni
echo "replicas: $replicas; cpu: $isa; nproc: $(nproc)"
"$target/debug/quorum-load" --server "http://127.0.0.1:$lb_port" "$@"
