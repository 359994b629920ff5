#!/usr/bin/env bash
# A short device call: the engine's prefill of a 2,000-token prompt on the synthetic 7B in bf16,
# for each build named (xz files in gpu-bundle/, made as scripts/gpu/bundle.sh makes quorum.xz),
# ROUNDS rounds interleaved, each run its own process (so no prefix-cache hit). Prints each
# run's engine line; prefill tok/s = 2,000 / its time to the first token.
#   bash scripts/gpu/prefill-check.sh quorum-old quorum      # carry gpu-bundle
set -uo pipefail
cd "$(dirname "$0")/../.."
WORK=${WORK:-/tmp/quorum-gpu}
ROUNDS=${ROUNDS:-2}
DTYPE=${DTYPE:-bf16}
# For a dry run without a GPU: DEVICE=cpu DTYPE=f32 BIG=smollm2-135m.
DEVICE=${DEVICE:-cuda:0}
BIG=${BIG:-qwen2.5-coder-7b}
mkdir -p "$WORK"
# shellcheck source=scripts/gpu/device-env.sh
. scripts/gpu/device-env.sh
for b in "$@"; do unpack "$b" "$WORK"; done
nvidia-smi --query-gpu=name --format=csv,noheader
SYN=$WORK/synthetic/$BIG
[ -d "$SYN" ] || "$WORK/$1" synth-checkpoint --arch "$BIG" --dtype bf16 --out "$SYN"
LONG=$(python3 -c "print(('SELECT name, capacity FROM stadium WHERE capacity > 5000 ORDER BY capacity DESC; ' * 40)[:2000])")
for r in $(seq "$ROUNDS"); do
  for b in "$@"; do
    line=$(timeout 90 "$WORK/$b" generate --device "$DEVICE" --model "$SYN" --dtype "$DTYPE" \
      --prompt "$LONG" --max-tokens 2 --engine-copies 1 --stats 2>&1 | grep 'tok/s')
    echo "round $r $b: $line"
  done
done
