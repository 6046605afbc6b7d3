#!/usr/bin/env bash
# The folder scripts/fleet/device.sh reads on the `run` tool's host, made here from this
# machine's Debian binaries and release builds (nothing can be installed there):
#
#   cargo build --release -p tessera -p fleet-history
#   scripts/fleet/carry.sh target/fleet-carry        # then carry ["target/fleet-carry"]
#
# bins.tar.xz: prometheus, promtool, victoria-metrics, vmagent, vmalert (Debian's, from PATH)
# and tessera; fleet-history beside it; py/yaml, PyYAML's pure-Python package; COMMIT.
# Prints the folder's size: with the tree it must stay under the tool's 64 MiB.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:?usage: carry.sh DIR}
TESSERA_BIN=${TESSERA_BIN:-target/release/tessera}
FLEET_HISTORY_BIN=${FLEET_HISTORY_BIN:-target/release/fleet-history}
rm -rf "$out"
mkdir -p "$out/py" "$out/stage"
for b in prometheus promtool victoria-metrics vmagent vmalert; do
  cp "$(command -v "$b")" "$out/stage/"
done
cp "$TESSERA_BIN" "$out/stage/tessera"
strip "$out/stage/"* 2>/dev/null || true
tar cJf "$out/bins.tar.xz" -C "$out/stage" .
rm -rf "$out/stage"
cp "$FLEET_HISTORY_BIN" "$out/fleet-history"
yaml_dir=$(python3 -c 'import os, yaml; print(os.path.dirname(yaml.__file__))')
cp -r "$yaml_dir" "$out/py/yaml"
rm -rf "$out/py/yaml/__pycache__" "$out/py/yaml/"*.so
git rev-parse --short HEAD >"$out/COMMIT" 2>/dev/null || true
du -sh "$out"
