# Shared by the CLI tests: paths, a scratch directory, and expect_fail.
set -euo pipefail
B="${ZT_BUILD_DIR:?run through ctest}"
S="${ZT_SOURCE_DIR:?run through ctest}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# expect_fail "what" "substring of the error" cmd...: the command must exit non-zero and print
# the substring on stderr.
expect_fail() {
  local what="$1" needle="$2"; shift 2
  if "$@" >"$TMP/out" 2>"$TMP/err"; then
    echo "FAIL: $what: exit code 0"; cat "$TMP/err"; exit 1
  fi
  if ! grep -qF -- "$needle" "$TMP/err"; then
    echo "FAIL: $what: stderr lacks '$needle':"; cat "$TMP/err"; exit 1
  fi
  echo "ok: $what -> $(grep -m1 -F -- "$needle" "$TMP/err" | cut -c1-160)"
}
# losses FILE: the loss column of a --log file, one per line (exact decimal repr).
losses() { python3 -c 'import json,sys; [print(repr(json.loads(l)["loss"])) for l in open(sys.argv[1])]' "$1"; }

# MPI: mpirun as the tests run it. Every rank carries ZT_TEST_TAG (this test's scratch directory),
# so that rank_pid finds this test's ranks, never those of another test running beside it
# (ctest -j).
MPI=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -x "ZT_TEST_TAG=$TMP")
# rank_pid R: the pid of rank R of this test's running zt-train job (empty if there is none).
rank_pid() {
  local p env
  for p in $(pgrep -f "$B/zt-train"); do
    env="$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null)" || continue
    if grep -qx "OMPI_COMM_WORLD_RANK=$1" <<<"$env" && grep -qxF "ZT_TEST_TAG=$TMP" <<<"$env"; then
      echo "$p"
      return
    fi
  done
}
