#!/usr/bin/env bash
# The CUDA probe as it runs in a container, without a GPU: lab/device/containers'
# dry run. Tenants run as PID 1 of their own PID, mount and cgroup namespaces, with the chart's
# admission policy's two read-only mounts and one variable (enter.sh); one of them as another
# user (nobody), one with a worker process that loads the probe too, and a stray process that
# holds no GPU (NVML lists it nowhere) but whose probe writes to the socket. Their probes load
# against the stand-in CUPTI and report to tessera (the debug build, on the fake NVML) on
# /run/tessera/probe.sock. Checked for every pod:
#   - its probe series carry its host PID (SO_PEERCRED across the namespace), not its PID 1;
#   - their labels are exactly namespace/pod/container, with the GPU's sharing_mode;
#   - the stray's reports appear nowhere;
# and that the checks fail on planted faults: the socket at mode 0600 (the other user's probe
# is refused, root's still reports), NVML listing the stray (its reports then show), and the
# policy's variable missing (no probe reports).
#
#   scripts/test-probe-namespaces.sh      # root; ends with `test_probe_namespaces: N passed, M failed`
#
# Needs the debug build of tessera, fake-nvml and examples/fake_cluster (cargo test builds them)
# and scripts/build-probe.sh's probe and stand-in CUPTI (built here if missing).
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0 failed=0
# shellcheck source=lib/harness.sh
. scripts/lib/harness.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-probe-ns.XXXXXX")
trap 'rm -rf "$work"' EXIT
finish() {
  echo
  echo "test_probe_namespaces: $passed passed, $failed failed"
  ((failed == 0))
  exit
}
[ "$(id -u)" -eq 0 ] || { fail "needs root: it makes namespaces and mounts"; finish; }
for tool in unshare setpriv python3 /usr/bin/python3; do
  command -v "$tool" >/dev/null || { fail "$tool is missing"; finish; }
done
if [[ ! -f target/debug/tessera || ! -f target/debug/examples/fake_cluster || ! -f target/debug/libfake_nvml.so ]]; then
  # Two runs: with --example, cargo builds only the example, not fake-nvml's library itself.
  { cargo build -q -p tessera -p fake-nvml && cargo build -q -p tessera --example fake_cluster; } \
    || { fail "cargo build"; finish; }
fi
if [[ ! -f target/probe/libtessera_probe.so || ! -f target/probe/libfake_cupti.so ]]; then
  scripts/build-probe.sh >/dev/null || { fail "scripts/build-probe.sh"; finish; }
fi

# run NAME [ENV=VALUE...]: lab/device/containers/run.sh's dry run; its summary in $work/NAME.
run() {
  local name=$1
  shift
  env "$@" CTR_INJECT=0 CTR_WARM=3 DRY=1 OUT="$work/$name" TESSERA=target/debug/tessera \
    FAKE_CLUSTER=target/debug/examples/fake_cluster timeout 240 bash lab/device/containers/run.sh \
    >"$work/$name.log" 2>&1
  [[ -f $work/$name/summary.md ]] || { tail -20 "$work/$name.log" | sed 's/^/      /'; return 1; }
}
# row NAME POD: the pod's row of the summary table.
row() { grep -E "^\| [a-z-]+ \| $2 \|" "$work/$1/summary.md"; }
# field NAME POD N: its Nth column.
field() { row "$1" "$2" | awk -F' [|] ' -v n="$3" '{print $n}'; }
# good NAME POD: its probe series carry exactly its processes' host PIDs, and its own labels.
good() {
  local host label
  host=$(field "$1" "$2" 4 | sed 's/, worker /,/' | tr ',' '\n' | sort | paste -sd,)
  label=$(field "$1" "$2" 5 | tr ',' '\n' | sort | paste -sd,)
  [[ -n $host && $host == "$label" && $(field "$1" "$2" 6) == "energy/$2/main, time-slicing" ]]
}

section "four tenants in namespaces, one of them another user"
if run honest CTR_MEASURE=6; then
  for pod in ts-a ts-b mps-a mps-b; do
    if good honest "$pod"; then
      pass "$pod: PID $(field honest "$pod" 3) inside is filed under host PID $(field honest "$pod" 4), as energy/$pod/main"
    else
      fail "$pod: $(row honest "$pod" | cut -c1-240)"
    fi
  done
  if [[ $(field honest ts-a 5) == *,* ]]; then pass "ts-a's worker process reports under its own host PID, in ts-a's pod"
  else fail "ts-a's worker process has no probe series of its own"; fi
  if grep -q "^stray .*: no probe series in any" "$work/honest/summary.md"; then
    pass "a process NVML lists on no GPU, its probe writing to the socket, gets no series: $(grep -o 'host PID [0-9]*' "$work/honest/summary.md" | head -1)"
  else fail "the stray process: $(grep '^stray' "$work/honest/summary.md")"; fi
  if grep -q "uid 65534" "$work/honest/summary.md"; then pass "ts-b ran as uid 65534 and reached the socket (mode $(grep -o "'mode': '0o[0-7]*'" "$work/honest/summary.md" | head -1 | sed "s/.*0o//; s/'//"))"
  else fail "ts-b did not run as another user"; fi
else
  fail "the dry run did not finish"
fi

section "planted: the socket at mode 0600"
if run socket-0600 CTR_PLANT=socket-0600 CTR_PHASES=time-sliced CTR_MEASURE=4; then
  if good socket-0600 ts-a && row socket-0600 ts-b | grep -q 'not the host PID'; then
    pass "the other user's probe is refused (no series for ts-b), root's ts-a still reports"
  else
    fail "mode 0600 was not caught: $(row socket-0600 ts-b | cut -c1-200)"
  fi
else
  fail "the planted run did not finish"
fi

section "planted: NVML lists the stray process"
if run stray-listed CTR_PLANT=stray-listed CTR_PHASES=time-sliced CTR_MEASURE=4; then
  if grep -q "^stray .*probe series carry its PID" "$work/stray-listed/summary.md"; then
    pass "once NVML lists it, its probe's reports show: the honest run's check can fail"
  else
    fail "the listed stray's reports did not show: $(grep '^stray' "$work/stray-listed/summary.md")"
  fi
else
  fail "the planted run did not finish"
fi

section "planted: CUDA_INJECTION64_PATH missing"
if run no-env CTR_PLANT=no-env CTR_PHASES=time-sliced CTR_MEASURE=4; then
  if row no-env ts-a | grep -q 'not the host PID' && row no-env ts-b | grep -q 'not the host PID'; then
    pass "no probe series for either pod"
  else
    fail "a missing variable was not caught: $(row no-env ts-a | cut -c1-200)"
  fi
else
  fail "the planted run did not finish"
fi
finish
