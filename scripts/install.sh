#!/usr/bin/env bash
# Installs `quorum` and the adapters it ships under one prefix, so that it runs the default
# configuration from any directory:
#   PREFIX/bin/quorum                  (cargo install --path server --features duckdb)
#   PREFIX/share/quorum/adapters/      (found beside the binary's directory)
#   scripts/install.sh [PREFIX]        (default ~/.local)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${1:-$HOME/.local}"
# With DuckDB (CSV, Parquet and DuckDB files as databases): compiled from C++ source once.
cargo install --locked --path "$repo/server" --root "$prefix" --features duckdb
mkdir -p "$prefix/share/quorum"
rm -rf "$prefix/share/quorum/adapters"
cp -r "$repo/adapters" "$prefix/share/quorum/adapters"
# A run still training keeps its resumable state in checkpoint/: training state, not served.
rm -rf "$prefix/share/quorum/adapters"/*/checkpoint
echo "installed $prefix/bin/quorum with its adapters in $prefix/share/quorum/adapters"
echo "models: scripts/fetch-models.sh (QUORUM_MODELS_DIR); databases: quorum serve --database-dir DIR"
