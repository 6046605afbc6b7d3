#!/usr/bin/env bash
# Brings back raw records that left the tree (lab/data/removed.tsv) from git history, each
# checked against its sha256. They are the inputs of the replay scripts (lab/device/corpus/replay*.py)
# and of re-judging old runs; nothing in the test suite reads them.
#
#   lab/restore.sh                         # every removed file
#   lab/restore.sh lab/data/corpus/run22   # those under a path
set -euo pipefail
cd "$(dirname "$0")/.."
# The last commit that held every one of them.
from=323f6b6
prefix=${1:-}
status=0
while IFS=$'\t' read -r path bytes sha; do
  [[ $path == path ]] && continue
  [[ -z $prefix || $path == "$prefix" || $path == "${prefix%/}/"* ]] || continue
  mkdir -p "$(dirname "$path")"
  git show "$from:$path" >"$path"
  if echo "$sha  $path" | sha256sum -c --quiet -; then
    echo "restored $path ($bytes bytes)"
  else
    echo "checksum mismatch: $path" >&2
    status=1
  fi
done <lab/data/removed.tsv
exit $status
