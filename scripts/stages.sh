# stages.sh, sourced by scripts/test.sh, scripts/demo.sh and scripts/fresh-machine.sh: run a
# script's parts as timed stages.
#   stage NAME COMMAND...   runs COMMAND; records NAME, its exit status and its seconds; a failure
#                           stops the script (set -e) with the status of COMMAND
# When the script ends (passed or not) it prints one line per stage, so a log says where the time
# went and which stage failed (docs/testing.md quotes these lines). A script with an EXIT trap of
# its own calls zt_stage_summary from it.
zt_stage_tag="[$(basename "$0" .sh)]"
zt_stage_lines=()
stage() {
  local name="$1" t0 rc=0
  shift
  echo "$zt_stage_tag stage $name: $*" >&2
  t0=$(date +%s)
  "$@" || rc=$?
  zt_stage_lines+=("$(printf '%s   %-14s exit %-3s %6s s' "$zt_stage_tag" "$name" "$rc" $(($(date +%s) - t0)))")
  return $rc
}
zt_stage_summary() {
  local rc=$? l
  if ((${#zt_stage_lines[@]})); then
    echo "$zt_stage_tag stages:" >&2
    for l in "${zt_stage_lines[@]}"; do echo "$l" >&2; done
  fi
  return $rc
}
trap zt_stage_summary EXIT
