#!/usr/bin/env bash
# The GPU pack, proven here without a GPU (label pack): scripts/gpu-pack.sh packs
# this build (ZT_PACK_NO_BUILD: the flags of a real pack build are its own business), then
#  1. scripts/gpu-check.sh runs its info and ldd parts on the pack: every packed program and
#     library resolves, each bundled library to the pack's own copy, with no library path set;
#     zt-info, run from the pack, reports "no CUDA device" cleanly and exits 0;
#  2. CPU programs run from the folder: zt-train, and two ranks of zt-train under the pack's own
#     mpirun (OpenMPI's plugins and settings from the pack: env.sh), ZeRO-3 on gpt2-nano; the two
#     runs' losses agree (1e-5, as the multi-rank tests).
# Skipped (77) in a build without CUDA: there is nothing to pack.
source "$(dirname "$0")/common.sh"
[ -x "$B/tests/zt_gpu_tests" ] || { echo "SKIP: a build without CUDA has no GPU pack"; exit 77; }
command -v patchelf >/dev/null || { echo "FAIL: patchelf is missing (scripts/install-deps.sh)"; exit 1; }

P="$TMP/pack"
BUILD_DIR="$B" ZT_PACK_NO_BUILD=1 ZT_PACK_NO_ARCHIVE=1 ZT_PACK_NO_PEERS=1 bash "$S/scripts/gpu-pack.sh" "$P" 2>"$TMP/pack.err" \
  || { cat "$TMP/pack.err"; exit 1; }
for f in bin/zt-train bin/zt-estimate bin/zt-info bin/zt_gpu_tests bin/mpirun env.sh MANIFEST tests/gpu/test_train_gpu.sh \
         data/corpus/train.txt bench/offload_ladder.py configs/models/llama3-8b.json; do
  [ -e "$P/$f" ] || { echo "FAIL: the pack lacks $f"; exit 1; }
done
ls "$P"/lib/libopenblas.so.0 "$P"/lib/libmpi.so.40 "$P"/lib/liburing.so.2 >/dev/null || { echo "FAIL: bundled libraries missing"; exit 1; }
echo "ok: pack made: $(du -sh "$P" | cut -f1), $(grep -c "^lib/" "$P/MANIFEST") bundled libraries"

# 1. the check's info and ldd parts, with no library path
env -u LD_LIBRARY_PATH ZT_CHECK_ONLY='^$' bash "$S/scripts/gpu-check.sh" "$P" "$TMP/out" >"$TMP/check.out" 2>&1 \
  || { cat "$TMP/check.out"; exit 1; }
python3 - "$TMP/out/gpu.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
st = {r["part"]: r for r in d["parts"]}
for p in ("info", "ldd"):
    assert p in st, f"part {p} missing: {list(st)}"
    assert st[p]["status"] == "pass", f"part {p}: {st[p]['status']}\n{st[p]['log_tail']}"
cuda = d["zt_info"]["cuda"]
assert not any(dev.get("supported") for dev in cuda.get("devices", [])), cuda
assert "no CUDA device" in st["info"]["log_tail"], st["info"]["log_tail"]
print("ok: gpu-check info and ldd parts pass; zt-info from the pack: no CUDA device")
PY

# 2. CPU runs from the folder, one rank and two under the pack's mpirun
(
  unset LD_LIBRARY_PATH
  source "$P/env.sh"
  A=(--model gpt2-nano --train "$P/data/corpus/train.txt" -t 32 --steps 3 --threads 1 --zero-stage 3)
  "$P/bin/zt-train" "${A[@]}" -b 2 --log "$TMP/np1.jsonl" 2>"$TMP/np1.err" || { cat "$TMP/np1.err"; exit 1; }
  "$P/bin/mpirun" -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 "$P/bin/zt-train" "${A[@]}" -b 1 \
    --log "$TMP/np2.jsonl" 2>"$TMP/np2.err" || { cat "$TMP/np2.err"; exit 1; }
  grep -q "2 ranks" "$TMP/np2.err" || { echo "FAIL: the pack's mpirun did not start 2 ranks"; cat "$TMP/np2.err"; exit 1; }
) || exit 1
python3 - "$TMP/np1.jsonl" "$TMP/np2.jsonl" <<'PY'
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(a) == len(b) == 3, (a, b)
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
assert worst <= 1e-5, (worst, a, b)
print(f"ok: zt-train from the pack, 2 ranks (pack's mpirun) vs 1: {worst:.2e}")
PY
