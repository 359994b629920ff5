#!/usr/bin/env bash
# The whole device side of the GPU check, in one command on a lent GPU machine (docs/GPU.md).
# Needs: gpu-bundle/ made by scripts/gpu/bundle.sh on a build machine (the CUDA `quorum`, the
# `quorum-load` client, one Spider database; optionally `quorum-base.xz`, an earlier build to
# measure against in the same call), PyTorch + transformers on the machine, $OUT for the
# results. Each step has its own time bound and its own log; a failed step is reported and the
# next one runs, so one call gives every figure it can, most important first. A device call
# returns at most 8 files, so $OUT holds only summary.txt, kernel-check.json, gpu-figures.json
# and logs.tar.gz (every log, refreshed after each step).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
OUT=${OUT:-/tmp/quorum-gpu-out}
WORK=${WORK:-/tmp/quorum-gpu}
SYN=$WORK/synthetic
# For a dry run of the script's plumbing on a machine without a GPU: DEVICE=cpu BIG=smollm2-135m.
DEVICE=${DEVICE:-cuda:0}
BIG=${BIG:-qwen2.5-coder-7b}
# Half precision runs only off the CPU.
HALF=${HALF:-bf16}
LOGS=$WORK/logs
mkdir -p "$OUT" "$WORK" "$SYN" "$LOGS"
LOG=$OUT/summary.txt
say() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$LOG"; }
# The whole script's time: a step is cut to what is left of it, and skipped when too little is
# left, so the figures and logs are written even when the device call is short.
BUDGET=${BUDGET:-500}
# step NAME SECONDS CMD...: runs CMD with a time bound, stdout and stderr to $LOGS/NAME.log.
step() {
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS left=$((BUDGET - SECONDS))
  if [ "$left" -lt 15 ]; then
    say "step $name: skipped, ${left} s of the ${BUDGET} s budget left"
    return 124
  fi
  [ "$secs" -gt "$left" ] && secs=$left
  timeout "$secs" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  say "step $name: rc=$rc in $((SECONDS - t0)) s"
  tar czf "$OUT/logs.tar.gz" -C "$LOGS" .
  return $rc
}
# The engine's and the greedy loop's figures: their lines name tok/s.
figures() { grep -h 'tok/s' "$@" 2>/dev/null | tee -a "$LOG"; }

say "host: $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$LOG"

# shellcheck source=scripts/gpu/device-env.sh
. scripts/gpu/device-env.sh
for b in quorum quorum-load quorum-base; do
  [ -f "gpu-bundle/$b.xz" ] && unpack "$b" "$WORK"
done
Q=$WORK/quorum
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
ldd "$Q" | grep -E 'cuda|cublas|curand|not found' | tee -a "$LOG"

# 0. Quorum's CUDA kernels against their host references, every kernel in f32 and bf16 on odd
# shapes (`quorum kernel-check`; the same cases the CPU emulation passes in CI).
step kernel-check 120 "$Q" kernel-check --device "$DEVICE" --json "$OUT/kernel-check.json"
grep -iE 'kernel_tests|failed|error' "$LOGS/kernel-check.log" | tee -a "$LOG"

# 1. Synthetic checkpoints of real shapes: the 0.5B in f32 (device agreement), the 7B in bf16.
step synth-0.5b 120 "$Q" synth-checkpoint --arch qwen2.5-coder-0.5b --dtype f32 --out "$SYN/qwen2.5-coder-0.5b"
SMALL=$SYN/qwen2.5-coder-0.5b

# 2. Agreement on the same 0.5B checkpoint, five prompts, 64 greedy tokens: the CPU's greedy
# loop (the reference; run in the background, a few cores each, while the GPU works) against
# the GPU's greedy loop (and the logits after the prompt) and the GPU's engine, one copy and
# then 64 at once (paged KV blocks on the device, batched attention).
PROMPTS=(
  "SELECT count(*) FROM singer"
  "How many singers do we have?"
  "CREATE TABLE stadium (id INT, name TEXT, capacity INT); list the stadiums by capacity."
  "Translate to SQL: the average age of singers from France"
  "<|im_start|>user\nWhich year had the most concerts?<|im_end|>\n<|im_start|>assistant\n"
)
CPU_JOBS=()
for i in "${!PROMPTS[@]}"; do
  RAYON_NUM_THREADS=3 timeout 400 "$Q" generate --device cpu --model "$SMALL" \
    --prompt "${PROMPTS[$i]}" --max-tokens 64 --logits-out "$WORK/logits-$i-cpu.f32" \
    >"$WORK/text-$i-cpu.txt" 2>"$LOGS/agree-$i-cpu.log" &
  CPU_JOBS+=($!)
done
for i in "${!PROMPTS[@]}"; do
  step "agree-$i-gpu-greedy" 60 sh -c '"$0" generate --device "$1" --model "$2" --prompt "$3" \
    --max-tokens 64 --logits-out "$4" >"$5"' "$Q" "$DEVICE" "$SMALL" "${PROMPTS[$i]}" \
    "$WORK/logits-$i-gpu.f32" "$WORK/text-$i-gpu-greedy.txt"
  step "agree-$i-gpu-engine" 90 sh -c '"$0" generate --device "$1" --model "$2" --prompt "$3" \
    --max-tokens 64 --engine-copies 1,64 --stats >"$4"' "$Q" "$DEVICE" "$SMALL" "${PROMPTS[$i]}" \
    "$WORK/text-$i-gpu-engine.txt"
done

# 3. The 7B shapes in bf16 (15 GB on disk), written while the CPU runs finish.
step synth-7b 120 "$Q" synth-checkpoint --arch "$BIG" --dtype bf16 --out "$SYN/$BIG"
for job in "${CPU_JOBS[@]}"; do wait "$job"; done
python3 - "$WORK" <<'PY' 2>&1 | tee -a "$LOG"
import array, sys
work = sys.argv[1]
def floats(path):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a
def text(path):
    try:
        return open(path).read()
    except OSError as e:
        return f"<missing: {e}>"
greedy = engine = 0
for i in range(5):
    cpu = text(f"{work}/text-{i}-cpu.txt")
    g, e = text(f"{work}/text-{i}-gpu-greedy.txt"), text(f"{work}/text-{i}-gpu-engine.txt")
    greedy += g == cpu
    engine += e == cpu
    try:
        a, b = floats(f"{work}/logits-{i}-cpu.f32"), floats(f"{work}/logits-{i}-gpu.f32")
        d = f"{max(abs(x - y) for x, y in zip(a, b)):.3e} (max |logit| {max(map(abs, a)):.3f})"
    except Exception as err:
        d = f"missing ({err})"
    print(f"prompt {i}: logits max |gpu-cpu| {d}; 64 tokens equal to the CPU's: "
          f"GPU greedy loop {g == cpu}, GPU engine {e == cpu}")
print(f"completions equal to the CPU's on 5 prompts: GPU greedy loop {greedy}/5, GPU engine {engine}/5")
PY
figures "$LOGS"/agree-*-gpu-engine.log

# 4. The 7B through the engine in half precision with Quorum's kernels: one stream, then 64
# (128 tokens each), then the prefill of a 2,000-token prompt. Then PyTorch + transformers on
# the same files and prompts, in the same call. The most important figures come first; the
# same runs with candle's ops (QUORUM_CUDA_KERNELS=0, the path before the kernels) come last.
LONG=$(python3 -c "print(('SELECT name, capacity FROM stadium WHERE capacity > 5000 ORDER BY capacity DESC; ' * 40)[:2000])")
# The decode runs log each step's time to queue the pass and the whole step's (figures.py).
TIMING=quorum_engine::step_timing=debug
engine_7b() { # KERNELS: the decode runs and the 2k prefill of the 7B
  step "engine-7b-$HALF-kernels$1" 120 env QUORUM_CUDA_KERNELS="$1" RUST_LOG=$TIMING "$Q" generate \
    --device "$DEVICE" --model "$SYN/$BIG" --dtype "$HALF" --prompt "How many singers do we have?" \
    --max-tokens 128 --engine-copies 1,64 --stats --kv-cache-mib 8192
  step "engine-7b-$HALF-kernels$1-prefill2k" 90 env QUORUM_CUDA_KERNELS="$1" "$Q" \
    generate --device "$DEVICE" --model "$SYN/$BIG" --dtype "$HALF" --prompt "$LONG" \
    --max-tokens 2 --engine-copies 1 --stats
  figures "$LOGS/engine-7b-$HALF-kernels$1.log" "$LOGS/engine-7b-$HALF-kernels$1-prefill2k.log"
}
engine_7b 1
# The same prefill with the kernels on but long chunks on the two-product path (cuBLAS around
# causal_softmax) instead of prefill_attention: which of the two should be the default.
step "engine-7b-$HALF-products-prefill2k" 90 env QUORUM_PREFILL_KERNEL=0 "$Q" generate \
  --device "$DEVICE" --model "$SYN/$BIG" --dtype "$HALF" --prompt "$LONG" --max-tokens 2 \
  --engine-copies 1 --stats
figures "$LOGS/engine-7b-$HALF-products-prefill2k.log"
# Batch-1 decode with the kernels on but every dense projection on cuBLAS
# (QUORUM_SKINNY_KERNEL=0) instead of skinny_matmul: which of the two the few-row steps should run.
step "engine-7b-$HALF-cublas-decode" 75 env QUORUM_SKINNY_KERNEL=0 RUST_LOG=$TIMING "$Q" generate \
  --device "$DEVICE" --model "$SYN/$BIG" --dtype "$HALF" --prompt "How many singers do we have?" \
  --max-tokens 128 --engine-copies 1 --stats --kv-cache-mib 8192
figures "$LOGS/engine-7b-$HALF-cublas-decode.log"
step torch-7b 150 python3 scripts/gpu/torch_bench.py "$SYN/$BIG" "$LOGS/torch-7b.json" "$HALF"
cat "$LOGS/torch-7b.json" 2>/dev/null | tee -a "$LOG"; echo | tee -a "$LOG"

# 4b. The batch-invariant mode (fixed-order matmuls, attention row by row): its 64 copies must
# decode its single copy's tokens; its cost is its decode rates against the runs above.
step "engine-7b-$HALF-invariant" 120 env RUST_LOG=$TIMING "$Q" generate --device "$DEVICE" \
  --model "$SYN/$BIG" --dtype "$HALF" --prompt "How many singers do we have?" --max-tokens 128 \
  --engine-copies 1,64 --stats --kv-cache-mib 8192 --batch-invariant
figures "$LOGS/engine-7b-$HALF-invariant.log"

# 5. Three synthetic rank-16 adapters on the 7B: 64 copies taking none and each adapter in turn
# (BGMV on the device), against the plain 64 above; and on the 0.5B in f32, a mixed batch of 16
# whose every copy must decode what its adapter decodes alone.
for i in 1 2 3; do
  "$Q" synth-adapter --arch "$BIG" --rank 16 --seed "$i" --out "$SYN/$BIG-lora$i" >/dev/null
  "$Q" synth-adapter --arch qwen2.5-coder-0.5b --rank 8 --seed "$i" --out "$SYN/small-lora$i" >/dev/null
done
step lora3-0.5b-f32 60 "$Q" generate --device "$DEVICE" --model "$SMALL" --prompt \
  "How many singers do we have?" --max-tokens 32 --engine-copies 16 --stats \
  --adapter "$SYN/small-lora1" --adapter "$SYN/small-lora2" --adapter "$SYN/small-lora3"
step "engine-7b-$HALF-lora3" 120 env RUST_LOG=$TIMING "$Q" generate --device "$DEVICE" --model "$SYN/$BIG" \
  --dtype "$HALF" --prompt "How many singers do we have?" --max-tokens 128 --engine-copies 64 \
  --stats --kv-cache-mib 8192 --adapter "$SYN/$BIG-lora1" --adapter "$SYN/$BIG-lora2" \
  --adapter "$SYN/$BIG-lora3"
figures "$LOGS"/lora3-0.5b-f32.log "$LOGS/engine-7b-$HALF-lora3.log"

# 5b. Steps that mix greedy copies (their arg-max taken on the device) with sampling copies
# (only their rows copied to the host): on the 0.5B in f32 every copy must decode what its kind
# decodes alone; the 7B's 64 mixed copies give an aggregate decode rate against the plain 64
# (in half precision its copies need not agree with their kind alone, as in step 4).
step mixed-0.5b-f32 60 "$Q" generate --device "$DEVICE" --model "$SMALL" --prompt \
  "How many singers do we have?" --max-tokens 32 --engine-copies 16 --stats --sampled-copies
step "engine-7b-$HALF-mixed" 120 "$Q" generate --device "$DEVICE" --model "$SYN/$BIG" \
  --dtype "$HALF" --prompt "How many singers do we have?" --max-tokens 128 --engine-copies 64 \
  --stats --kv-cache-mib 8192 --sampled-copies
figures "$LOGS"/mixed-0.5b-f32.log "$LOGS/engine-7b-$HALF-mixed.log"

# 6. The server on the device (scripts/gpu/quorum-gpu.toml): one Text2Sql request end to end,
# then 64 concurrent generations of the 7B through gRPC; later the same load with the kernels off.
mkdir -p "$WORK/db/concert_singer"
cp gpu-bundle/concert_singer.sqlite "$WORK/db/concert_singer/"
# A dry run on the CPU drops the share of GPU memory and the half precision, which only a CUDA
# device has.
CPU_ONLY=()
[ "$DEVICE" = cpu ] && CPU_ONLY=(-e '/gpu_memory_fraction/d' -e '/^dtype = /d')
sed -e "s#@SYN@#$SYN#g" -e "s#@REPO@#$REPO#g" -e "s#qwen2.5-coder-7b\"#$BIG\"#" \
  -e "s#\"cuda:0\"#\"$DEVICE\"#" "${CPU_ONLY[@]}" scripts/gpu/quorum-gpu.toml >"$WORK/quorum.toml"
serve_and_load() { # BINARY TAG [KERNELS]: start a server, time 64 streams on the 7B, stop it
  QUORUM_CUDA_KERNELS=${3:-1} "$1" serve --config "$WORK/quorum.toml" --listen 127.0.0.1:50070 --database-dir "$WORK/db" \
    >"$LOGS/serve-$2.log" 2>&1 &
  local server=$!
  # Ready when health says SERVING (both models loaded); the base build waits the same way.
  if step "ready-$2" 120 sh -c 'until "$0" health --server http://127.0.0.1:50070; do sleep 1; done' "$1"; then
    if [ "$2" = new ]; then
      # On a CPU dry run the random weights write every query to its limit: 95 s on 2 cores.
      step ask "$([ "$DEVICE" = cpu ] && echo 180 || echo 90)" "$1" ask \
        --server http://127.0.0.1:50070 --wait-secs 80 --db concert_singer \
        "How many singers do we have?"
    fi
    step "load-7b-64-$2" 90 "$WORK/quorum-load" --server http://127.0.0.1:50070 --model coder-7b \
      --clients 64 --requests 64 --max-tokens 64
    tail -n 3 "$LOGS/load-7b-64-$2.log" | tee -a "$LOG"
  fi
  kill "$server" 2>/dev/null; wait "$server" 2>/dev/null
}
serve_and_load "$Q" new

# 7. The baselines of the current path: candle's ops (QUORUM_CUDA_KERNELS=0) through the engine
# and through the server; the greedy loop at batch 1 with the kernels.
engine_7b 0
serve_and_load "$Q" kernels0 0
step "greedy-7b-$HALF-kernels1" 60 "$Q" generate --device "$DEVICE" --model "$SYN/$BIG" \
  --dtype "$HALF" --prompt "How many singers do we have?" --max-tokens 128 --stats
figures "$LOGS/greedy-7b-$HALF-kernels1.log"

# 8. The earlier build through the same server and client, when the bundle carries one.
if [ -x "$WORK/quorum-base" ]; then
  serve_and_load "$WORK/quorum-base" base
fi

# The headline figures as JSON (docs/runs/gpu-figures.json once committed).
python3 scripts/gpu/figures.py "$LOGS" "$OUT" "$HALF" | tee -a "$LOG"
tar czf "$OUT/logs.tar.gz" -C "$LOGS" .
say "done in $SECONDS s"
