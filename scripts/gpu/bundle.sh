#!/usr/bin/env bash
# Build-machine side of the GPU check (docs/GPU.md): builds the CUDA `quorum` with a toolkit
# whose PTX the GPU machine's driver can load (CUDA 13.0 for driver 580), and the `quorum-load`
# client, strips and compresses both, and copies one Spider database and a small training set,
# into gpu-bundle/ (ignored by git; name it in the device call's `carry`). No GPU needed.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CU_VER:=13.0.88}"
export CU_VER
export CUDA_PREFIX=${CUDA_PREFIX:-$HOME/.cache/cuda-pip-$CU_VER}
# The shared toolkit script pins the header and library wheels of its default toolkit; a driver
# older than that toolkit needs the matching set, so install it first (the script then skips).
if [ ! -x "$CUDA_PREFIX/nvidia/cu13/bin/nvcc" ]; then
  python3 -m pip install -q --no-deps --target "$CUDA_PREFIX" "nvidia-cuda-nvcc==$CU_VER" \
    "nvidia-nvvm==$CU_VER" "nvidia-cuda-crt==$CU_VER" "nvidia-cuda-runtime==${CUDART_VER:-13.0.96}" \
    "nvidia-cuda-nvrtc==$CU_VER" "nvidia-cuda-cccl==${CCCL_VER:-13.0.85}" \
    "nvidia-cublas==${CUBLAS_VER:-13.0.2.14}" "nvidia-curand==${CURAND_VER:-10.4.0.35}"
fi
# shellcheck disable=SC1091
. ../shared/scripts/cuda-toolkit.sh
CUDA_TARGET=${CUDA_TARGET:-$HOME/.cache/quorum-target-cuda-$CU_VER}
CARGO_TARGET_DIR=$CUDA_TARGET cargo build -p quorum-server --features cuda --bin quorum
CPU_TARGET=${CARGO_TARGET_DIR:-$HOME/.cache/quorum-target}
CARGO_TARGET_DIR=$CPU_TARGET cargo build -p quorum-benches --bin quorum-load
mkdir -p gpu-bundle
git rev-parse --short HEAD >gpu-bundle/commit
strip -o gpu-bundle/quorum "$CUDA_TARGET/debug/quorum"
strip -o gpu-bundle/quorum-load "$CPU_TARGET/debug/quorum-load"
xz -9 -T2 -f gpu-bundle/quorum gpu-bundle/quorum-load
cp ../shared/data/spider/database/concert_singer/concert_singer.sqlite gpu-bundle/
# Training data for scripts/gpu/train-check.sh: the train.json questions of five small train
# databases, with their tables.json entries, databases and the data's README (its licence).
python3 - <<'PY'
import json, os, shutil
src, out = "../shared/data/spider", "gpu-bundle/spider-mini"
dbs = ["icfp_1", "manufactory_1", "voter_2", "club_1", "network_2"]
os.makedirs(f"{out}/database", exist_ok=True)
for name in ["train.json", "tables.json"]:
    rows = [r for r in json.load(open(f"{src}/{name}")) if r["db_id"] in dbs]
    json.dump(rows, open(f"{out}/{name}", "w"))
for db in dbs:
    os.makedirs(f"{out}/database/{db}", exist_ok=True)
    shutil.copy(f"{src}/database/{db}/{db}.sqlite", f"{out}/database/{db}/")
shutil.copy(f"{src}/README.md", out)
PY
du -sh gpu-bundle/*
