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
