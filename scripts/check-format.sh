#!/usr/bin/env bash
# check-format.sh [BASE]: the C++ / CUDA lines changed since BASE (default HEAD~1: the last commit)
# formatted as .clang-format says. Only the changed lines are checked (git clang-format), so the
# tree's older lines never fail it; the tree is not reformatted. Fails listing each file and the
# change clang-format wants. Run by .ci/run; by hand: scripts/check-format.sh origin/main.
# Exits 0 with a message when clang-format (Debian's clang-format, scripts/install-deps.sh) is
# missing or BASE is not a commit here (a shallow clone of one commit).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
base="${1:-HEAD~1}"
if ! command -v clang-format >/dev/null || ! command -v git-clang-format >/dev/null; then
  echo "[format] skipped: clang-format / git-clang-format not found (scripts/install-deps.sh installs clang-format)" >&2
  exit 0
fi
if ! git rev-parse --verify -q "$base^{commit}" >/dev/null; then
  echo "[format] skipped: '$base' is not a commit of this clone (nothing to compare with)" >&2
  exit 0
fi
mapfile -t files < <(git diff --name-only --diff-filter=ACMR "$base" -- '*.h' '*.cpp' '*.cu')
if ((${#files[@]} == 0)); then
  echo "[format] ok: no .h / .cpp / .cu changed since $base"
  exit 0
fi
# --diff: print what clang-format would change in the changed lines, touch nothing.
out="$(git clang-format --binary "$(command -v clang-format)" --extensions h,cpp,cu --diff "$base" -- "${files[@]}")"
if [[ -z "$out" || "$out" == *"did not modify any files"* || "$out" == *"no modified files to format"* ]]; then
  echo "[format] ok: ${#files[@]} changed file(s) since $base formatted as .clang-format says"
  exit 0
fi
echo "$out"
echo "[format] FAIL: changed lines since $base not formatted as .clang-format says, in:" >&2
grep -E '^\+\+\+ b/' <<<"$out" | sed 's|^+++ b/|  |' >&2
echo "[format] fix: git clang-format --extensions h,cpp,cu $base (formats only the changed C++ lines; without --extensions it also reflows changed .json files), then commit" >&2
exit 1
