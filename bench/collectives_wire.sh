#!/usr/bin/env bash
# bench/collectives_wire.sh — each collective kind on the cluster in a box (scripts/cluster.sh):
# the bytes each node really sent on its link (eth0's counters, TCP/IP headers and acks
# included), and of them the payload (each packet's 66 bytes of Ethernet, IPv4 and TCP headers
# with timestamps taken off), beside the ring model's (dist/process_group.h: a ring over the ranks in rank order,
# each rank sending its ring bytes to rank + 1, so a node sends across the network the bytes of
# each of its ranks whose successor lives on another node), per call, with the setup's traffic
# (a run with --iters 0) subtracted. Also the median time per call.
#
# Usage: bench/collectives_wire.sh [--layouts "2x2 4x1"] [--kinds "reduce_scatter all_gather all_reduce"]
#                                  [--elements 4194304] [--iters 10] [--link RATE]
# Needs root (network namespaces); exits 77 where the box cannot be built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
LAYOUTS="2x2 4x1" KINDS="reduce_scatter all_gather all_reduce" ELEMENTS=4194304 ITERS=10 LINK=""
while (($#)); do case "$1" in
  --layouts) LAYOUTS=$2; shift 2;; --kinds) KINDS=$2; shift 2;; --elements) ELEMENTS=$2; shift 2;;
  --iters) ITERS=$2; shift 2;; --link) LINK=$2; shift 2;;
  *) echo "bench/collectives_wire.sh: unknown flag $1" >&2; exit 2;; esac; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
shaping=(); [ -n "$LINK" ] && shaping=(--link "$LINK")

# One run in the box; leaves the program's line in $tmp/out and each node's MiB sent in $tmp/wire.
run() {  # nodes ranks kind iters
  local rc=0
  bash "$ROOT/scripts/cluster.sh" box --name zcoll --subnet 10.75.0 --nodes "$1" --ranks "$2" "${shaping[@]}" -- \
    "$BUILD/bench/bench_collectives" --kind "$3" --elements "$ELEMENTS" --iters "$4" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" = 77 ] && { cat "$tmp/err" >&2; exit 77; }
  [ "$rc" = 0 ] || { echo "bench/collectives_wire.sh: $1x$2 $3 failed ($rc):" >&2; tail -20 "$tmp/err" >&2; exit 1; }
  grep -o 'node [0-9]* [0-9.]* MiB in [0-9]* packets' "$tmp/err" | awk '{print $3 ":" $6}' | paste -sd' ' >"$tmp/wire"
}

echo "| layout | kind | ms/call | ring bytes/rank | ring model, per node | on the wire, per node | wire / model | payload / model | spread between nodes |"
echo "|---|---|---:|---:|---:|---|---:|---:|---:|"
for layout in $LAYOUTS; do
  nodes=${layout%x*}; ranks=${layout#*x}
  for kind in $KINDS; do
    run "$nodes" "$ranks" "$kind" 0; base=$(cat "$tmp/wire")
    run "$nodes" "$ranks" "$kind" "$ITERS"; line=$(cat "$tmp/out"); wire=$(cat "$tmp/wire")
    python3 - "$layout" "$nodes" "$ITERS" "$base" "$wire" "$line" <<'PY'
import sys
layout, nodes, iters, base, wire, line = sys.argv[1:7]
nodes, iters = int(nodes), int(iters)
f = line.split()
kv = dict(zip(f[0::2], f[1::2]))
ring = int(kv["ring_bytes_per_rank_per_call"])
# per node, per call: what was sent beyond the setup's traffic ("MiB:packets" per node), and the
# payload: the bytes less 66 of headers per packet (Ethernet 14, IPv4 20, TCP 20 + 12 of timestamps)
HEADER = 66
pairs = [(w.split(":"), b.split(":")) for w, b in zip(wire.split(), base.split())]
sent = [(float(w[0]) - float(b[0])) * 2**20 / iters for w, b in pairs]
payload = [s - HEADER * (int(w[1]) - int(b[1])) / iters for s, (w, b) in zip(sent, pairs)]
model = ring if nodes > 1 else 0  # one rank per node crosses (the ring's ranks are node-contiguous)
mib = lambda b: f"{b / 2**20:.2f}"
mean = sum(sent) / len(sent)
spread = (max(sent) - min(sent)) / mean if mean else 0.0
ratio = mean / model if model else float("nan")
pratio = sum(payload) / len(payload) / model if model else float("nan")
print(f"| {layout} | {kv['kind']} | {float(kv['ms_per_call']):.1f} | {mib(ring)} MiB | {mib(model)} MiB | "
      f"{' / '.join(mib(s) for s in sent)} MiB | {ratio:.3f} | {pratio:.3f} | {100 * spread:.1f}% |")
PY
  done
done
