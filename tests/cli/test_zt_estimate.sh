#!/usr/bin/env bash
# zt-estimate: the ZeRO paper's Table 1 as printed, model-state bytes from the formulas, a model's
# step run on the meta device, and clear errors for bad input.
source "$(dirname "$0")/common.sh"
E="$B/zt-estimate"

# --paper: every cell of Table 1 of Rajbhandari et al. 2019 (arXiv:1910.02054) as the paper prints it.
"$E" --paper >"$TMP/paper.txt"
python3 - "$TMP/paper.txt" <<'PY'
import sys
paper = {  # DP degree -> 7.5B (Pos, Pos+g, Pos+g+p), 128B (...), 1T (...)
    1: "120 120 120 2048 2048 2048 16000 16000 16000",
    4: "52.5 41.3 30 896 704 512 7000 5500 4000",
    16: "35.6 21.6 7.5 608 368 128 4750 2875 1000",
    64: "31.4 16.6 1.88 536 284 32 4187 2218 250",
    256: "30.4 15.4 0.47 518 263 8 4046 2054 62.5",
    1024: "30.1 15.1 0.12 513 257 2 4011 2013 15.6",
}
rows = {}
for line in open(sys.argv[1]):
    parts = line.split("|")
    if len(parts) == 4 and parts[0].strip().isdigit():
        rows[int(parts[0])] = " ".join(" ".join(p.split()) for p in parts[1:])
bad = [(nd, rows.get(nd), want) for nd, want in paper.items() if rows.get(nd) != want]
if bad:
    print("FAIL: Table 1 rows differ from the paper:", bad); sys.exit(1)
print("ok: --paper prints all 54 cells of Table 1 as the paper does")
PY

# Model states from the formulas: 7.5B, P_os, Nd = 64, mixed precision: 4Psi + 12Psi/64 = 31.40625e9 bytes.
"$E" --params 7.5B --stage 1 --nd 64 --precision bf16 --json >"$TMP/a.json"
python3 - "$TMP/a.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
psi = 7_500_000_000
want = {"params": 2 * psi, "grads": 2 * psi, "optim": 12 * psi // 64}
got = {k: j["model_state"][k] for k in want}
assert got == want and j["model_state_total"] == 31_406_250_000, (got, want, j["model_state_total"])
print("ok: --params 7.5B stage 1 Nd 64 bf16 ->", j["model_state_total"], "bytes")
PY

# A named model: its training step run on the meta device (train/dry_run.h; its exactness against
# real runs: tests/mpi/test_dry_run.cpp), exact padded layout for 4 ranks, fp32 stage 2.
"$E" --model gpt2-nano --stage 2 --world-size 4 --batch 2 --seq-len 32 --threads 1 --json >"$TMP/m.json"
python3 - "$TMP/m.json" <<'PY'
import json, sys
ranks = json.load(open(sys.argv[1]))
assert [r["rank"] for r in ranks] == [0, 3], [r["rank"] for r in ranks]
j = ranks[0]
P, N = j["psi_padded"], 4
assert P >= j["psi"] and P % (N * 16) == 0, j
step = j["device"]["steady_step"]
held = {k: step[k]["held"] for k in ("params", "grads", "optim")}
assert held == {"params": 4 * P, "grads": 4 * P // N, "optim": 8 * P // N}, held  # ZeRO's stage 2 (Figure 1)
assert step["grads"]["peak"] > held["grads"] and step["activations"]["peak"] > 0, step
assert step["workspace"]["peak"] > 0 and step["peak_total"] >= sum(held.values()), step
print("ok: gpt2-nano stage 2 on 4 ranks: model states", held, "activations", step["activations"]["peak"])
PY
"$E" --model gpt2-nano --stage 3 --nd 2 -b 2 | grep -q "^activations" || { echo "FAIL: no table"; exit 1; }
echo "ok: the table prints"
# without --batch: micro-batch 1 at the model's context
"$E" --model gpt2-nano --threads 1 | grep -q "micro batch 1 x 64 tokens" || { echo "FAIL: the default step"; exit 1; }
echo "ok: the default step is 1 x the context"

# the bytes a step moves: stage 3 on 2 nodes x 2 ranks, then with ZeRO++ (their exact agreement
# with the counters of real runs on the box: tests/mpi/test_zeropp.cpp). llama-nano: untied, so
# each unit is gathered once per pass
echo '{"zero_optimization": {"stage": 3, "stage3_max_reuse_distance": 0, "stage3_param_persistence_threshold": 0}}' >"$TMP/z3.json"
echo '{"zero_optimization": {"stage": 3, "stage3_max_reuse_distance": 0, "stage3_param_persistence_threshold": 0,
       "zero_quantized_weights": true,
       "zero_hpz_partition_size": 2, "zero_quantized_gradients": true}}' >"$TMP/zpp.json"
"$E" --model llama-nano --nd 4 --nodes 2 -b 1 -t 32 --config "$TMP/z3.json" --json >"$TMP/z3.out"
"$E" --model llama-nano --nd 4 --nodes 2 -b 1 -t 32 --config "$TMP/zpp.json" --json >"$TMP/zpp.out"
python3 - "$TMP/z3.out" "$TMP/zpp.out" <<'PY'
import json, sys
(a, a3), (b, b3) = (json.load(open(f)) for f in sys.argv[1:3])  # rank 0 and rank 3
ca, cb = a["comm_per_step"], b["comm_per_step"]
P = a["psi_padded"]
# stage 3 moves 3 Psi x 4 bytes x (N-1)/N per rank in gathers and reduce-scatters (plus the loss and norm)
assert ca["all_gather"] + ca["reduce_scatter"] == 3 * P * 4 * 3 // 4, ca
# the ring's node-crossing hop is rank 3's (3 -> 0; rank 0 sends to rank 1 on its own node)
assert ca["inter_node"] == 0 and a3["comm_per_step"]["inter_node"] > 0, (ca, a3["comm_per_step"])
assert b3["comm_per_step"]["inter_node"] * 4 < a3["comm_per_step"]["inter_node"], (a3, b3)
sec = lambda r: r["device"]["steady_step"]["secondary"]["peak"]
assert cb["all_to_all"] > 0 and sec(b) > 0 and sec(a) == 0, (cb, sec(b))
print("ok: bytes per step, stage 3 and ZeRO++ on 2 x 2: rank 3's inter-node", a3["comm_per_step"]["inter_node"], "->",
      b3["comm_per_step"]["inter_node"])
PY
expect_fail "nodes not dividing the ranks" "--nodes 3: expected a divisor of --world-size 4" "$E" --model gpt2-nano --nd 4 --nodes 3

# a model config file, and bf16 compute: the model built in bf16, 2-byte activations (the meta
# device counts the CPU backend's float32 stand-ins of bf16 operands as workspace, as that backend
# allocates them); zt-train's run keys (compute_dtype among them) are read, not refused
python3 -c 'import json; json.dump({"family": "llama", "n_layer": 3, "n_embd": 64, "n_head": 4, "n_kv_head": 2, "ffn_hidden": 192,
  "vocab_size": 256, "max_seq_len": 64}, open("'"$TMP"'/family.json", "w"))'
echo '{"bf16": {"enabled": true}, "compute_dtype": "bf16", "host_memory_limit_mib": 64, "collective_timeout_s": 60,
       "train_micro_batch_size_per_gpu": 2, "activation_checkpointing": {"enabled": true}}' >"$TMP/bf16c.json"
"$E" --model "$TMP/family.json" --precision bf16 -b 2 -t 64 --json >"$TMP/f32c.out"
"$E" --model "$TMP/family.json" --precision bf16 -b 2 -t 64 --compute-dtype bf16 --json >"$TMP/bf16c.out"
"$E" --model "$TMP/family.json" -t 64 --config "$TMP/bf16c.json" --json >"$TMP/bf16cfg.out"
python3 - "$TMP/f32c.out" "$TMP/bf16c.out" "$TMP/bf16cfg.out" <<'PY'
import json, sys
f32, bf16, cfg = (json.load(open(f))[0] for f in sys.argv[1:4])
assert f32["psi"] == bf16["psi"] == 3 * (64 * (128 + 64) + 3 * 64 * 192 + 128) + 2 * 256 * 64 + 64, f32["psi"]
pk = lambda r, c: r["device"]["steady_step"][c]["peak"]
assert pk(bf16, "activations") < pk(f32, "activations"), (bf16, f32)
assert pk(cfg, "activations") < pk(bf16, "activations"), cfg  # the same bf16 step, checkpointed
print("ok: a model config file; bf16 compute:", pk(bf16, "activations"), "activation bytes against",
      pk(f32, "activations"), "with float32 compute")
PY
expect_fail "bf16 compute without bf16" "--compute-dtype bf16 needs bf16 precision" "$E" --model gpt2-nano --compute-dtype bf16
expect_fail "a model config file that is not there" "model config '$TMP/none.json': cannot open" "$E" --model "$TMP/none.json"

expect_fail "unknown model name" "known models: gpt2-nano" "$E" --model gpt-huge
expect_fail "stage 5" "--stage 5: expected 0, 1, 2 or 3" "$E" --params 1B --stage 5
expect_fail "bad precision" "--precision \"fp8\"" "$E" --params 1B --precision fp8
expect_fail "bad count suffix" "--params = \"7.5X\"" "$E" --params 7.5X
expect_fail "both model and params" "exactly one of --model" "$E" --model gpt2-nano --params 1M
expect_fail "activations without a model" "need --model" "$E" --params 1B --batch 4
expect_fail "bytes per step without a model" "need --model" "$E" --params 1B --nodes 2
expect_fail "fit without a model" "--fit needs --model" "$E" --params 1B --fit layers --device-mib 10
expect_fail "sequence beyond the context" "context is 64" "$E" --model gpt2-nano --batch 1 --seq-len 65

# The nvme tier counted without a file (--dry-run: what --model always does, accepted for older
# scripts), --fit (train/fit.h; tests/cli/test_fit.sh), and the bad inputs named.
"$E" --model gpt2-nano --config "$S/configs/zero3-nvme.json" --world-size 2 --batch 2 --seq-len 32 --threads 1 \
  --dry-run --json >"$TMP/d.json"
python3 - "$TMP/d.json" <<'PY'
import json, sys
ranks = json.load(open(sys.argv[1]))
assert [r["rank"] for r in ranks] == [0, 1], ranks
for r in ranks:
    assert r["nvme"]["optim"]["held"] > 0 and r["device"]["steady_step"]["activations"]["peak"] > 0, r
print("ok: --dry-run with the nvme tier:", ranks[0]["nvme"]["optim"]["held"], "bytes of optimizer state per rank")
PY
[ ! -e runs ] || { echo "FAIL: the dry run created runs/"; exit 1; }
expect_fail "dry run, nodes not dividing" "--nodes 3: expected a divisor of --world-size 4" "$E" --model gpt2-nano \
  --world-size 4 --nodes 3 --batch 1 --dry-run
expect_fail "fit without a capacity" "--fit needs a capacity" "$E" --model gpt2-nano --batch 1 --fit layers
expect_fail "fit on an unknown axis" "--fit 'width': expected layers" "$E" --model gpt2-nano --batch 1 --fit width \
  --device-mib 10
expect_fail "fit with a negative capacity" "--device-mib -1: expected a capacity" "$E" --model gpt2-nano --batch 1 \
  --fit layers --device-mib -1
echo "all zt-estimate checks passed"
