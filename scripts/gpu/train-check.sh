#!/usr/bin/env bash
# `quorum train --device cuda` on a lent GPU machine, against PyTorch + PEFT on the same
# sequences (docs/GPU.md). Needs gpu-bundle/ from scripts/gpu/bundle.sh with a small
# Spider-format directory in gpu-bundle/spider-mini (train.json, tables.json and the databases
# it names; bundle.sh copies one). The weights are a synthetic Qwen2.5-Coder-0.5B in f32 with a
# byte-level tokenizer, so sequences are several times longer than with the real tokenizer.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/quorum-gpu-out}
WORK=${WORK:-/tmp/quorum-gpu}
DEVICE=${DEVICE:-cuda:0}
STEPS=${STEPS:-6}
ACC=${ACC:-4}
mkdir -p "$OUT" "$WORK"
LOG=$OUT/train-summary.txt
say() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$LOG"; }
# shellcheck source=scripts/gpu/device-env.sh
. scripts/gpu/device-env.sh
unpack quorum "$WORK"
Q=$WORK/quorum
say "host: $(nproc) cores; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)"
SYN=$WORK/synthetic-0.5b
[ -d "$SYN" ] || "$Q" synth-checkpoint --arch qwen2.5-coder-0.5b --dtype f32 --out "$SYN" 2>&1 | tee -a "$LOG"
rm -rf "$WORK/adapter"
# The baseline's learning rate (4e-4); it has no warm-up or decay, so losses after step 1 can
# still differ a little: the speeds are what compare.
timeout 200 "$Q" --device "$DEVICE" train --model "$SYN" --data gpu-bundle/spider-mini \
  --out "$WORK/adapter" --steps "$STEPS" --grad-accumulation "$ACC" --warmup-steps 1 --lr 4e-4 \
  --max-tokens 1536 --limit 96 --checkpoint-every 0 --write-sequences "$WORK/seq.jsonl" \
  >"$OUT/quorum-train.log" 2>&1
say "quorum train: rc=$?"
grep -v '^\s*$' "$OUT/quorum-train.log" | grep -v '\[' | tail -4 | tee -a "$LOG"
cp "$WORK/adapter/train-log.jsonl" "$OUT/" 2>/dev/null && tail -n 2 "$OUT/train-log.jsonl" | tee -a "$LOG"
timeout 150 python3 scripts/bench-train-torch.py --model-dir "$SYN" --device "${DEVICE%%:*}" \
  --sequences "$WORK/seq.jsonl" --steps "$STEPS" --grad-accumulation "$ACC" \
  >"$OUT/torch-train.log" 2>&1
say "pytorch+peft: rc=$?"
tail -n 3 "$OUT/torch-train.log" | tee -a "$LOG"
