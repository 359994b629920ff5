#!/usr/bin/env bash
# Refuses a tree that tracks what a clone should not download: any file over 40 MiB, and training
# state (a `checkpoint/` directory of `quorum train`, optimizer moments), which belongs in
# `quorum train --state DIR` outside the repository. Adapters keep only what a profile serves or a
# card documents. `.gitignore` says the same. The tracked files together stay under 150 MiB: a run's
# records are kept gzip-compressed, and an adapter no profile serves keeps its card and leaves its
# weights to git's history.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((40 * 1024 * 1024))
tree_limit=$((150 * 1024 * 1024))
total=0
status=0
while IFS= read -r -d '' path; do
  [ -f "$path" ] || continue
  size=$(stat -c %s "$path")
  total=$((total + size))
  if [ "$size" -gt "$limit" ]; then
    echo "check-tree: $path is $size bytes, over the 40 MiB a tracked file may have" >&2
    status=1
  fi
  case "$path" in
    docs/runs/*/*) ;;
    docs/runs/*.jsonl)
      echo "check-tree: $path is an uncompressed run record; commit it as gzip -9 -n made it (.jsonl.gz)" >&2
      status=1 ;;
  esac
  case "/$path" in
    */checkpoint/*|*/optimizer*.safetensors|*/optimizer*.pt|*/optimizer*.bin)
      echo "check-tree: $path is training state; keep it outside the repository (quorum train --state DIR)" >&2
      status=1 ;;
  esac
done < <(git ls-files -z)
if [ "$total" -gt "$tree_limit" ]; then
  echo "check-tree: the tracked files come to $((total / 1024 / 1024)) MiB, over the 150 MiB a clone's tree may have" >&2
  status=1
fi
[ "$status" -eq 0 ] && echo "check-tree: $((total / 1024 / 1024)) MiB tracked, no file over 40 MiB, no training state"
exit "$status"
