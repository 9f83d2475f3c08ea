#!/usr/bin/env bash
# run_mpi.sh ZT_INFO NP BINARY SPEC: the multi-rank GPU tests. Exit 77 (CTest: skipped) when
# zt-info finds no usable GPU; otherwise NP ranks under mpirun share the GPU(s).
set -euo pipefail
info="$1" np="$2" bin="$3" spec="$4"
if ! "$info" --json | python3 -c 'import json,sys; c=json.load(sys.stdin)["cuda"]; sys.exit(0 if any(d["supported"] for d in c.get("devices", [])) else 1)'; then
  echo "SKIP: no usable CUDA device: $("$info" | grep '^  no CUDA device' || true)"
  exit 77
fi
exec mpirun -np "$np" --oversubscribe --allow-run-as-root --bind-to none "$bin" "$spec" -w NoTests
