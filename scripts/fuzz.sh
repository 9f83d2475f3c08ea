#!/usr/bin/env bash
# fuzz.sh [SECONDS]: build the fuzz targets of tests/fuzz/ and run each for SECONDS (default 60,
# or $ZT_FUZZ_SECONDS) from seed corpora our own writers make.
#
# Build: ${FUZZ_BUILD_DIR:-build-fuzz}, clang with libFuzzer, ASan and UBSan on every object
# (CMake option ZT_FUZZ), CPU only: scripts/sanitizer-build.sh, shared with scripts/sanitize.sh.
# Seeds: make_seeds (safetensors, llm.c v3/v5, token shard and
# text, HF config.json) and configs/*.json for the config target. Each target runs with
# -rss_limit_mb=2048 (a reader that allocates what a header asks for is a finding) and
# -timeout=10 (a hang is a finding). Findings (crash inputs) are written to
# ${FUZZ_OUT:-<build>/fuzz-out}/<target>-crash-*; the script fails if any target finds one.
# Last, a table: target, seconds, executions, coverage (libFuzzer's cov: edges), corpus size.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECS="${1:-${ZT_FUZZ_SECONDS:-60}}"
BUILD="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
OUTDIR="${FUZZ_OUT:-$BUILD/fuzz-out}"
say() { echo "[fuzz] $*" >&2; }

targets=()
for f in "$ROOT"/tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
# FUZZ_TARGETS="fuzz_a fuzz_b" runs some; FUZZ_NO_BUILD=1 uses the build and seeds as they are
# (two runs side by side share one build: bench/results/fuzz.md's long runs).
[ -n "${FUZZ_TARGETS:-}" ] && read -r -a targets <<<"$FUZZ_TARGETS"
seeds="$BUILD/seeds"
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then
  say "building ${targets[*]} in $BUILD"
  FUZZ_BUILD_DIR="$BUILD" bash "$ROOT/scripts/sanitizer-build.sh" make_seeds "${targets[@]}"
  rm -rf "$seeds"
  mkdir -p "$seeds/config"
  "$BUILD/make_seeds" "$seeds" >/dev/null
  cp "$ROOT"/configs/*.json "$seeds/config/"
fi
rm -rf "$OUTDIR"
mkdir -p "$OUTDIR"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
rows=()
failed=0
for t in "${targets[@]}"; do
  s="$seeds/${t#fuzz_}"
  corpus="$OUTDIR/corpus-${t#fuzz_}"
  mkdir -p "$corpus"
  say "$t: ${SECS}s from $(ls "$s" | wc -l) seeds"
  rc=0
  "$BUILD/$t" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$OUTDIR/$t-" "$corpus" "$s" >"$OUTDIR/$t.log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUTDIR/$t.log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$OUTDIR/$t.log" | tail -1 | cut -d' ' -f2)
  n=$(ls "$corpus" | wc -l)
  if ((rc != 0)); then
    failed=1
    result="FINDING (exit $rc): $(ls "$OUTDIR" | grep "^$t-" | head -1)"
    tail -40 "$OUTDIR/$t.log" >&2
  else
    result="no finding"
  fi
  rows+=("| $t | $SECS | ${execs:-?} | ${cov:-?} | $n | $result |")
done
echo "| target | seconds | executions | coverage (edges) | corpus | result |"
echo "|---|---:|---:|---:|---:|---|"
printf '%s\n' "${rows[@]}"
exit $failed
