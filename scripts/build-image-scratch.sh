#!/usr/bin/env bash
# Builds the CPU image without pulling a base image: `FROM scratch` with buildah, holding the
# `quorum` binary (stripped) and the shared libraries it links (glibc, libm, libgcc_s), the
# shipped adapters, a non-root user and the same environment, entry point and HEALTHCHECK as
# deploy/Containerfile. Models and databases are volumes, as there. It has no Python, so the
# init step that runs scripts/fetch-models.sh needs the Containerfile's image or a filled
# volume. Uses the binary this checkout builds (the dev profile, optimized dependencies).
#   scripts/build-image-scratch.sh [TAG] [OCI_ARCHIVE]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
tag="${1:-localhost/quorum:cpu-scratch}"
archive="${2:-}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quorum-target}"
if ! command -v buildah >/dev/null; then
    echo "installing buildah (Debian)" >&2
    apt-get install -y -q buildah >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q buildah >/dev/null; }
fi
store=(--storage-driver vfs)
# Docker format: OCI image configs have no HEALTHCHECK.
export BUILDAH_FORMAT=docker

(cd "$repo" && cargo build --quiet -p quorum-server --bin quorum)
root="$(mktemp -d)"
ctr=""
# A failed step leaves no half-built working container behind.
trap 'rm -rf "$root"; [[ -z "$ctr" ]] || buildah "${store[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
install -D -m 755 "$CARGO_TARGET_DIR/debug/quorum" "$root/usr/local/bin/quorum"
strip "$root/usr/local/bin/quorum"
# The loader and every library the binary links, at the paths the binary asks for.
ldd "$CARGO_TARGET_DIR/debug/quorum" | grep -oE '/[^ ]+' | while read -r lib; do
    install -D -m 755 "$(readlink -f "$lib")" "$root$lib"
done
mkdir -p "$root/etc" "$root/cache" "$root/tmp" "$root/opt/quorum" "$root/models" "$root/etc/quorum"
printf 'root:x:0:0:root:/root:/sbin/nologin\nquorum:x:10001:10001:quorum:/cache:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nquorum:x:10001:\n' >"$root/etc/group"
cp -r "$repo/adapters" "$root/opt/quorum/adapters"
# A run still training keeps its resumable state in checkpoint/: training state, not served.
rm -rf "$root/opt/quorum/adapters"/*/checkpoint
chmod 1777 "$root/tmp"
chown 10001:10001 "$root/cache"

ctr="$(buildah "${store[@]}" from scratch)"
buildah "${store[@]}" copy "$ctr" "$root/" / >/dev/null
buildah "${store[@]}" config \
    --env QUORUM_MODELS_DIR=/models --env QUORUM_ADAPTERS_DIR=/opt/quorum/adapters \
    --env HOME=/cache --user 10001:10001 --port 50051 --port 9464 \
    --healthcheck 'CMD ["quorum", "health", "--server", "http://127.0.0.1:50051", "--service", "liveness"]' \
    --healthcheck-interval 10s --healthcheck-timeout 5s --healthcheck-start-period 300s \
    --healthcheck-retries 3 \
    --entrypoint '["quorum"]' --cmd 'serve --config /etc/quorum/quorum.toml' \
    --label org.opencontainers.image.title=quorum "$ctr"
buildah "${store[@]}" commit --format docker --rm "$ctr" "$tag" >/dev/null
ctr=""
echo "built $tag: $(buildah "${store[@]}" images --format '{{.Size}}' "$tag")"
if [[ -n "$archive" ]]; then
    buildah "${store[@]}" push "$tag" "oci-archive:$archive:$tag" >/dev/null
    echo "wrote $archive"
fi
