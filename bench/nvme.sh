#!/usr/bin/env bash
# bench/nvme.sh — the NVMe tier's IO path (zero/aio.h: SwapFile, O_DIRECT, io_uring) beside fio with
# the same block size, queue depth, size, directory, O_DIRECT and ioengine=io_uring: sequential write
# then read, GB/s (1e9 bytes/s) each, median of --reps runs, ours and fio's interleaved so a change in
# machine load hits both. Target: ours >= 80% of fio's. Writes bench/results/nvme.md.
# Usage: bench/nvme.sh [--size-mib 1024] [--block-size 1048576] [--queue-depth 8] [--reps 3]
#                      [--dir /path/on/nvme]   (default dir: ${BUILD_DIR:-build}/nvme-bench)
#        (builds bench_nvme in ${BUILD_DIR:-build}; needs fio: scripts/install-deps.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
SIZE=1024; BS=1048576; QD=8; REPS=3; DIR="$BUILD/nvme-bench"
while (($#)); do case "$1" in
  --size-mib) SIZE=$2; shift 2;; --block-size) BS=$2; shift 2;; --queue-depth) QD=$2; shift 2;;
  --reps) REPS=$2; shift 2;; --dir) DIR=$2; shift 2;; *) echo "unknown flag $1" >&2; exit 2;; esac; done
command -v fio >/dev/null || { echo "bench/nvme.sh: fio not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DZT_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target bench_nvme >/dev/null
BIN="$BUILD/bench/bench_nvme"
mkdir -p "$DIR"
raw=$(mktemp); trap 'rm -f "$raw" "$DIR/fio-zt-nvme.bin" "$DIR"/fio-out-*.json' EXIT
fio_run() {  # fio_run write|read -> one JSON object (fio's own) on one line of $raw
  local out="$DIR/fio-out-$1.json"
  fio --name=zt-nvme --filename="$DIR/fio-zt-nvme.bin" --size="${SIZE}M" --bs="$BS" --iodepth="$QD" \
      --ioengine=io_uring --direct=1 --rw="$1" --output-format=json --output="$out" >/dev/null
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(json.dumps({'impl':'fio','rw':sys.argv[2],'bw_bytes':j['jobs'][0][sys.argv[2]]['bw_bytes'],'fio':j['fio version']}))" "$out" "$1" >> "$raw"
}
start=$(date +%s)
for ((r = 1; r <= REPS; r++)); do
  echo "== rep $r/$REPS: bench_nvme, fio write, fio read ($SIZE MiB, block $BS, queue depth $QD, $DIR)" >&2
  "$BIN" --size-mib "$SIZE" --block-size "$BS" --queue-depth "$QD" --reps 1 --dir "$DIR" >> "$raw"
  fio_run write
  fio_run read
  rm -f "$DIR/fio-zt-nvme.bin"
done
elapsed=$(( $(date +%s) - start ))
FS=$(df -T "$DIR" | tail -n 1 | awk '{print $1 " (" $2 ")"}')

python3 - "$raw" "$ROOT/bench/results/nvme.md" "$SIZE" "$BS" "$QD" "$REPS" "$DIR" "$FS" "$elapsed" <<'PY'
import json, sys, datetime, platform, subprocess, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
size, bs, qd, reps, d, fs, elapsed = sys.argv[3:10]
sh = lambda c: subprocess.run(['sh', '-c', c], capture_output=True, text=True).stdout.strip()
cpu, cores, mem = sh("lscpu | sed -n 's/^Model name: *//p'"), sh('nproc'), sh("free -g | awk '/Mem:/{print $2}'")
virt = sh("systemd-detect-virt 2>/dev/null || true")
ours_w = [x for r in rows if r.get('impl') == 'zerotensor' for x in r['write_gbps']]
ours_r = [x for r in rows if r.get('impl') == 'zerotensor' for x in r['read_gbps']]
fio_w = [r['bw_bytes'] / 1e9 for r in rows if r.get('impl') == 'fio' and r['rw'] == 'write']
fio_r = [r['bw_bytes'] / 1e9 for r in rows if r.get('impl') == 'fio' and r['rw'] == 'read']
fio_v = next((r['fio'] for r in rows if r.get('impl') == 'fio'), '?')
med = statistics.median
fmt = lambda xs: ", ".join(f"{x:.3f}" for x in xs)
w, rd, fw, fr = med(ours_w), med(ours_r), med(fio_w), med(fio_r)
md = ["# NVMe tier IO: SwapFile (O_DIRECT, io_uring) vs fio", "",
      f"- date: {datetime.date.today()}, machine: {cpu}, {cores} cores, {mem} GiB RAM, {platform.system()} {platform.release()}, {fio_v}",
      f"- directory: `{d}` on {fs} (`df -T`)",
      f"- command: `bench/nvme.sh --size-mib {size} --block-size {bs} --queue-depth {qd} --reps {reps} --dir {d}` (took {elapsed} s); "
      f"each rep: `bench_nvme --size-mib {size} --block-size {bs} --queue-depth {qd} --reps 1 --dir {d}` (the size as 64 MiB "
      f"requests, all queued at once; swap file fallocate()d before the clock), then `fio --name=zt-nvme --filename={d}/fio-zt-nvme.bin "
      f"--size={size}M --bs={bs} --iodepth={qd} --ioengine=io_uring --direct=1 --rw=write|read --output-format=json` (fio's bw_bytes)",
      "- sequential write, then sequential read of what was written; GB/s = 1e9 bytes/s; median of the reps "
      "(ours and fio's interleaved, so a change in load hits both)",
      f"- virtualization (`systemd-detect-virt`): {virt or 'unknown'}; kernel {platform.release()}. On a virtual machine the "
      "'disk' is the hypervisor's virtual block device (its host may cache), and other jobs may share the cores and the disk: "
      "the absolute numbers are indicative; the ratio to fio, measured side by side, is the point.", "",
      "| | write GB/s | read GB/s | write reps | read reps |", "|---|---|---|---|---|",
      f"| ZeroTensor SwapFile | {w:.3f} | {rd:.3f} | {fmt(ours_w)} | {fmt(ours_r)} |",
      f"| fio (io_uring, O_DIRECT) | {fw:.3f} | {fr:.3f} | {fmt(fio_w)} | {fmt(fio_r)} |",
      f"| ratio (ours / fio) | {w / fw:.3f} | {rd / fr:.3f} | | |", "",
      f"Target: ratio >= 0.80 for both. Write: {'met' if w / fw >= 0.8 else 'NOT met'}, read: {'met' if rd / fr >= 0.8 else 'NOT met'}.", ""]
open(sys.argv[2], 'w').write("\n".join(md))
print("\n".join(md))
PY
