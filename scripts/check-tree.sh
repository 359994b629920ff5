#!/usr/bin/env bash
# Refuses a tree that tracks what a clone should not download: any file over 40 MiB, and training
# state (a `checkpoint/` directory of `quorum train`, optimizer moments), which belongs in
# `quorum train --state DIR` outside the repository. Adapters keep only what a profile serves or a
# card documents. `.gitignore` says the same.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((40 * 1024 * 1024))
status=0
while IFS= read -r -d '' path; do
  [ -f "$path" ] || continue
  size=$(stat -c %s "$path")
  if [ "$size" -gt "$limit" ]; then
    echo "check-tree: $path is $size bytes, over the 40 MiB a tracked file may have" >&2
    status=1
  fi
  case "/$path" in
    */checkpoint/*|*/optimizer*.safetensors|*/optimizer*.pt|*/optimizer*.bin)
      echo "check-tree: $path is training state; keep it outside the repository (quorum train --state DIR)" >&2
      status=1 ;;
  esac
done < <(git ls-files -z)
[ "$status" -eq 0 ] && echo "check-tree: no tracked file over 40 MiB, no training state"
exit "$status"
