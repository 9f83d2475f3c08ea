#!/usr/bin/env bash
# gpu-check.sh [PACK] [OUTDIR]: the whole GPU check, one command on a bare GPU machine.
#
# PACK: the folder scripts/gpu-pack.sh made, or its .tar.xz (unpacked into /tmp); default: the
# folder this script sits in when it is inside a pack, else ./gpu-pack.tar.xz. OUTDIR: where
# everything goes (default $OUT, else ./gpu-out): gpu-check.log (all output), gpu.md and gpu.json
# (one row per part: status, seconds; the libraries used; the benchmark numbers) and parts.tar.gz
# (one log per part).
#
# Each part runs under its own time limit (timeout), so a failure or a hang loses nothing else.
# ZT_CHECK_BUDGET_S (default 3600) bounds the whole check: a part's limit is cut to what is left,
# and a part with no time left is recorded as "not run (budget)", so the summary is always written
# (a lent GPU runs one command for at most 10 minutes). ZT_CHECK_ONLY=REGEX runs only the parts
# whose names match (info and ldd always run). The parts:
#   info        nvidia-smi, the CUDA libraries found, zt-info
#   ldd         every packed program resolves every library (bundled ones inside the pack)
#   gpu.<tag>   the Catch2 GPU tests, one part per tag of tests/gpu/tests.cmake
#   mpi_gpu_buffers.np2/np4, train_gpu   the multi-rank GPU tests and whole training runs vs the CPU
#   bench_gpu_kernels   GEMMs vs cuBLASLt, attention vs cuDNN, element-wise bandwidth
#   bench_train_step    GPT-2 124M bf16, B x 1024 for the largest B of 64, 32, 16, 8 that fits
#   bench_train_step_no_epilogue   the same with GPT-2's forward GELU in our kernel, not cuBLASLt's epilogue
#   step_time_profile   zt-profile on the GPU (GPT-2 124M's step), and zt-estimate --time's step beside it
#   torch_peer          the same step in PyTorch (eager and torch.compile), the MFU to compare with
#   bench_llama, torch_llama_peer   llama-100m bf16: ours, and PyTorch's (eager and compiled)
#   llmc_peer           llm.c's train_gpt2cu, the same step (its default, and nothing recomputed)
#   hf_client           transformers reads our exports and tokenizer.json, we read its checkpoints
#   zero3_memory        ZeRO-3, 2 ranks sharing the GPU: measured peaks beside each rank's dry run
#   offload_ladder      per offload tier, the largest model that trains on this GPU and host (its own call)
#   profile_step        Nsight Compute: every kernel's time in one step, summed by kernel
#   profile_llama       the same for llama-100m
#
# CUDA's libraries are not packed. They are looked for in the CUDA toolkit's library folders and
# in the Python wheels' nvidia/*/lib folders (PyTorch's cuDNN and NCCL); the check says which it
# uses. A library missing there is reported; the parts that need it then fail with the loader's
# message, and the others still run.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -ge 1 ]; then PACK_ARG="$1"; elif [ -f "$HERE/MANIFEST" ]; then PACK_ARG="$HERE"; else PACK_ARG="$PWD/gpu-pack.tar.xz"; fi
OUTDIR="${2:-${OUT:-$PWD/gpu-out}}"
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
PARTS="$(mktemp -d)/parts"
mkdir -p "$PARTS"
LOG="$OUTDIR/gpu-check.log"
: >"$LOG"
say() { echo "[gpu-check] $*" | tee -a "$LOG" >&2; }

# ---- the pack ----
if [ -d "$PACK_ARG" ]; then
  PACK="$(cd "$PACK_ARG" && pwd)"
elif [ -f "$PACK_ARG" ]; then
  dest="/tmp/zt-gpu-pack"
  rm -rf "$dest" && mkdir -p "$dest"
  tar -C "$dest" -xJf "$PACK_ARG" || { say "error: cannot unpack $PACK_ARG"; exit 1; }
  PACK="$(find "$dest" -maxdepth 2 -name MANIFEST -printf '%h\n' | head -1)"
else
  say "error: no pack at $PACK_ARG (make one with scripts/gpu-pack.sh)"; exit 1
fi
[ -f "$PACK/MANIFEST" ] || { say "error: $PACK is not a pack (no MANIFEST)"; exit 1; }
# shellcheck source=/dev/null
source "$PACK/env.sh"
say "pack: $PACK ($(sed -n 2p "$PACK/MANIFEST"))"

# ---- CUDA's libraries on this machine ----
# soname -> the folder it is used from. Toolkit folders first for the runtime and cuBLAS (they
# match nvcc); the wheels first for cuDNN and NCCL (the toolkit has none).
toolkit_dirs=()
for d in "${CUDA_HOME:-/usr/local/cuda}"/lib64 "${CUDA_HOME:-/usr/local/cuda}"/targets/x86_64-linux/lib /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
  [ -d "$d" ] && toolkit_dirs+=("$d")
done
wheel_dirs=()
while read -r d; do [ -n "$d" ] && wheel_dirs+=("$d"); done < <(
  python3 - 2>/dev/null <<'PY'
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "*", "lib"))):
        print(d)
PY
)
declare -A libdir=()
find_lib() {  # find_lib soname dirs...
  local so="$1"; shift
  local d
  for d in "$@"; do
    if [ -e "$d/$so" ]; then libdir[$so]="$d"; return 0; fi
  done
  return 1
}
missing=()
for so in libcudart.so.13 libcublasLt.so.13 libcublas.so.13; do
  find_lib "$so" "${toolkit_dirs[@]}" "${wheel_dirs[@]}" || missing+=("$so")
done
for so in libcudnn.so.9 libnccl.so.2; do
  find_lib "$so" "${wheel_dirs[@]}" "${toolkit_dirs[@]}" || missing+=("$so")
done
ld=""
for so in "${!libdir[@]}"; do
  case ":$ld:" in *":${libdir[$so]}:"*) ;; *) ld="${ld:+$ld:}${libdir[$so]}" ;; esac
done
export LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LIBS_JSON="$PARTS/libraries.json"
{
  echo "{"
  first=1
  for so in libcudart.so.13 libcublasLt.so.13 libcublas.so.13 libcudnn.so.9 libnccl.so.2; do
    if [ -n "${libdir[$so]:-}" ]; then
      v="$(basename "$(readlink -f "${libdir[$so]}/$so")")"
      ((first)) || echo ","; first=0
      printf '  "%s": {"dir": "%s", "file": "%s"}' "$so" "${libdir[$so]}" "$v"
      say "library $so: ${libdir[$so]}/$v"
    else
      ((first)) || echo ","; first=0
      printf '  "%s": null' "$so"
      say "library $so: MISSING (looked in: ${toolkit_dirs[*]} ${wheel_dirs[*]})"
    fi
  done
  echo; echo "}"
} >"$LIBS_JSON"

# ---- parts ----
# part NAME LIMIT_S cmd...: runs cmd under `timeout`, its output to parts/NAME.log and the main
# log; the status line (pass, fail (exit N), timeout after LIMIT_S s) goes to parts/NAME.status.
DEADLINE=$((SECONDS + ${ZT_CHECK_BUDGET_S:-3600}))
part() {
  local name="$1" limit="$2"; shift 2
  if [ -n "${ZT_CHECK_ONLY:-}" ] && [[ ! "$name" =~ ^(info|ldd)$ ]] && [[ ! "$name" =~ $ZT_CHECK_ONLY ]]; then
    return 0
  fi
  local left=$((DEADLINE - SECONDS - 20))
  if ((left < 10)); then
    printf '%s\t%s\t%s\n' "$name" "not run (budget)" 0 >"$PARTS/$name.status"; : >"$PARTS/$name.log"
    say "$name: not run (budget spent)"; return 0
  fi
  ((limit > left)) && limit=$left
  say "---- $name (limit ${limit}s): $*"
  local t0=$SECONDS rc=0
  timeout --kill-after=10 "$limit" "$@" >"$PARTS/$name.log" 2>&1 || rc=$?
  local dt=$((SECONDS - t0)) st
  if ((rc == 0)); then st="pass"
  elif ((rc == 77)); then st="skipped"
  elif ((rc == 124 || rc == 137)); then st="timeout"
  else st="fail (exit $rc)"; fi
  printf '%s\t%s\t%s\n' "$name" "$st" "$dt" >"$PARTS/$name.status"
  tail -n 60 "$PARTS/$name.log" >>"$LOG"
  say "$name: $st in ${dt}s"
  return 0
}

part info 60 bash -c 'nvidia-smi; echo; zt-info; zt-info --json >"'"$PARTS"'/zt-info.json"'

ldd_check() {
  local bad=0 f
  for f in "$PACK"/bin/* "$PACK"/lib/*.so*; do
    local out; out="$(ldd "$f" 2>&1)"
    if grep -q "not found" <<<"$out"; then echo "$f:"; grep "not found" <<<"$out"; bad=1; fi
    # every library the pack bundles must come from the pack (but the OpenCL loader, which oneDNN
    # links: the Khronos ICD loader's ABI is fixed, and the CUDA toolkit's copy, ahead of the pack
    # on LD_LIBRARY_PATH, serves as well)
    while read -r name path; do
      [[ "$name" == libOpenCL.so* ]] && continue
      if [ -e "$PACK/lib/$name" ] && [ "$(readlink -f "$path")" != "$(readlink -f "$PACK/lib/$name")" ]; then
        echo "$f: $name resolves to $path, not the pack's copy"; bad=1
      fi
    done < <(awk '/=>/ && $3 ~ /^\// {print $1, $3}' <<<"$out")
  done
  ldd "$PACK/bin/zt_gpu_tests"
  return $bad
}
export -f ldd_check
export PACK HERE PARTS
part ldd 120 bash -c ldd_check

tags=$(sed -n 's/^ *zt_gpu_test(\([a-z0-9_]*\)).*/\1/p' "$PACK/tests/gpu/tests.cmake")
for tag in $tags; do
  part "gpu.$tag" 300 "$PACK/bin/zt_gpu_tests" "[$tag]"
done
for np in 2 4; do
  part "gpu.mpi_gpu_buffers.np$np" 300 env OMP_NUM_THREADS=1 bash "$PACK/tests/gpu/run_mpi.sh" "$PACK/bin/zt-info" "$np" \
    "$PACK/bin/zt_mpi_tests" "[gpu_buffers]"
done
part gpu.train_gpu 600 env ZT_BUILD_DIR="$PACK/bin" ZT_SOURCE_DIR="$PACK" bash "$PACK/tests/gpu/test_train_gpu.sh"

part bench_gpu_kernels 300 "$PACK/bin/bench_gpu_kernels"

bench_train() {  # bench_train MODEL [FLAGS...]: the largest of B = 64, 32, 16, 8 (T = 1024) that fits
  local b model="$1"
  shift
  for b in 64 32 16 8; do
    echo "== $model bf16, B=$b T=1024 $*"
    if "$PACK/bin/bench_train_step" --model "$model" --batch "$b" --seq 1024 --steps 10 --warmup 3 \
         --device cuda --precision bf16 --threads 8 "$@"; then
      return 0
    fi
  done
  return 1
}
export -f bench_train
part bench_train_step 600 bash -c 'bench_train gpt2-124m'
# The step simulator's GPU profile (docs/step-time.md): GPT-2 124M's bf16 step at B 64, T 1024, its
# ops replayed on the GPU in the step's order, then the simulated step beside bench_train_step's
# measured one (parts/profile_gpt2.json, parts/estimate_time_gpt2.json).
part step_time_profile 300 bash -c '"$PACK/bin/zt-profile" --device cuda --model gpt2-124m -b 64 -t 1024 \
  --precision bf16 --compute-dtype bf16 --stages 0 --threads 8 --repeats 3 -o "'"$PARTS"'/profile_gpt2.json" &&
  "$PACK/bin/zt-estimate" --model gpt2-124m -b 64 -t 1024 --precision bf16 --compute-dtype bf16 --stage 0 \
  --threads 8 --time "'"$PARTS"'/profile_gpt2.json" --json >"'"$PARTS"'/estimate_time_gpt2.json" &&
  python3 -c "import json,sys; t=json.load(open(sys.argv[1]))[0][\"time\"]; print(\"simulated step\", round(t[\"step_s\"]*1e3, 1), \"ms\")" \
  "'"$PARTS"'/estimate_time_gpt2.json"'
# The same step with GPT-2's forward GELU in our kernel after the GEMM instead of cuBLASLt's
# GELU_AUX_BIAS epilogue (the fusion's worth, measured in the same call).
part bench_train_step_no_epilogue 600 bash -c 'bench_train gpt2-124m --gelu-epilogue off'

# The peers in PyTorch: the same step on this GPU, eager and compiled, B 64 x T 1024 (B 32 if 64
# does not fit): GPT-2 124M (bench/torch_gpt2_gpu.py) and llama-100m (bench/torch_llama_gpu.py).
# Needs the machine's python3 with torch.
torch_peer() {  # torch_peer SCRIPT [FLAGS...]
  local py="$PACK/bench/$1" b mode
  shift
  for mode in "" "--compile"; do
    for b in 64 32 16; do
      python3 "$py" "$@" --batch "$b" --seq 1024 $mode && break
    done
  done
}
export -f torch_peer
part torch_peer 420 bash -c 'torch_peer torch_gpt2_gpu.py'

# Llama on the GPU: llama-100m (GQA, RoPE, SwiGLU, RMSNorm), ours and PyTorch's, the same way.
part bench_llama 300 bash -c 'bench_train llama-100m'
part torch_llama_peer 420 bash -c 'torch_peer torch_llama_gpu.py'
# Llama 3.2 1B's shape (1.24 B parameters, 128256-token vocabulary, tied, llama3 RoPE), the same way.
part bench_llama3 420 bash -c 'bench_train llama3.2-1b'
part torch_llama3_peer 540 bash -c 'torch_peer torch_llama_gpu.py --model llama3.2-1b'

# transformers as a client of our files (on this machine's CPU, where transformers is): our
# --save-hf export loaded by from_pretrained, a save_pretrained model read by zt-generate --hf, the
# logits of both compared (float32, 1e-4); our tokenizer.json in PreTrainedTokenizerFast.
part hf_client 240 python3 "$PACK/bench/hf_client.py" --bin "$PACK/bin" --data "$PACK/data/corpus"

# The other peer: llm.c's train_gpt2cu (packed by gpu-pack.sh, built for sm_90), the same GPT-2
# 124M, B 64 x T 1024, cuDNN attention, random ids; llm.c's default (-r 1: GELU recomputed in the
# backward) and -r 0 (nothing recomputed, as ours). One JSON line each (peers/llm.c/README.md).
# -v: run.sh's "-v 0" makes llm.c divide by zero (step % val_loss_every); a period past the last
# step validates at the first and the last step only, -m 1 on one batch (not timed either way).
llmc_peer() {
  local d="$PACK/peers/llm.c" r
  [ -x "$d/bin/train_gpt2cu" ] || { echo "no llm.c peer in the pack (gpu-pack.sh packs ../shared/peers/llm.c)"; return 77; }
  for r in 1 0; do
    echo "== llm.c -r $r"
    LLMC_BIN="$d/bin/train_gpt2cu" bash "$d/run.sh" --batch 64 --seq 1024 --steps 30 --work /tmp/llmc-peer -- -r "$r" -v 1000000 -m 1 || return 1
  done
}
export -f llmc_peer
part llmc_peer 240 bash -c llmc_peer

# ZeRO-3 on GPU memory against the dry run: GPT-2 124M, fp32, 2 ranks sharing the GPU (MPI),
# B 8 x T 1024 per rank, 3 steps; zt-train prints each rank's measured peaks by category beside its
# own dry run (the "dry run" row; the meta device models the CPU backend's kernels, so the gap is
# what the CUDA kernels and the caching allocator do differently).
part zero3_memory 300 env OMP_NUM_THREADS=4 mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none \
  "$PACK/bin/zt-train" --model gpt2-124m --train "$PACK/data/corpus/train.txt" -b 8 -t 1024 --steps 3 \
  --zero-stage 3 --device cuda:0 --dist mpi --threads 4

# ZeRO-Offload's headline on one GPU (bench/offload_ladder.py): for each tier (no offload, the
# optimizer in host memory, + the parameters, the NVMe tier) the largest Llama 3 8B-width model
# (n_layer free) that a dry run of the trial (zt-estimate --model) fits in this GPU's memory, 80%
# of the host's and the free disk, trained 3 steps (its peaks beside the prediction, its TFLOP/s),
# then the next size up, which must fail with the clean out-of-memory (or disk-full) error. The
# dry run's device workspace is the CPU backend's kernels' (the meta device models those, not the
# CUDA kernels): the device's measured / predicted ratio shows the difference. Its own call:
# minutes of host initialization and CPU AdamW on billions of parameters.
# ZT_LADDER_TIERS picks tiers (default all four); the ladder's own budget is what the check has left,
# so it stops between trials and writes its report instead of being killed in one.
ladder_budget=$((DEADLINE - SECONDS - 45)); ((ladder_budget > 560)) && ladder_budget=560
part offload_ladder 580 env OMP_WAIT_POLICY=PASSIVE python3 "$PACK/bench/offload_ladder.py" --bin "$PACK/bin" \
  --device cuda:0 --nvme-dir /tmp/zt-ladder-nvme --out "$PARTS/ladder" --budget-s "$ladder_budget" --trial-timeout 300 \
  --tiers "${ZT_LADDER_TIERS:-gpu,opt-cpu,cpu,nvme}"

# Where the step's GPU time goes: Nsight Compute's duration of every kernel of one GPT-2 124M bf16
# step (B 16 x T 1024, no warmup: the kernels are the same, fewer of them), clocks and caches left
# alone (--clock-control none --cache-control none: ncu's default flushes the caches before every
# kernel, which makes the memory-bound ones look slower than they run), summed by kernel name; the shares are what bench/results/gpu.md quotes.
profile_step() {  # profile_step MODEL CSV
  local ncu; ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)"
  [ -n "$ncu" ] || { echo "no ncu on this machine"; return 77; }
  "$ncu" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
    "$PACK/bin/bench_train_step" --model "$1" --batch 16 --seq 1024 --steps 1 --warmup 0 \
    --device cuda --precision bf16 --threads 8 >"$PARTS/$2" || return 1
  echo "== the step (from its first kernel, the embedding's)"
  python3 "$PACK/bench/ncu_kernel_shares.py" "$PARTS/$2" --top 45 --from emb_fwd_kernel
  echo "== the whole program (the model's setup too)"
  python3 "$PACK/bench/ncu_kernel_shares.py" "$PARTS/$2" --top 10
}
export -f profile_step
part profile_step 200 bash -c 'profile_step gpt2-124m ncu.csv'
# The same for llama-100m (RMSNorm, RoPE, SwiGLU, GQA attention): where its step's time goes.
part profile_llama 200 bash -c 'profile_step llama-100m ncu-llama.csv'

# ---- summary: gpu.md, gpu.json, parts.tar.gz ----
python3 - "$PARTS" "$OUTDIR" "$PACK/MANIFEST" <<'PY'
import glob, json, os, sys, datetime
parts_dir, out, manifest = sys.argv[1:4]
rows = []
for f in sorted(glob.glob(os.path.join(parts_dir, "*.status")), key=os.path.getmtime):
    name, status, secs = open(f).read().rstrip("\n").split("\t")
    log = open(os.path.join(parts_dir, name + ".log"), errors="replace").read()
    rows.append({"part": name, "status": status, "seconds": int(secs), "log_tail": log[-3000:]})
libs = json.load(open(os.path.join(parts_dir, "libraries.json")))
info = {}
p = os.path.join(parts_dir, "zt-info.json")
if os.path.exists(p):
    try: info = json.load(open(p))
    except Exception: pass
doc = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "pack": open(manifest).readline().strip(),
       "commit": open(manifest).readlines()[1].strip(), "libraries": libs, "zt_info": info, "parts": rows}
json.dump(doc, open(os.path.join(out, "gpu.json"), "w"), indent=1)
with open(os.path.join(out, "gpu.md"), "w") as m:
    m.write(f"# GPU check, {doc['date']}\n\n{doc['pack']}; {doc['commit']}\n\n")
    m.write("| part | status | seconds |\n|---|---|---|\n")
    for r in rows: m.write(f"| {r['part']} | {r['status']} | {r['seconds']} |\n")
    m.write("\n## CUDA libraries used\n\n")
    for k, v in libs.items(): m.write(f"- {k}: {v['dir'] + '/' + v['file'] if v else 'MISSING'}\n")
    for r in rows:
        if r["part"].startswith(("bench", "zero3", "torch", "llmc", "profile", "hf", "offload")) or r["status"] != "pass":
            m.write(f"\n## {r['part']}: {r['status']}\n\n```\n{r['log_tail'][-2500:]}\n```\n")
n_pass = sum(r["status"] == "pass" for r in rows)
print(f"{n_pass}/{len(rows)} parts passed")
for r in rows: print(f"  {r['part']:32s} {r['status']:18s} {r['seconds']:5d}s")
PY
tar -C "$(dirname "$PARTS")" -czf "$OUTDIR/parts.tar.gz" parts
say "wrote $OUTDIR/{gpu-check.log,gpu.md,gpu.json,parts.tar.gz}"
