#!/usr/bin/env bash
# zt-profile and zt-estimate --time, as a user runs them:
#  1. zt-profile under mpirun (2 ranks) writes a profile: every op of the model's step timed (its
#     key, a time > 0; both ranks' ops, ZeRO++'s with --zeropp), each class's rate (the host
#     tier's apart, with --offload), the intra-node link's alpha and beta, compute_pace in
#     [0, 1], the NVMe tier's rates (--nvme-path), and where the numbers come from;
#  2. zt-estimate --time on it prints the simulated step (its parts add up), --json carries the
#     same, --trace writes both ranks' compute and comm tracks; --cluster on a bundled datasheet
#     profile with --nodes x --gpus-per-node; --compare (every ZeRO choice, fastest first, held
#     against the profile's memory or --device-mib) with --tokens' cost; --fit with --time;
#     on one rank with the checkpoints in host memory (--cpu-checkpointing), every op of that step is
#     timed (none at a class's rate), and a datasheet profile's estimate says all are;
#  3. what cannot be answered is refused by name: a missing profile file, a link the profile lacks,
#     offload to nvme, --trace without --time, --time without --model, a bad --stages,
#     --cpu-checkpointing without --activation-checkpointing.
source "$(dirname "$0")/common.sh"

# The loaded link's bandwidth is fitted from all-gathers of growing sizes beside a GEMM loop; on a
# machine busy with another job (CI beside a fresh-machine run) their times can come out
# non-monotonic, which zt-profile refuses by name ("no bandwidth to fit"). That refusal, and only
# it, is measured again (up to 3 runs); any other failure fails at once.
for attempt in 1 2 3; do
  if "${MPI[@]}" -np 2 "$B/zt-profile" --model gpt2-nano -b 2 -t 16 --threads 1 --repeats 2 --offload --zeropp \
    --nvme-path "$TMP/nvme" -o "$TMP/p2.json" 2>"$TMP/prof.err"; then
    break
  fi
  if [ "$attempt" = 3 ] || ! grep -q "no bandwidth to fit" "$TMP/prof.err"; then
    echo "FAIL: zt-profile on 2 ranks:"; cat "$TMP/prof.err"; exit 1
  fi
  echo "note: attempt $attempt: $(grep -m1 -o 'the all-gathers beside compute.*' "$TMP/prof.err") (a loaded machine); again"
done
python3 - "$TMP/p2.json" <<'PY' || exit 1
import json, sys
p = json.load(open(sys.argv[1]))
assert p["ops"] and all(t > 0 for t in p["ops"].values()), "ops without a time"
assert any(k.startswith("linear float32(32, ") for k in p["ops"]), "no linear at B x T = 32 rows among the ops"
assert any(k.startswith("attention_packed ") for k in p["ops"]), "no attention among the ops"
assert any(k.startswith("quantize ") for k in p["ops"]), "no quantization among the ops (--zeropp)"
assert p["classes"]["gemm"]["flops_per_s"] > 0 and p["classes"]["optimizer"]["bytes_per_s"] > 0, p["classes"]
l = p["links"]["intra_node"]
assert l["bytes_per_s"] > 0 and l["alpha_s"] >= 0 and "inter_node" not in p["links"], p["links"]
assert 0 <= p["compute_pace"] <= 1 and p["ranks_per_node"] == 2 and p["nodes"] == 1 and p["threads"] == 1, p
assert "zt-profile --model gpt2-nano" in p["source"] and "2 rank(s)" in p["source"], p["source"]
# --offload: the optimizer's step on the host tier, timed and fitted apart
assert any(k.startswith("host adamw_step ") for k in p["ops"]), "no host AdamW among the ops"
assert p["host_classes"]["optimizer"]["bytes_per_s"] > 0, p["host_classes"]
# --nvme-path: the swap files' rates, measured (and the files removed after)
n = p["nvme"]
assert n["read_bytes_per_s"] > 0 and n["write_bytes_per_s"] > 0 and n["alpha_s"] >= 0, n
print(f"ok: zt-profile on 2 ranks: {len(p['ops'])} ops timed, gemm {p['classes']['gemm']['flops_per_s'] / 1e9:.1f} GFLOP/s, "
      f"intra-node {l['bytes_per_s'] / 1e9:.2f} GB/s after {l['alpha_s'] * 1e6:.0f} us, compute_pace {p['compute_pace']:.2f}")
PY

ls "$TMP/nvme"/zt-swap-rank*.bin >/dev/null 2>&1 && { echo "FAIL: zt-profile left its swap files in $TMP/nvme"; exit 1; }
E=(--model gpt2-nano -b 2 -t 16 --nd 2 --threads 1)
# ZeRO-Infinity's tier on that profile: the swap files' reads and writes on the IO queue
sed "s|\"nvme_path\": \"[^\"]*\"|\"nvme_path\": \"$TMP/nvme\"|g" "$S/configs/zero3-nvme.json" >"$TMP/nvme.json"
"$B/zt-estimate" "${E[@]}" --config "$TMP/nvme.json" --time "$TMP/p2.json" --json >"$TMP/nvme-est.json"
python3 - "$TMP/nvme-est.json" <<'PY' || exit 1
import json, sys
t = json.load(open(sys.argv[1]))[0]["time"]
assert t["nvme_read_s"] > 0 and t["nvme_write_s"] > 0 and t["exposed_nvme_s"] >= 0, t
parts = t["forward_s"] + t["backward_s"] + t["optimizer_s"]
busy = sum(t["compute_s"].values()) + t["exposed_intra_node_s"] + t["exposed_inter_node_s"] + t["exposed_nvme_s"]
assert abs(parts - busy) <= 1e-9 * t["step_s"], (parts, busy)
print(f"ok: zt-estimate --time with offload to nvme: reads {t['nvme_read_s'] * 1e3:.2f} ms, writes "
      f"{t['nvme_write_s'] * 1e3:.2f} ms, compute waited {t['exposed_nvme_s'] * 1e3:.2f} ms")
PY
"$B/zt-estimate" "${E[@]}" --stage 3 --time "$TMP/p2.json" --trace "$TMP/sim.json" >"$TMP/est.txt"
for line in "step time, simulated on the profile 'zt-profile on" "forward (waits included)" "backward (waits included)" \
  "optimizer step (waits included)" "communication (busy)" "exposed (compute waited)"; do
  grep -qF "$line" "$TMP/est.txt" || { echo "FAIL: zt-estimate --time lacks '$line':"; cat "$TMP/est.txt"; exit 1; }
done
"$B/zt-estimate" "${E[@]}" --stage 3 --time "$TMP/p2.json" --json >"$TMP/est.json"
python3 - "$TMP/est.json" "$TMP/sim.json" <<'PY' || exit 1
import json, sys
runs, trace = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert [r["rank"] for r in runs] == [0, 1]
for r in runs:
    t = r["time"]
    parts = t["forward_s"] + t["backward_s"] + t["optimizer_s"]
    busy = sum(t["compute_s"].values()) + t["exposed_intra_node_s"] + t["exposed_inter_node_s"]
    assert t["step_s"] > 0 and abs(parts - busy) <= 1e-9 * t["step_s"], t
    assert t["comm_s"]["all_gather"] > 0 and t["comm_s"]["reduce_scatter"] > 0, t["comm_s"]
    assert abs(t["tokens_per_s"] - 2 * 32 / t["step_s"]) <= 1e-6 * t["tokens_per_s"], t
    assert t["untimed_ops"] == 0, (r["rank"], t["untimed_ops"])  # both ranks' ops in the profile
ev = [e for e in trace["traceEvents"] if e["ph"] == "X"]
tracks = {(e["pid"], e["cat"]) for e in ev}
assert tracks == {(0, "compute"), (0, "comm"), (1, "compute"), (1, "comm")}, tracks
assert any(e["name"].startswith("all_gather") for e in ev), "no all-gather on the comm track"
print(f"ok: zt-estimate --time: step {runs[0]['time']['step_s'] * 1e3:.2f} ms simulated on rank 0; "
      f"the trace has {len(ev)} spans on both ranks' compute and comm tracks")
PY

# qgZ alone (on one node: zero_quantized_gradients_one_node) on the --zeropp profile (qwZ and qgZ
# together): its quantized reduce-scatter's every op timed, on both ranks.
cat >"$TMP/qgz.json" <<'JSON'
{"train_micro_batch_size_per_gpu": 2,
 "zero_optimization": {"stage": 3, "zero_quantized_gradients": true, "zero_quantized_gradients_one_node": true}}
JSON
"$B/zt-estimate" "${E[@]}" --config "$TMP/qgz.json" --time "$TMP/p2.json" --json >"$TMP/qgz-est.json"
python3 - "$TMP/qgz-est.json" <<'PY' || exit 1
import json, sys
runs = json.load(open(sys.argv[1]))
for r in runs:
    t = r["time"]
    assert t["comm_s"]["all_to_all"] > 0, t["comm_s"]  # qgZ ran
    assert t["untimed_ops"] == 0, (r["rank"], t["untimed_ops"], t["ops"])
print(f"ok: qgZ alone on the --zeropp profile: all {runs[0]['time']['ops']} and {runs[1]['time']['ops']} ops of "
      f"ranks 0 and 1 timed")
PY

# A bundled datasheet profile: 2 nodes x 2 GPUs, the ceiling at the peak above the simulated rate
"$B/zt-estimate" --model gpt2-nano -b 2 -t 16 --threads 1 --stage 3 --nodes 2 --gpus-per-node 2 --precision bf16 \
  --compute-dtype bf16 --cluster "$S/configs/devices/h100-sxm.json" --json >"$TMP/h100.json"
python3 - "$TMP/h100.json" <<'PY' || exit 1
import json, sys
runs = json.load(open(sys.argv[1]))
assert [r["rank"] for r in runs] == [0, 3] and runs[0]["world_size"] == 4 and runs[0]["nodes"] == 2, runs[0]
t = runs[0]["time"]
assert t["profile"].startswith("H100 SXM") and t["exposed_inter_node_s"] + t["exposed_intra_node_s"] >= 0, t
assert t["tokens_per_s_per_rank_at_peak"] > t["tokens_per_s"] / 4 > 0 and 0 < t["mfu"] < 1, t
print(f"ok: zt-estimate --cluster h100-sxm.json on 2 x 2: {t['tokens_per_s'] / 4:.0f} tokens/s a GPU simulated, "
      f"ceiling {t['tokens_per_s_per_rank_at_peak']:.0f}")
PY
# The datasheet profile's host is shared by the node's ranks (host_shared): ZeRO-Offload on one GPU
# alone gets the whole host, so its full optimizer takes about what an eighth of it takes with 8
# ranks on the node, each with an eighth of the host (8x as long were the host not split; the
# per-op overheads differ).
echo '{"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}' >"$TMP/offload.json"
O=(--model gpt2-124m -b 1 -t 16 --threads 1 --stage 2 --config "$TMP/offload.json" --precision bf16
   --compute-dtype bf16 --cluster "$S/configs/devices/h100-sxm.json" --json)
"$B/zt-estimate" "${O[@]}" --nodes 1 --gpus-per-node 1 >"$TMP/alone.json"
"$B/zt-estimate" "${O[@]}" --nodes 1 --gpus-per-node 8 >"$TMP/eight.json"
python3 - "$TMP/alone.json" "$TMP/eight.json" <<'PY' || exit 1
import json, sys
alone, eight = (json.load(open(f))[0]["time"]["compute_s"]["optimizer"] for f in sys.argv[1:])
assert alone > 0 and 0.5 < alone / eight < 2, (alone, eight)
print(f"ok: a shared host: the offloaded optimizer {alone * 1e3:.2f} ms alone on the node, {eight * 1e3:.2f} ms "
      "with 8 ranks on it (an eighth of the model each, an eighth of the host)")
PY
# --compare: every ZeRO choice on that cluster, fastest first, its cost with --tokens; --fit with --time
H=(--model gpt2-nano -b 2 -t 16 --threads 1 --nodes 2 --gpus-per-node 2 --precision bf16 --compute-dtype bf16
   --cluster "$S/configs/devices/h100-sxm.json")
"$B/zt-estimate" "${H[@]}" --compare --tokens 1e9 --price-per-gpu-hour 2 --json >"$TMP/cmp.json"
"$B/zt-estimate" "${H[@]}" --compare --device-mib 0.6 >"$TMP/cmp.txt"
"$B/zt-estimate" "${H[@]}" --stage 3 --fit layers --device-mib 4 --fit-limit 64 --json >"$TMP/fit.json"
python3 - "$TMP/cmp.json" "$TMP/cmp.txt" "$TMP/fit.json" <<'PY' || exit 1
import json, sys
cmp, txt, fit = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), json.load(open(sys.argv[3]))
cs = cmp["choices"]
assert len(cs) == 8 and all(c["fits"] for c in cs), [c["name"] for c in cs]
steps = [c["time"]["step_s"] for c in cs]
assert steps == sorted(steps), steps
assert {c["name"] for c in cs} >= {"stage 0 (data parallel)", "stage 3", "stage 3 + ZeRO++ (qwZ, hpZ, qgZ)"}, cs
assert cmp["capacity"]["device"] == 81559 * 2**20, cmp["capacity"]  # the profile's
for c in cs:  # hours = tokens / the job's tokens/s; price = GPU-hours x 2
    k = c["cost"]
    assert abs(k["hours"] - 1e9 / c["time"]["tokens_per_s"] / 3600) <= 1e-9 * k["hours"], k
    assert abs(k["price"] - 2 * 4 * k["hours"]) <= 1e-9 * k["price"], k
assert "does not fit: the device peak passes its 614.40 KiB" in txt, txt
t = fit["fits"]["time"]
assert fit["fits"]["size"] > 0 and t["step_s"] > 0 and t["profile"].startswith("H100"), fit["fits"]
print(f"ok: --compare: 8 choices fastest first ({cs[0]['name']} {steps[0] * 1e3:.3f} ms ... {cs[-1]['name']} "
      f"{steps[-1] * 1e3:.3f} ms), cost per choice; --fit layers with --time: {fit['fits']['size']} layers, "
      f"{t['step_s'] * 1e3:.3f} ms")
PY
expect_fail "--compare without a profile" "--compare needs --time PROFILE" \
  "$B/zt-estimate" --model gpt2-nano --compare
expect_fail "--price-per-gpu-hour without --tokens" "--price-per-gpu-hour needs --tokens" \
  "$B/zt-estimate" "${H[@]}" --price-per-gpu-hour 2
expect_fail "a capacity without --fit or --compare" "capacities for --fit or --compare" \
  "$B/zt-estimate" "${H[@]}" --device-mib 100
expect_fail "--world-size against --nodes x --gpus-per-node" "--world-size 3 disagrees with --nodes 2 x --gpus-per-node 2" \
  "$B/zt-estimate" --model gpt2-nano --world-size 3 --nodes 2 --gpus-per-node 2

"$B/zt-profile" --model gpt2-nano -b 2 -t 16 --threads 1 --repeats 1 --stages 0 -o "$TMP/p1.json" 2>/dev/null
# The checkpoints in host memory: their copies to the host and back are timed, so the same step
# simulated on that profile has every op measured (none at a class's rate); on a datasheet profile
# every op is at its class's rate, and the output says so.
C=(--model gpt2-nano -b 2 -t 16 --threads 1 --activation-checkpointing --cpu-checkpointing)
"$B/zt-profile" "${C[@]}" --repeats 1 --stages 3 -o "$TMP/p1c.json" 2>/dev/null
"$B/zt-estimate" "${C[@]}" --stage 3 --time "$TMP/p1c.json" --json >"$TMP/ckpt.json"
"$B/zt-estimate" "${C[@]}" --stage 3 --cluster "$S/configs/devices/h100-sxm.json" >"$TMP/ckpt-h100.txt"
python3 - "$TMP/p1c.json" "$TMP/ckpt.json" "$TMP/ckpt-h100.txt" <<'PY' || exit 1
import json, re, sys
p, t, txt = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))[0]["time"], open(sys.argv[3]).read()
assert any(k.startswith("copy_to_host ") for k in p["ops"]) and any(k.startswith("copy_from_host ") for k in p["ops"]), \
    "no checkpoint copies among the ops"
assert t["ops"] > 0 and t["untimed_ops"] == 0 and t["untimed_s"] == 0, t
m = re.search(r"ops at their class's rate +[0-9.]+ ms: (\d+) of the step's (\d+) ops", txt)
assert m and m.group(1) == m.group(2) == str(t["ops"]), txt
print(f"ok: --cpu-checkpointing: the checkpoints' copies timed; {t['ops']} ops of the step measured, none at a class's "
      f"rate (all {m.group(1)} on the datasheet profile)")
PY
expect_fail "--cpu-checkpointing without --activation-checkpointing" "--cpu-checkpointing needs --activation-checkpointing" \
  "$B/zt-profile" --model gpt2-nano -b 2 -t 16 --cpu-checkpointing -o "$TMP/x.json"
expect_fail "a profile file that is not there" "profile '$TMP/none.json'" \
  "$B/zt-estimate" "${E[@]}" --time "$TMP/none.json"
expect_fail "a one-rank profile asked about 2 ranks" "has no intra-node link" \
  "$B/zt-estimate" "${E[@]}" --time "$TMP/p1.json"
expect_fail "offload to nvme on a profile without the NVMe tier" "has no nvme costs (the swap files' reads and writes" \
  "$B/zt-estimate" "${E[@]}" --config "$S/configs/zero3-nvme.json" --time "$TMP/p1.json"
expect_fail "--trace without --time" "--trace writes the simulated step: it needs --time" \
  "$B/zt-estimate" "${E[@]}" --trace "$TMP/t.json"
expect_fail "--time without --model" "--time needs --model" "$B/zt-estimate" --params 1M --time "$TMP/p2.json"
expect_fail "a stage that is not one" "'5' is not a ZeRO stage" \
  "$B/zt-profile" --model gpt2-nano -b 2 -t 16 --stages 0,5 -o "$TMP/x.json"
