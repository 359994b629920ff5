#!/usr/bin/env bash
# The whole device side of the GPU check, in one command on a lent GPU machine (docs/GPU.md).
# Needs: gpu-bundle/ made by scripts/gpu/bundle.sh on a build machine (the CUDA `quorum`, the
# `quorum-load` client, one Spider database), PyTorch + transformers + peft on the machine, $OUT
# for the results. Each step has its own time bound and its own log; a failed step is reported
# and the next one runs, so one call gives every figure it can. A device call returns at most 8
# files, so $OUT holds only summary.txt and logs.tar.gz (every log, refreshed after each step).
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
OUT=${OUT:-/tmp/quorum-gpu-out}
WORK=${WORK:-/tmp/quorum-gpu}
SYN=$WORK/synthetic
# For a dry run of the script's plumbing on a machine without a GPU: DEVICE=cpu BIG=smollm2-135m.
DEVICE=${DEVICE:-cuda:0}
BIG=${BIG:-qwen2.5-coder-7b}
LOGS=$WORK/logs
mkdir -p "$OUT" "$WORK" "$SYN" "$LOGS"
LOG=$OUT/summary.txt
say() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$LOG"; }
# step NAME SECONDS CMD...: runs CMD with a time bound, output to $LOGS/NAME.log.
step() {
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS
  timeout "$secs" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  say "step $name: rc=$rc in $((SECONDS - t0)) s"
  tar czf "$OUT/logs.tar.gz" -C "$LOGS" .
  return $rc
}

say "host: $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$LOG"

# The binaries travel xz-compressed; Python's lzma unpacks them wherever xz is missing.
for b in quorum quorum-load; do
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
    gpu-bundle/$b.xz "$WORK/$b" && chmod +x "$WORK/$b"
done
Q=$WORK/quorum
# The CUDA libraries the binary links (cuBLAS, cuRAND, the runtime) come from PyTorch's wheels
# or the system toolkit; the driver's libcuda is already on the loader's path.
LIBS=$(python3 - <<'PY'
import glob, os, site
roots = site.getsitepackages() + ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"]
dirs = []
for lib in ["libcublas.so.13", "libcublasLt.so.13", "libcurand.so.10", "libcudart.so.13"]:
    for r in roots:
        hits = glob.glob(os.path.join(r, "**", lib), recursive=True)
        if hits:
            d = os.path.dirname(hits[0])
            if d not in dirs:
                dirs.append(d)
            break
print(":".join(dirs))
PY
)
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+${LIBS:+:}$LD_LIBRARY_PATH}
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
ldd "$Q" | grep -E 'cuda|cublas|curand|not found' | tee -a "$LOG"

# 1. Synthetic checkpoints of real shapes: the 0.5B in f32 (device agreement), the 7B in bf16.
step synth-0.5b 120 "$Q" synth-checkpoint --arch qwen2.5-coder-0.5b --dtype f32 --out "$SYN/qwen2.5-coder-0.5b"

# 2. GPU vs CPU on the same 0.5B checkpoint: five prompts, 64 greedy tokens, the prompt's logits.
PROMPTS=(
  "SELECT count(*) FROM singer"
  "How many singers do we have?"
  "CREATE TABLE stadium (id INT, name TEXT, capacity INT); list the stadiums by capacity."
  "Translate to SQL: the average age of singers from France"
  "<|im_start|>user\nWhich year had the most concerts?<|im_end|>\n<|im_start|>assistant\n"
)
for i in "${!PROMPTS[@]}"; do
  for dev in cpu "$DEVICE"; do
    tag=${dev%%:*}
    step "agree-$i-$tag" 60 "$Q" generate --device "$dev" --model "$SYN/qwen2.5-coder-0.5b" \
      --prompt "${PROMPTS[$i]}" --max-tokens 64 --stats --logits-out "$WORK/logits-$i-$tag.f32"
  done
done
python3 - "$WORK" "$LOGS" "${DEVICE%%:*}" <<'PY' 2>&1 | tee -a "$LOG"
import array, sys
work, out, dev = sys.argv[1], sys.argv[2], sys.argv[3]
def floats(path):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a
def completion(path):
    """The generated text: the log without the speed line."""
    return [l for l in open(path).read().splitlines() if "tok/s" not in l]
def argmax(v):
    return max(range(len(v)), key=v.__getitem__)
same = 0
for i in range(5):
    try:
        a = floats(f"{work}/logits-{i}-cpu.f32")
        b = floats(f"{work}/logits-{i}-{dev}.f32")
        ta, tb = (completion(f"{out}/agree-{i}-{d}.log") for d in ("cpu", dev))
    except Exception as e:
        print(f"prompt {i}: missing output ({e})"); continue
    d = max(abs(x - y) for x, y in zip(a, b))
    same += ta == tb
    print(f"prompt {i}: logits max |gpu-cpu| {d:.3e} (max |logit| {max(map(abs, a)):.3f}), "
          f"argmax equal {argmax(a) == argmax(b)}, 64-token completions equal {ta == tb}")
print(f"completions equal on {same}/5 prompts")
PY

# 3. The 7B shapes in bf16 (15 GB on disk).
step synth-7b 120 "$Q" synth-checkpoint --arch "$BIG" --dtype bf16 --out "$SYN/$BIG"
# 4. The server on cuda:0: one Text2Sql request end to end, then 64 concurrent generations.
mkdir -p "$WORK/db/concert_singer"
cp gpu-bundle/concert_singer.sqlite "$WORK/db/concert_singer/"
sed -e "s#@SYN@#$SYN#g" -e "s#@REPO@#$REPO#g" -e "s#qwen2.5-coder-7b\"#$BIG\"#" \
  -e "s#\"cuda:0\"#\"$DEVICE\"#" scripts/gpu/quorum-gpu.toml >"$WORK/quorum.toml"
"$Q" serve --config "$WORK/quorum.toml" --listen 127.0.0.1:50070 --database-dir "$WORK/db" \
  >"$LOGS/serve.log" 2>&1 &
SERVER=$!
step ask 180 "$Q" ask --server http://127.0.0.1:50070 --wait-secs 150 --db concert_singer \
  "How many singers do we have?"
step load-7b-1 60 "$WORK/quorum-load" --server http://127.0.0.1:50070 --model coder-7b \
  --clients 1 --requests 2 --max-tokens 128
step load-7b-64 120 "$WORK/quorum-load" --server http://127.0.0.1:50070 --model coder-7b \
  --clients 64 --requests 64 --max-tokens 64
step load-0.5b-64 90 "$WORK/quorum-load" --server http://127.0.0.1:50070 --model coder \
  --clients 64 --requests 128 --max-tokens 64
tail -n 3 "$LOGS"/load-*.log | tee -a "$LOG"
kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null
# 5. PyTorch + transformers on the same files, same prompts, same call.
step torch-7b 200 python3 scripts/gpu/torch_bench.py "$SYN/$BIG" "$LOGS/torch-7b.json"
cat "$LOGS/torch-7b.json" 2>/dev/null | tee -a "$LOG"; echo | tee -a "$LOG"

# 6. The 7B shapes through `quorum generate`: the greedy loop's batch-1 decode and a 2k prefill.
LONG=$(python3 -c "print(('SELECT name, capacity FROM stadium WHERE capacity > 5000 ORDER BY capacity DESC; ' * 40)[:2000])")
step gen-7b-decode 90 "$Q" generate --device "$DEVICE" --model "$SYN/$BIG" \
  --prompt "How many singers do we have?" --max-tokens 128 --stats
step gen-7b-prefill2k 90 "$Q" generate --device "$DEVICE" --model "$SYN/$BIG" \
  --prompt "$LONG" --max-tokens 2 --stats
grep -h 'tok/s' "$LOGS"/gen-7b-*.log | tee -a "$LOG"

tar czf "$OUT/logs.tar.gz" -C "$LOGS" .
say "done"
