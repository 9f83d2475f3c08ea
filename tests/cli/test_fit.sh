#!/usr/bin/env bash
# zt-estimate --fit (train/fit.h): the largest depth of gpt2-nano's family that fits a device
# capacity per rank, found by bisection over dry runs, then both answers tried for real: zt-train
# on 2 ranks under --memory-limit-mib set to that capacity trains the size that fits, and the next
# size up fails with an out-of-memory error naming its category — the planner's line drawn where
# the real engine draws it, to the KiB.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
T="$S/data/corpus/train.txt"
common=(--stage 3 --world-size 2 --batch 2 --seq-len 32 --threads 1)

# 1. A first look: the largest depth under 3 MiB per rank, and what the size above needs.
"$B/zt-estimate" --model gpt2-nano "${common[@]}" --fit layers --device-mib 3 --json >"$TMP/fit0.json"
# 2. The capacity set to the winner's own peak (rounded up to a KiB): it still fits, the next does not.
python3 - "$TMP" "$B" <<'PY'
import json, subprocess, sys
tmp, b = sys.argv[1], sys.argv[2]
f = json.load(open(f"{tmp}/fit0.json"))
best, nxt = f["fits"], f["does_not_fit"]
assert best["size"] >= 2 and nxt["size"] == best["size"] + 1, f"FAIL: expected n and n + 1: {f}"
for key in ("fits", "does_not_fit"):
    json.dump(f[key]["model_config"], open(f"{tmp}/{key}.json", "w"))
dry = json.loads(subprocess.check_output([f"{b}/zt-estimate", "--model", f"{tmp}/fits.json", "--stage", "3",
                                         "--world-size", "2", "--batch", "2", "--seq-len", "32", "--threads", "1",
                                         "--dry-run", "--json"]))
need = max(r["device"]["run"]["peak_total"] for r in dry)
kib = -(-need // 1024)
assert kib * 1024 < nxt["over"]["need"], f"FAIL: the next size needs {nxt['over']['need']}, within a KiB of {need}"
open(f"{tmp}/cap", "w").write(f"{kib / 1024!r}")
print(f"ok: n_layer {best['size']} fits 3 MiB, {nxt['size']} needs {nxt['over']['need']} B "
      f"({nxt['over']['category']} the largest); n_layer {best['size']} peaks at {need} B -> cap {kib} KiB")
PY
cap="$(cat "$TMP/cap")"
"$B/zt-estimate" --model gpt2-nano "${common[@]}" --fit layers --device-mib "$cap" --json >"$TMP/fit1.json"
python3 -c 'import json,sys; f=json.load(open(sys.argv[1])); g=json.load(open(sys.argv[2]));
assert f["fits"]["size"] == g["fits"]["size"], (f, g); print("ok: at its own peak the winner still fits")' \
  "$TMP/fit1.json" "$TMP/fit0.json"

# 3. For real, under that cap.
run() {
  "${MPI[@]}" -np 2 "$B/zt-train" --model "$1" --train "$T" --steps 2 --batch 2 --seq-len 32 --zero-stage 3 \
    --threads 1 --memory-limit-mib "$cap"
}
run "$TMP/fits.json" >"$TMP/fits.out" 2>&1 || { cat "$TMP/fits.out"; echo "FAIL: the size that fits did not train"; exit 1; }
echo "ok: zt-train trains the size that fits under --memory-limit-mib $cap"
if run "$TMP/does_not_fit.json" >"$TMP/next.out" 2>&1; then
  echo "FAIL: the size that does not fit trained under the cap"; exit 1
fi
grep -q "out of memory" "$TMP/next.out" || { cat "$TMP/next.out"; echo "FAIL: no out-of-memory error"; exit 1; }
echo "ok: the next size fails: $(grep -m1 -o 'out of memory.*' "$TMP/next.out" | cut -c1-150)"
