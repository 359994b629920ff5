#!/usr/bin/env bash
# Checks the crate dependency graph against ARCHITECTURE.md: a workspace crate may depend only on
# the workspace crates listed for it here.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
allowed = {
    "quorum-proto": set(),
    "quorum-kernels": set(),
    "quorum-weights": set(),
    "quorum-sql": set(),
    "quorum-eval": {"quorum-sql"},
    "quorum-models": {"quorum-kernels", "quorum-weights"},
    "quorum-engine": {"quorum-models", "quorum-kernels", "quorum-weights"},
    "quorum-training": {"quorum-models", "quorum-weights", "quorum-sql"},
    "quorum-postgres": {"quorum-sql"},
    "quorum-mysql": {"quorum-sql"},
    "quorum-duckdb": {"quorum-sql"},
}
meta = json.load(sys.stdin)
ws = {p["name"] for p in meta["packages"]}
bad = []
for p in meta["packages"]:
    if p["name"] not in allowed:
        continue  # server, tests, benches may depend on anything
    for d in p["dependencies"]:
        if d["name"] in ws and d.get("kind") in (None, "normal") and d["name"] not in allowed[p["name"]]:
            bad.append(p["name"] + " -> " + d["name"])
if bad:
    print("forbidden workspace dependencies:\n  " + "\n  ".join(bad))
    sys.exit(1)
print("dependency graph ok")
'
