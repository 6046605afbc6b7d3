#!/usr/bin/env bash
# Stands in for tessera in scripts/test-dcgm-compat.sh: serves a broken capture on both ports.
#   curl -s 127.0.0.1:9949/metrics > /tmp/capture.txt    # tessera --demo --metrics.dcgm-compat
#   MUT=copy CAPTURE=/tmp/capture.txt TESSERA_BIN=tests/dcgm/mutants/fake-tessera.sh scripts/test-dcgm-compat.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for a in "$@"; do
  case $a in
    --web.listen-address=*) main=${a##*:} ;;
    --web.dcgm-listen-address=*) dcgm=${a##*:} ;;
  esac
done
tmp=$(mktemp -d)
python3 "$here/break.py" "${MUT:?}" "${CAPTURE:?}" "$tmp/full.txt" "$tmp/dcgm.txt"
python3 "$here/../../prometheus/serve_fixture.py" "$tmp/full.txt" "${main:?}" &
a=$!
python3 "$here/../../prometheus/serve_fixture.py" "$tmp/dcgm.txt" "${dcgm:?}" &
b=$!
trap 'kill $a $b 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 0' TERM INT
wait
