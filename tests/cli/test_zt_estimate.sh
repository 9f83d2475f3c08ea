#!/usr/bin/env bash
# zt-estimate: the ZeRO paper's Table 1 as printed, model-state bytes from the formulas, and
# clear errors for bad input.
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

# A named model: exact padded layout for 4 ranks, fp32 stage 2, with activations.
"$E" --model gpt2-nano --stage 2 --world-size 4 --batch 2 --seq-len 32 --json >"$TMP/m.json"
python3 - "$TMP/m.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
P, N = j["psi_padded"], 4
assert P >= j["psi"] and P % (N * 16) == 0, j
ms, pk = j["model_state"], j["peak"]
assert (ms["params"], ms["grads"], ms["optim"]) == (4 * P, 4 * P // N, 8 * P // N), ms
assert pk["grads"] > ms["grads"] and pk["activations"] > 0 and pk["workspace"] > 0, pk
print("ok: gpt2-nano stage 2 on 4 ranks:", ms, "activations", pk["activations"])
PY
"$E" --model gpt2-nano --stage 3 --nd 2 -b 2 | grep -q "^activations" || { echo "FAIL: no table"; exit 1; }
echo "ok: the table prints"

# the bytes a step moves: stage 3 on 2 nodes x 2 ranks, then with ZeRO++ (its exact agreement
# with the counters of real runs: tests/mpi/test_zeropp.cpp). llama-nano: untied, so each unit
# is gathered once per pass
echo '{"zero_optimization": {"stage": 3, "stage3_max_reuse_distance": 0, "stage3_param_persistence_threshold": 0}}' >"$TMP/z3.json"
echo '{"zero_optimization": {"stage": 3, "stage3_max_reuse_distance": 0, "stage3_param_persistence_threshold": 0,
       "zero_quantized_weights": true,
       "zero_hpz_partition_size": 2, "zero_quantized_gradients": true}}' >"$TMP/zpp.json"
"$E" --model llama-nano --nd 4 --nodes 2 --config "$TMP/z3.json" --json >"$TMP/z3.out"
"$E" --model llama-nano --nd 4 --nodes 2 --config "$TMP/zpp.json" --json >"$TMP/zpp.out"
python3 - "$TMP/z3.out" "$TMP/zpp.out" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
ca, cb = a["comm_per_step"], b["comm_per_step"]
P = a["psi_padded"]
# stage 3 moves 3 Psi x 4 bytes x (N-1)/N per rank in gathers and reduce-scatters (plus the loss and norm)
assert ca["rank0"]["all_gather"] + ca["rank0"]["reduce_scatter"] == 3 * P * 4 * 3 // 4, ca
assert cb["all_ranks"]["inter_node"] * 4 < ca["all_ranks"]["inter_node"], (ca, cb)
assert cb["rank0"]["all_to_all"] > 0 and b["peak"]["secondary"] > 0 and a["peak"]["secondary"] == 0, (cb, b["peak"])
print("ok: bytes per step, stage 3 and ZeRO++ on 2 x 2:", ca["all_ranks"], cb["all_ranks"])
PY
expect_fail "nodes not dividing the ranks" "--nodes 3: expected a divisor of --world-size 4" "$E" --model gpt2-nano --nd 4 --nodes 3

# a model config file, and bf16 compute (a GPU's): the model built in bf16, no float32 copies,
# 2-byte activations; zt-train's run keys (compute_dtype among them) are read, not refused
python3 -c 'import json; json.dump({"family": "llama", "n_layer": 3, "n_embd": 64, "n_head": 4, "n_kv_head": 2, "ffn_hidden": 192,
  "vocab_size": 256, "max_seq_len": 64}, open("'"$TMP"'/family.json", "w"))'
echo '{"bf16": {"enabled": true}, "compute_dtype": "bf16", "host_memory_limit_mib": 64, "collective_timeout_s": 60,
       "train_micro_batch_size_per_gpu": 2, "activation_checkpointing": {"enabled": true}}' >"$TMP/bf16c.json"
"$E" --model "$TMP/family.json" --precision bf16 -b 2 -t 64 --json >"$TMP/f32c.out"
"$E" --model "$TMP/family.json" --precision bf16 -b 2 -t 64 --compute-dtype bf16 --json >"$TMP/bf16c.out"
"$E" --model "$TMP/family.json" -t 64 --config "$TMP/bf16c.json" --json >"$TMP/bf16cfg.out"
python3 - "$TMP/f32c.out" "$TMP/bf16c.out" "$TMP/bf16cfg.out" <<'PY'
import json, sys
f32, bf16, cfg = (json.load(open(f)) for f in sys.argv[1:4])
assert f32["psi"] == bf16["psi"] == 3 * (64 * (128 + 64) + 3 * 64 * 192 + 128) + 2 * 256 * 64 + 64, f32["psi"]
assert bf16["peak"]["activations"] < f32["peak"]["activations"], (bf16["peak"], f32["peak"])
assert bf16["peak"]["workspace"] < f32["peak"]["workspace"], (bf16["peak"], f32["peak"])
assert cfg["peak"]["activations"] < f32["peak"]["activations"] and cfg["activation_checkpointing"], cfg["peak"]
print("ok: a model config file; bf16 compute:", bf16["peak"]["activations"], "activation bytes against",
      f32["peak"]["activations"], "with float32 compute")
PY
expect_fail "bf16 compute without bf16" "--compute-dtype bf16 needs bf16 precision" "$E" --model gpt2-nano --compute-dtype bf16
expect_fail "a model config file that is not there" "model config '$TMP/none.json': cannot open" "$E" --model "$TMP/none.json"

expect_fail "unknown model name" "known models: gpt2-nano" "$E" --model gpt-huge
expect_fail "stage 5" "--stage 5: expected 0, 1, 2 or 3" "$E" --params 1B --stage 5
expect_fail "bad precision" "--precision \"fp8\"" "$E" --params 1B --precision fp8
expect_fail "bad count suffix" "--params = \"7.5X\"" "$E" --params 7.5X
expect_fail "both model and params" "exactly one of --model" "$E" --model gpt2-nano --params 1M
expect_fail "activations without a model" "need --model" "$E" --params 1B --batch 4
expect_fail "sequence beyond the context" "context is 64" "$E" --model gpt2-nano --batch 1 --seq-len 65

# --dry-run and --fit (train/dry_run.h, train/fit.h; their exactness: tests/mpi/test_dry_run.cpp,
# tests/cli/test_fit.sh): the nvme tier counted without a file, and the bad inputs named.
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
expect_fail "dry run without a batch" "--dry-run needs --model and --batch" "$E" --model gpt2-nano --dry-run
expect_fail "dry run, nodes not dividing" "--nodes 3: expected a divisor of --world-size 4" "$E" --model gpt2-nano \
  --world-size 4 --nodes 3 --batch 1 --dry-run
expect_fail "fit without a capacity" "--fit needs a capacity" "$E" --model gpt2-nano --batch 1 --fit layers
expect_fail "fit on an unknown axis" "--fit 'width': expected layers" "$E" --model gpt2-nano --batch 1 --fit width \
  --device-mib 10
expect_fail "fit with a negative capacity" "--device-mib -1: expected a capacity" "$E" --model gpt2-nano --batch 1 \
  --fit layers --device-mib -1
echo "all zt-estimate checks passed"
