#!/usr/bin/env bash
# Builds the scratch CPU image (scripts/build-image-scratch.sh) and runs what it holds: its file
# system is mounted, the server started from it in a chroot as the image's user (uid 10001),
# with the models and one database bind-mounted read-only as the volumes would be, and its own
# HEALTHCHECK command run against it. A question is asked from outside over gRPC. Nothing else
# from the host is visible to the binary, so a missing library or a file the image lacks fails
# here. (A container runtime is not used: crun cannot set resource limits in this VM.) Called by
# .ci/run.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quorum-target}"
models="${QUORUM_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/quorum/models}"
spider="${QUORUM_SPIDER_DIR:-$repo/../shared/data/spider}"
store=(--storage-driver vfs)
tag=localhost/quorum:cpu-scratch-test

"$repo/scripts/build-image-scratch.sh" "$tag"
ctr="$(buildah "${store[@]}" from "$tag")"
mnt="$(buildah "${store[@]}" mount "$ctr")"
pid=""
cleanup() {
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    umount "$mnt/models" "$mnt/data" 2>/dev/null || true
    buildah "${store[@]}" umount "$ctr" >/dev/null 2>&1 || true
    buildah "${store[@]}" rm "$ctr" >/dev/null 2>&1 || true
    buildah "${store[@]}" rmi "$tag" >/dev/null 2>&1 || true
}
trap cleanup EXIT

mkdir -p "$mnt/data"
mount --bind -o ro "$models" "$mnt/models"
mount --bind -o ro "$spider/database/concert_singer" "$mnt/data"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
cat > "$mnt/etc/quorum/quorum.toml" <<TOML
[server]
listen = "127.0.0.1:$port"
metrics_listen = ""

[[models]]
name = "smol"
source = "/models/smollm2-135m-instruct-q4_1.gguf"
roles = ["generator"]

[databases.entries]
concert_singer = "/data/concert_singer.sqlite"
TOML
chroot --userspec=10001:10001 "$mnt" /usr/local/bin/quorum serve --config /etc/quorum/quorum.toml \
    2>"$CARGO_TARGET_DIR/image-test-serve.log" &
pid=$!
answer="$("$CARGO_TARGET_DIR/debug/quorum" ask --server "http://127.0.0.1:$port" --wait-secs 300 \
    --db concert_singer "How many singers do we have?")"
grep -q "candidate 0" <<<"$answer" || { echo "$answer"; tail -20 "$CARGO_TARGET_DIR/image-test-serve.log"; exit 1; }
chroot --userspec=10001:10001 "$mnt" /usr/local/bin/quorum health \
    --server "http://127.0.0.1:$port" --service liveness
echo "image test: the image's server answered over gRPC as uid 10001, and its HEALTHCHECK passed"
