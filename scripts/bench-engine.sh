#!/usr/bin/env bash
# The engine benchmark as docs/RESULTS.md reports it: ROUNDS interleaved rounds of
# quorum-bench-engine as shipped, with every matrix in Q8_0 (the server's CPU default), and the
# latter with candle's default spin limit (an ablation, no reference loop); one JSON file per
# run in OUT, then medians. Usage: scripts/bench-engine.sh [OUT] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/quorum-target}
OUT=${1:-/tmp/quorum-bench-engine}
ROUNDS=${2:-3}
mkdir -p "$OUT"
cargo build -q -p quorum-benches --bin quorum-bench-engine
B=$CARGO_TARGET_DIR/debug/quorum-bench-engine
for r in $(seq 1 "$ROUNDS"); do
  "$B" >"$OUT/shipped-$r.json"
  "$B" --all-q8-0 >"$OUT/allq8-$r.json"
  CANDLE_BARRIER_POOL_SPIN_LIMIT=25000 "$B" --all-q8-0 --no-reference >"$OUT/allq8-spin25k-$r.json"
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
keys = ["single_stream_decode_tok_s", "decode_phase_tok_s", "decode_phase_over_single",
        "aggregate_tok_s", "aggregate_over_single", "cold_ttft_s", "warm_over_cold"]
for cfg in ["shipped", "allq8", "allq8-spin25k"]:
    runs = [[json.loads(l) for l in open(f"{out}/{cfg}-{r}.json") if l.strip()]
            for r in range(1, rounds + 1)]
    row = {k: statistics.median(run[0][k] for run in runs) for k in keys}
    if all(len(run) > 1 for run in runs):
        row["reference_wall_clock_ratio"] = statistics.median(run[1]["wall_clock_ratio"] for run in runs)
    print(cfg, json.dumps({k: round(v, 3) for k, v in row.items()}))
PY
