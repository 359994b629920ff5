#!/usr/bin/env bash
# The project's test command: fetches the models (the default ones and the accurate profile's
# Qwen2.5-Coder-1.5B; a no-op when present), then runs every test of the workspace (unit,
# property, real-model integration, gRPC over loopback) with nextest, and the doctests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/quorum-target}
scripts/fetch-models.sh --with-1.5b >/dev/null
cargo nextest run --workspace --no-fail-fast
cargo test --workspace --doc
