#!/usr/bin/env bash
# The project's test command: fetches the models (every shipped profile's, Qwen2.5-Coder-1.5B
# included; a no-op when present), then runs every test of the workspace (unit,
# property, real-model integration, gRPC over loopback) with nextest, and the doctests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/quorum-target}
scripts/fetch-models.sh >/dev/null
cargo nextest run --workspace --no-fail-fast
cargo test --workspace --doc
