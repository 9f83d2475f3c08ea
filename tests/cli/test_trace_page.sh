#!/usr/bin/env bash
# scripts/trace_page.py: a trace as one HTML page that opens offline, checked in a real browser.
# A stage-3 trace of gpt2-nano on 4 ranks for 20 steps (the size the page must draw in under a
# second) becomes a page of the whole run and a page of step 2. tests/trace_page_check.mjs opens
# each in headless Chromium (puppeteer-core) with every network request refused and recorded:
# no request beyond the file; a lane group per rank with labelled memory lanes; every span of the
# range drawn; hovers show a collective's name and bytes and a memory sample's bytes; the draw
# under 1000 ms; a screenshot. Also the errors on a file that is not a trace and a step not
# traced. Skips (77) only where Chromium cannot start.
source "$(dirname "$0")/common.sh"
CHROMIUM="${ZT_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  echo "SKIP: no Chromium at $CHROMIUM (scripts/install-deps.sh installs Debian's chromium)"
  exit 77
fi
NPM="$S/third_party/npm"

"${MPI[@]}" -np 4 "$B/zt-train" --config "$S/configs/zero3.json" --model gpt2-nano --train "$S/data/corpus/train.txt" \
  -t 32 --threads 1 --steps 20 --trace "$TMP/t.json" 2>"$TMP/run.err" \
  || { echo "FAIL: the 4-rank stage 3 run"; cat "$TMP/run.err"; exit 1; }

check_page() {  # check_page NAME [--step N]: build the page, then check it in Chromium
  local name="$1"; shift
  python3 "$S/scripts/trace_page.py" "$TMP/t.json" --out "$TMP/$name.html" "$@" >"$TMP/$name.out" \
    || { echo "FAIL: trace_page.py $*"; cat "$TMP/$name.out"; exit 1; }
  grep -qE "^wrote $TMP/$name.html: 4 rank\(s\), [0-9]+ events$" "$TMP/$name.out" \
    || { echo "FAIL: trace_page.py printed: $(cat "$TMP/$name.out")"; exit 1; }
  echo "ok: $(cat "$TMP/$name.out")"
  local rc=0
  node "$S/tests/trace_page_check.mjs" --page "$TMP/$name.html" --trace "$TMP/t.json" --ranks 4 \
    --shot "$TMP/$name.png" --npm "$NPM" "$@" || rc=$?
  if [ "$rc" = 77 ]; then exit 77; fi  # Chromium could not start (the script said why)
  if [ "$rc" != 0 ]; then echo "FAIL: the page $name.html in Chromium (exit $rc)"; exit 1; fi
}
check_page run
check_page step2 --step 2

echo '{"not": "a trace"}' >"$TMP/other.json"
expect_fail "a JSON file that is not a trace" "other.json: not a zt-train trace: no 'traceEvents' list" \
  python3 "$S/scripts/trace_page.py" "$TMP/other.json" --out "$TMP/x.html"
expect_fail "a step the trace does not hold" "has no 'step 99' (traced steps: [1, 2," \
  python3 "$S/scripts/trace_page.py" "$TMP/t.json" --step 99 --out "$TMP/x.html"
