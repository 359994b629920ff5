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
for b in "$@"; do
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
    "gpu-bundle/$b.xz" "$WORK/$b" && chmod +x "$WORK/$b"
done
LIBS=$(python3 -c "
import glob, os, site
dirs = []
for lib in ['libcublas.so.13', 'libcurand.so.10', 'libcudart.so.13']:
    for r in site.getsitepackages():
        hits = glob.glob(os.path.join(r, '**', lib), recursive=True)
        if hits and os.path.dirname(hits[0]) not in dirs:
            dirs.append(os.path.dirname(hits[0]))
print(':'.join(dirs))")
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
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
