#!/usr/bin/env bash
# Single-stream speed of Quorum's engine against llama.cpp on the same GGUF, prompt ids and
# threads, ROUNDS interleaved rounds (medians), on the CPU kernel path PATH_NAME (default:
# auto). llama.cpp comes from a llama-cpp-python built for the same instruction set (see
# shared/docs/models.md: GGML_NATIVE=OFF with the matching GGML_AVX2 / GGML_AVX512 switches),
# named by LLAMA_PY (its venv's python). Quorum runs twice a round: as it serves (speculative
# decoding by prompt lookup on) and with drafts off, every token a step of its own as llama.cpp
# decodes by default. Raw lines go to OUT. MODEL_FILE names the GGUF in the models directory
# (default: Qwen2.5-Coder-0.5B's; the 1.5B's file is the default profile's generator).
#   LLAMA_PY=/path/venv/bin/python [MODEL_FILE=NAME.gguf] scripts/bench-cpu.sh [OUT] [ROUNDS] [PATH_NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/quorum-target}
OUT=${1:-/tmp/quorum-bench-cpu}
ROUNDS=${2:-3}
CPU_PATH=${3:-auto}
LLAMA_PY=${LLAMA_PY:?set LLAMA_PY to the python of a llama-cpp-python install}
MODELS=${QUORUM_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/quorum/models}
MODEL_FILE=${MODEL_FILE:-qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}
MODEL=$MODELS/$MODEL_FILE
mkdir -p "$OUT"
grep -m1 flags /proc/cpuinfo >"$OUT/cpu-flags.txt"
echo "$MODEL_FILE" >"$OUT/model.txt"
cargo build -q -p quorum-benches --bin quorum-bench-runtime
B=$CARGO_TARGET_DIR/debug/quorum-bench-runtime
"$B" --model "$MODEL_FILE" --write-prompt-ids "$OUT/prompt.json"
: >"$OUT/quorum.jsonl"
: >"$OUT/quorum-no-drafts.jsonl"
: >"$OUT/llamacpp.jsonl"
for _ in $(seq 1 "$ROUNDS"); do
  "$B" --model "$MODEL_FILE" --engine-only --runs 1 --cpu-path "$CPU_PATH" 2>/dev/null >>"$OUT/quorum.jsonl"
  "$B" --model "$MODEL_FILE" --engine-only --runs 1 --cpu-path "$CPU_PATH" --no-drafts 2>/dev/null >>"$OUT/quorum-no-drafts.jsonl"
  "$LLAMA_PY" benches/llamacpp_bench.py "$MODEL" "$OUT/prompt.json" 1 64 2 >>"$OUT/llamacpp.jsonl"
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
rows = {}
for name in ["quorum", "quorum-no-drafts", "llamacpp"]:
    runs = [json.loads(l) for l in open(f"{out}/{name}.jsonl") if l.strip()]
    rows[name] = {k: statistics.median(r[k] for r in runs) for k in ["prefill_tok_s", "decode_tok_s"]}
    print(name, json.dumps({k: round(v, 1) for k, v in rows[name].items()}), "runs:",
          [round(r["prefill_tok_s"], 1) for r in runs], [round(r["decode_tok_s"], 1) for r in runs])
l = rows["llamacpp"]
for name in ["quorum", "quorum-no-drafts"]:
    q = rows[name]
    print(f"{name} / llama.cpp: prefill {q['prefill_tok_s'] / l['prefill_tok_s']:.2f}x, "
          f"decode {q['decode_tok_s'] / l['decode_tok_s']:.2f}x")
PY
