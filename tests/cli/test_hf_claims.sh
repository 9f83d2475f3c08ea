#!/usr/bin/env bash
# A model directory whose config.json claims far more than its files hold (1,000,000 layers
# beside the safetensors of 2), and an llm.c checkpoint whose header does the same: zt-generate
# and zt-train must refuse them from the headers, at once and small, with an error naming the
# file, the key and its value and what the files hold (formats/hf_headers.h, docs/formats.md
# "Reading untrusted files").
#
# Measured on a 2-core machine (2026-12): before the readers held config.json against the files,
# `zt-generate --hf` grew to 4.5-6.2 GiB of resident memory in 10 s (~24 GB over minutes) and
# `zt-train --init-from` to 5.2-6.3 GiB in 10 s (9 GB in 27 s before its error), building the
# million layers; now each ends in 0.02 s at 13 MiB. The bounds below (1 s, 200 MiB) leave room
# for a loaded machine, not for building the model. Label footprint: the sanitizer run leaves
# this out (ASan's shadow memory is not the program's RSS); tests/test_hf_errors.cpp checks the
# messages there.
source "$(dirname "$0")/common.sh"
TRAIN="$S/data/corpus/train.txt"

# bounded "what" "substring of the error" cmd...: the command must fail (exit 1, not killed) within
# 1 s of wall time and 200 MiB of peak RSS (getrusage of the child), printing the substring on stderr.
bounded() {
  local what="$1" needle="$2"; shift 2
  read -r rc wall kib < <(python3 - "$TMP/err" "$@" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
with open(sys.argv[1], "wb") as err:
    try:
        rc = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=err, timeout=10).returncode
    except subprocess.TimeoutExpired:  # killed and reaped: its peak still counts below
        rc = "timeout"
print(rc, f"{time.monotonic() - t:.3f}", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
)
  if [ "$rc" != 1 ]; then echo "FAIL: $what: exit $rc after $wall s, peak RSS $((kib / 1024)) MiB"; cat "$TMP/err"; exit 1; fi
  if ! grep -qF -- "$needle" "$TMP/err"; then echo "FAIL: $what: stderr lacks '$needle':"; cat "$TMP/err"; exit 1; fi
  if ! python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 1.0 else 1)" "$wall"; then
    echo "FAIL: $what: the error took $wall s (bound 1 s)"; exit 1
  fi
  if ((kib > 200 * 1024)); then echo "FAIL: $what: peak RSS $((kib / 1024)) MiB (bound 200 MiB)"; exit 1; fi
  echo "ok: $what: $wall s, peak RSS $((kib / 1024)) MiB -> $(grep -m1 -F -- "$needle" "$TMP/err" | cut -c1-200)"
}

# claim DIR KEY VALUE: DIR/config.json with KEY set to VALUE.
claim() {
  python3 - "$1/config.json" "$2" "$3" <<'PY'
import json, sys
path, key, value = sys.argv[1], sys.argv[2], int(sys.argv[3])
j = json.load(open(path))
j[key] = value
json.dump(j, open(path, "w"), indent=2)
PY
}

for model in gpt2-nano llama-nano; do
  D="$TMP/$model"
  "$B/zt-train" --model "$model" --train "$TRAIN" -b 2 -t 32 --steps 1 --save-hf "$D" >/dev/null 2>&1
  key=n_layer
  [ "$model" = llama-nano ] && key=num_hidden_layers
  claim "$D" "$key" 1000000
  msg="'$D/config.json' has $key = 1000000, but '$D/model.safetensors' holds layers 0..1 (999998 layers missing: 2..999999)"
  bounded "$model: zt-generate --hf, $key 1000000" "$msg" "$B/zt-generate" --hf "$D" --prompt-ids 1,2 -n 2
  bounded "$model: zt-train --init-from, $key 1000000" "$msg" \
    "$B/zt-train" --init-from "$D" --train "$TRAIN" -b 2 -t 32 --steps 1
done

# llm.c: the header of tests/data/gpt2_tiny.bin with n_layer (header[4]) = 1000000.
python3 - "$S/tests/data/gpt2_tiny.bin" "$TMP/layers.bin" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<i", b, 16, 1000000)
open(sys.argv[2], "wb").write(b)
PY
msg="llm.c checkpoint '$TMP/layers.bin' is truncated"
bounded "llm.c: zt-generate --llmc, n_layer 1000000" "$msg" "$B/zt-generate" --llmc "$TMP/layers.bin" --prompt-ids 1,2 -n 2
bounded "llm.c: zt-train --init-from, n_layer 1000000" "n_layer = 1000000 (header[4])" \
  "$B/zt-train" --init-from "$TMP/layers.bin" --train "$TRAIN" -b 2 -t 32 --steps 1
