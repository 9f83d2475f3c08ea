# The installed package, consumed the way a user consumes it (docs/install.md):
# `cmake --install` this build into a temporary prefix, check its layout (the CMake package, the
# public headers and nothing private, every installed header's includes installed too), a
# version the package must refuse, then configure and build each of examples/ as its own CMake
# project with find_package(ZeroTensor) -DCMAKE_PREFIX_PATH=<prefix> and run it:
#   train_custom  a custom model trained with ZeRO stage 3 on 2 MPI ranks, dry-run first: the
#                 dry run's peaks are the measured ones, the loss falls, each
#                 rank holds half the parameters
#   generate      samples from a checkpoint of the installed zt-train: the text zt-generate prints
#   estimate      a dry run as a library (train/dry_run.h): ZeRO's model states per stage, and
#                 zt-estimate --model's step peak
#   readme        the README's example (tests/check_doc_blocks.py keeps the two equal) on 2 ranks:
#                 the losses of the installed zt-train with the same settings
# Run by CTest (label install; registered in tests/CMakeLists.txt).
source "$(dirname "${BASH_SOURCE[0]}")/cli/common.sh"
P="$TMP/prefix"
cmake --install "$B" --prefix "$P" >"$TMP/install.log"
echo "ok: installed into a temporary prefix ($(grep -c Installing "$TMP/install.log") files)"

# ---- the layout ----
for f in lib/cmake/ZeroTensor/ZeroTensorConfig.cmake lib/cmake/ZeroTensor/ZeroTensorConfigVersion.cmake \
         lib/cmake/ZeroTensor/ZeroTensorTargets.cmake lib/libzt_core.a lib/libzt_train.a \
         include/zt/train/trainer.h include/zt/nn/layers.h include/zt/core/backend_ops.def \
         bin/zt-train bin/zt-generate bin/zt-estimate share/ZeroTensor/configs/zero3.json; do
  [ -f "$P/$f" ] || { echo "FAIL: $f is not installed"; exit 1; }
done
# the installed tools load the OpenMP OpenBLAS the build linked (their run path keeps its folder)
readelf -d "$P/bin/zt-train" | grep -q "R.*PATH.*openblas-openmp" ||
  { echo "FAIL: the installed zt-train's run path lacks OpenBLAS's folder:"; readelf -d "$P/bin/zt-train" | grep PATH; exit 1; }
echo "ok: the installed zt-train's run path keeps OpenBLAS's OpenMP build"
# private headers stay private (cmake/install.cmake: the kernels and ZT_PRIVATE_HEADERS)
for f in core/kernels zero/stage.h zero/aio_engine.h autograd/op_util.h tools tests bench; do
  [ ! -e "$P/include/zt/$f" ] || { echo "FAIL: include/zt/$f is installed: it is private"; exit 1; }
done
# every #include "..." of an installed header names an installed header
python3 - "$P/include/zt" <<'EOF'
import pathlib, re, sys
root = pathlib.Path(sys.argv[1])
headers = [p for p in root.rglob("*") if p.is_file()]
bad = [f"{p.relative_to(root)} includes \"{inc}\"" for p in headers
       for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', p.read_text(), re.M) if not (root / inc).is_file()]
if bad:
    sys.exit("FAIL: installed headers include headers that are not installed:\n  " + "\n  ".join(bad))
print(f"ok: {len(headers)} public headers, every include among them installed")
EOF

# ---- the version file refuses a version this is not ----
mkdir -p "$TMP/v99"
echo 'cmake_minimum_required(VERSION 3.25)
project(v99 LANGUAGES NONE)
find_package(ZeroTensor 99.0 REQUIRED)' >"$TMP/v99/CMakeLists.txt"
expect_fail "find_package(ZeroTensor 99.0) against $(sed -n 's/.*PACKAGE_VERSION "\(.*\)".*/\1/p' \
  "$P/lib/cmake/ZeroTensor/ZeroTensorConfigVersion.cmake" | head -1)" "compatible with requested version \"99.0\"" \
  cmake -S "$TMP/v99" -B "$TMP/v99/build" -DCMAKE_PREFIX_PATH="$P"

# ---- each example: its own CMake project against the prefix (two builds at a time) ----
build_example() {
  cmake -S "$S/examples/$1" -B "$TMP/ex/$1" -DCMAKE_PREFIX_PATH="$P" >"$TMP/ex-$1.log" 2>&1 &&
    cmake --build "$TMP/ex/$1" >>"$TMP/ex-$1.log" 2>&1 || { echo "FAIL: example $1 does not build:"; cat "$TMP/ex-$1.log"; return 1; }
}
build_example train_custom & a=$!
build_example generate & b=$!
wait $a && wait $b
build_example estimate & a=$!
build_example readme & b=$!
wait $a && wait $b
echo "ok: the 4 examples configure and build against the installed package"
X="$TMP/ex"

# ---- (a) train_custom: ZeRO stage 3 on 2 ranks ----
"${MPI[@]}" -np 2 "$X/train_custom/train_custom" >"$TMP/a.out"
cat "$TMP/a.out"
python3 - "$TMP/a.out" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
loss = [float(x) for x in re.findall(r"loss (\S+)", text)]
held = [(int(b), int(p), int(n)) for b, p, n in re.findall(r"holds (\d+) bytes of parameters: its shard of (\d+) \(padded\) on (\d+) ranks", text)]
assert len(loss) == 7, f"FAIL: expected 7 loss lines, got {loss}"
assert 3.9 < loss[0] < 4.5, f"FAIL: the first loss {loss[0]} is not near ln(64) = 4.16"
assert loss[-1] < 0.25 * loss[0], f"FAIL: the loss did not fall: {loss}"
assert len(held) == 2 and all(n == 2 for _, _, n in held), f"FAIL: expected 2 ranks' memory lines: {held}"
for b, p, n in held:  # stage 3: after the step a rank holds its shard, half of the padded fp32 parameters
    assert b == 4 * p // 2, f"FAIL: a rank holds {b} bytes of {4 * p} parameter bytes, not half"
# the dry run of the custom model (train/dry_run.h) predicted each rank's step peaks to the byte
exact = re.findall(r"rank (\d): every peak as the dry run predicted", text)
assert sorted(exact) == ["0", "1"], f"FAIL: the dry run's peaks were not every rank's measured peaks: {text}"
print(f"ok: train_custom's loss {loss[0]} -> {loss[-1]}, each rank holds half of {4 * held[0][1]} parameter bytes, "
      "and every rank's step peaks are the dry run's")
EOF

# ---- (b) generate: from a checkpoint of the installed zt-train ----
"$P/bin/zt-train" --model gpt2-nano --train "$S/data/corpus/train.txt" --steps 20 -b 4 -t 64 --lr 3e-3 \
  --ckpt-dir "$TMP/ckpt" >"$TMP/train.out" 2>&1 || { cat "$TMP/train.out"; exit 1; }
OMP_NUM_THREADS=1 "$X/generate/generate" "$TMP/ckpt" "// defines:" 60 0.8 40 >"$TMP/b.out"
"$P/bin/zt-generate" --ckpt "$TMP/ckpt" --prompt "// defines:" -n 60 --temperature 0.8 --top-k 40 --threads 1 >"$TMP/b.ref"
cmp "$TMP/b.out" "$TMP/b.ref" || { echo "FAIL: generate differs from zt-generate:"; cat "$TMP/b.out" "$TMP/b.ref"; exit 1; }
echo "ok: generate prints zt-generate's text ($(wc -c <"$TMP/b.out") bytes)"
expect_fail "generate with no checkpoint there" "$TMP/none" "$X/generate/generate" "$TMP/none"

# ---- (c) estimate: a dry run as a library: ZeRO's model states, and zt-estimate --model's peak ----
"$X/estimate/estimate" gpt2-124m 8 >"$TMP/c.out"
cat "$TMP/c.out"
"$P/bin/zt-estimate" --model gpt2-124m --stage 3 --world-size 8 --precision bf16 --compute-dtype bf16 -b 4 -t 1024 \
  --threads 1 --json >"$TMP/c.json"
python3 - "$TMP/c.out" "$TMP/c.json" <<'EOF'
import json, re, sys
text = open(sys.argv[1]).read()
rows = {int(s): (int(m), int(p)) for s, m, p in
        re.findall(r"^stage (\d): model states (\d+) bytes .*, step peak (\d+) bytes", text, re.M)}
assert sorted(rows) == [0, 1, 2, 3], f"FAIL: expected a line for each of stages 0-3: {text}"
states, peaks = [rows[s][0] for s in range(4)], [rows[s][1] for s in range(4)]
tool = json.load(open(sys.argv[2]))[0]  # rank 0
N, P = 8, tool["psi_padded"]
# the ZeRO paper's model states (bf16: 2 + 2 + 12 bytes per parameter), on the padded layout
want = [16 * P, 4 * P + 12 * P // N, 2 * P + 14 * P // N]
assert states[:3] == want, f"FAIL: stages 0-2 model states {states[:3]}, expected 16P, 4P + 12P/N, 2P + 14P/N = {want}"
# stage 3: 16P/N, plus the small units that stay gathered (the persistence threshold)
assert 16 * P // N <= states[3] < 1.01 * 16 * P // N, f"FAIL: stage 3 model states {states[3]}, expected ~16P/N = {16 * P // N}"
# the peaks: each of stages 0-2 sheds what it shards; stage 3 pays for the units it gathers, still far below stage 0
assert all(p > 0 for p in peaks) and peaks[0] > peaks[1] > peaks[2] and peaks[3] < peaks[0], f"FAIL: step peaks {peaks}"
assert peaks[3] == tool["device"]["steady_step"]["peak_total"], \
    f"FAIL: stage 3's step peak {peaks[3]}, zt-estimate --model's {tool['device']['steady_step']['peak_total']}"
print(f"ok: estimate's model states are ZeRO's 16P, 4P + 12P/N, 2P + 14P/N, ~16P/N (P = {P}, N = {N}); "
      "its stage-3 step peak is zt-estimate --model's")
EOF
expect_fail "estimate of an unknown model" "no-such-model" "$X/estimate/estimate" no-such-model

# ---- the README's example: 2 ranks, the losses of zt-train with the same settings ----
"${MPI[@]}" -np 2 "$X/readme/readme" "$S/data/corpus/train.txt" >"$TMP/r.out"
"${MPI[@]}" -np 2 "$P/bin/zt-train" --model gpt2-nano --train "$S/data/corpus/train.txt" -b 4 -t 64 --steps 20 \
  --lr 3e-3 --zero-stage 3 --log "$TMP/r.jsonl" >"$TMP/r.train" 2>&1 || { cat "$TMP/r.train"; exit 1; }
python3 -c 'import json,sys; [print("step %2d  loss %.6f" % (i + 1, json.loads(l)["loss"])) for i, l in enumerate(open(sys.argv[1]))]' \
  "$TMP/r.jsonl" >"$TMP/r.ref"
[ "$(wc -l <"$TMP/r.out")" = 20 ] && cmp "$TMP/r.out" "$TMP/r.ref" ||
  { echo "FAIL: the README example's losses differ from zt-train's:"; paste "$TMP/r.out" "$TMP/r.ref"; exit 1; }
echo "ok: the README example on 2 ranks gives zt-train's 20 losses ($(head -1 "$TMP/r.out" | cut -c10-) -> $(tail -1 "$TMP/r.out" | cut -c10-))"
