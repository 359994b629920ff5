#!/usr/bin/env bash
# `quorum train --device cuda` on a lent GPU machine, against PyTorch + PEFT on the same
# sequences (docs/GPU.md). Needs gpu-bundle/ from scripts/gpu/bundle.sh with a small
# Spider-format directory in gpu-bundle/spider-mini (train.json, tables.json and the databases
# it names; bundle.sh copies one). The weights are a synthetic Qwen2.5-Coder-0.5B in f32 with a
# byte-level tokenizer, so sequences are several times longer than with the real tokenizer.
#   bash scripts/gpu/train-check.sh                    # the bundle's quorum
#   ROUNDS=2 bash scripts/gpu/train-check.sh quorum-base quorum   # two builds, interleaved
# Every build trains on the same sequences (checked), then PyTorch + PEFT on them, each round.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/quorum-gpu-out}
WORK=${WORK:-/tmp/quorum-gpu}
DEVICE=${DEVICE:-cuda:0}
STEPS=${STEPS:-6}
ACC=${ACC:-4}
ROUNDS=${ROUNDS:-1}
[ $# -gt 0 ] || set -- quorum
mkdir -p "$OUT" "$WORK"
LOG=$OUT/train-summary.txt
say() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$LOG"; }
# shellcheck source=scripts/gpu/device-env.sh
. scripts/gpu/device-env.sh
for b in "$@"; do unpack "$b" "$WORK"; done
say "host: $(nproc) cores; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)"
SYN=$WORK/synthetic-0.5b
[ -d "$SYN" ] || "$WORK/$1" synth-checkpoint --arch qwen2.5-coder-0.5b --dtype f32 --out "$SYN" 2>&1 | tee -a "$LOG"
for r in $(seq "$ROUNDS"); do
  for b in "$@"; do
    rm -rf "$WORK/adapter-$b"
    # The baseline's learning rate (4e-4); it has no warm-up or decay, so losses after step 1
    # can still differ a little: the speeds are what compare.
    timeout 200 "$WORK/$b" --device "$DEVICE" train --model "$SYN" --data gpu-bundle/spider-mini \
      --out "$WORK/adapter-$b" --steps "$STEPS" --grad-accumulation "$ACC" --warmup-steps 1 \
      --lr 4e-4 --max-tokens 1536 --limit 96 --checkpoint-every 0 \
      --write-sequences "$WORK/seq-$b.jsonl" >"$OUT/train-$b-r$r.log" 2>&1
    say "round $r, quorum train ($b): rc=$?"
    grep -v '^\s*$' "$OUT/train-$b-r$r.log" | grep -v '\[' | tail -3 | tee -a "$LOG"
    tail -n 1 "$WORK/adapter-$b/train-log.jsonl" 2>/dev/null | tee -a "$LOG"
    head -n 1 "$WORK/adapter-$b/train-log.jsonl" 2>/dev/null | tee -a "$LOG"
    cmp -s "$WORK/seq-$1.jsonl" "$WORK/seq-$b.jsonl" || say "sequences of $b differ from $1's"
  done
  timeout 150 python3 scripts/bench-train-torch.py --model-dir "$SYN" --device "${DEVICE%%:*}" \
    --sequences "$WORK/seq-$1.jsonl" --steps "$STEPS" --grad-accumulation "$ACC" \
    >"$OUT/torch-train-r$r.log" 2>&1
  say "round $r, pytorch+peft: rc=$?"
  tail -n 3 "$OUT/torch-train-r$r.log" | tee -a "$LOG"
done
