# The stages of scripts/test.sh: each one timed and logged, and a table of them at the end.
# Source it after setting LOGS (a directory); it sets an EXIT trap that stops the lanes still
# running and prints the table, so even an interrupted run says how far it got.
#
#   stage NAME [--expect REGEX] [--needs STAGE]... CMD...     (the options also before NAME)
#       Runs CMD (a command or a function, under `set -e`) with its output in $LOGS/NAME.log.
#       In the foreground the output is shown as it comes, except the harnesses' "ok ..."
#       lines; in a lane only a line when it ends (and the log's tail if it failed).
#       Passes when CMD exits 0 and, with --expect, the log has a line matching REGEX (a
#       harness killed before its summary line fails). --needs: skipped unless STAGE passed.
#   lane NAME FUNCTION
#       Runs FUNCTION, a sequence of `stage` calls, in the background beside the other lanes.
#   lanes_wait
#       Waits for every lane.
#
# Adding a stage is one line in scripts/test.sh, e.g. `stage kube-node scripts/test-kube-node.sh`.
# The run goes on past a failed stage (one CI run shows every failure); scripts/test.sh exits 1
# at the end if any stage failed or was skipped.

STAGES=$LOGS/stages
mkdir -p "$STAGES"
STAGES_T0=$(date +%s%3N)
lane_pids=()

# The result of stage NAME: passed, FAILED, skipped, or running.
stage_result() {
  [[ -f $STAGES/$1 ]] && cut -d' ' -f3 "$STAGES/$1"
}

stage() {
  local expect="" needs=() name="" log rc need started
  # Options before or after NAME: `stage NAME --expect RE CMD...` reads as naturally.
  while [[ $1 == --* || -z $name ]]; do
    case $1 in
      --expect) expect=$2; shift 2 ;;
      --needs) needs+=("$2"); shift 2 ;;
      --*) echo "stage: unknown option $1" >&2; return 2 ;;
      *) name=$1; shift ;;
    esac
  done
  log=$LOGS/$name.log
  started=$(date +%s%3N)
  for need in "${needs[@]}"; do
    if [[ $(stage_result "$need") != passed ]]; then
      echo "$started 0 skipped ${STAGE_LANE:--} needs $need" >"$STAGES/$name"
      echo "== $name: skipped ($need did not pass)"
      return 0
    fi
  done
  echo "$started 0 running ${STAGE_LANE:--}" >"$STAGES/$name"
  set +e
  if [[ -n ${STAGE_LANE:-} ]]; then
    echo "== $name (lane $STAGE_LANE) started"
    (set -e; "$@") </dev/null >"$log" 2>&1
    rc=$?
  else
    echo "== $name"
    (set -e; "$@") </dev/null 2>&1 | tee "$log" | grep -Ev '^ok '
    rc=${PIPESTATUS[0]}
  fi
  set -e
  if ((rc == 0)) && [[ -n $expect ]] && ! grep -qE "$expect" "$log"; then
    rc=1
    echo "   $name: exited 0 without a line matching /$expect/"
  fi
  local secs=$((($(date +%s%3N) - started) / 1000)) result=passed
  ((rc == 0)) || result=FAILED
  echo "$started $secs $result ${STAGE_LANE:--} exit $rc" >"$STAGES/$name"
  echo "== $name: $result in $(mmss "$secs") (log: $log)"
  if ((rc != 0)) && [[ -n ${STAGE_LANE:-} ]]; then
    tail -n 30 "$log" | sed "s/^/   $name| /"
  fi
  return 0
}

lane() {
  local name=$1
  shift
  (STAGE_LANE=$name "$@") &
  lane_pids+=("$!")
}

lanes_wait() {
  local p
  for p in "${lane_pids[@]}"; do wait "$p" || true; done
  lane_pids=()
}

mmss() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

# The table, in order of start; returns 1 if a stage did not pass.
stage_table() {
  local f start secs result lane rest bad=0 total=$((($(date +%s%3N) - STAGES_T0) / 1000))
  echo
  echo "== stages ($(mmss "$total") wall clock, logs in $LOGS)"
  echo "| stage | lane | start | time | result |"
  echo "|---|---|---|---|---|"
  for f in "$STAGES"/*; do
    [[ -f $f ]] || continue
    read -r start secs result lane rest <"$f"
    # Still running when the table is printed: the run was interrupted.
    [[ $result == running ]] && secs=$((($(date +%s%3N) - start) / 1000)) result=interrupted
    echo "$start $(basename "$f") $secs $result $lane"
  done | sort -n | while read -r start name secs result lane; do
    echo "| $name | $lane | +$(mmss $(((start - STAGES_T0) / 1000))) | $(mmss "$secs") | $result |"
  done
  for f in "$STAGES"/*; do
    [[ -f $f ]] || continue
    read -r start secs result rest <"$f"
    [[ $result == passed ]] || bad=$((bad + 1))
  done
  # Checks a test could not run here and said so (a test's report_skipped): counted, never silent.
  if [[ -s $LOGS/skipped.txt ]]; then
    echo "== $(wc -l <"$LOGS/skipped.txt") check(s) inside passing tests were skipped:"
    sed 's/^/   /' "$LOGS/skipped.txt"
  else
    echo "== no check inside a passing test was skipped"
  fi
  if ((bad)); then
    echo "== $bad stage(s) did not pass"
    return 1
  fi
  echo "== all passed"
}

# The processes under PID, top down (a harness before its servers, so that its own trap
# stops them too).
stage_tree() {
  local c
  for c in $(pgrep -P "$1" 2>/dev/null); do
    echo "$c"
    stage_tree "$c"
  done
}

# On any exit: what is still running (lanes, an interrupted stage) is stopped, and the table
# printed. The exit status is 1 if a stage did not pass, else the script's own.
stages_exit() {
  local rc=$? procs=()
  trap - EXIT
  mapfile -t procs < <(stage_tree $$)
  ((${#procs[@]} == 0)) || kill -TERM "${procs[@]}" 2>/dev/null || true
  if stage_table && ((rc == 0)); then exit 0; fi
  ((rc != 0)) || rc=1
  exit "$rc"
}
trap stages_exit EXIT
