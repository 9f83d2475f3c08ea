#!/usr/bin/env bash
# bench/offload_ladder.py end to end on the CPU (scripts/gpu-check.sh runs it on a GPU with Llama 3
# 8B's width): a 64-wide Llama family with n_layer free, under a device cap of 6 MiB, a host tier
# of 16 MiB and a disk of 10 MiB, so that, as on a GPU machine, the device binds the gpu tier, the
# host the opt-cpu and cpu tiers and the disk the nvme tier. For every tier the dry run's plan
# must train (2 steps) with its peaks equal to the prediction: on the CPU the dry run counts what
# the real run's allocators count, and the measured ratios are exactly 1.0 (device, host, disk).
# One thing may differ, in the real run itself: with cpu_checkpointing (the cpu and nvme tiers) the
# device's peak moves by one checkpoint, B x T x C float32 (32 KiB, 1.6% of those tiers' device
# bytes here), with the timing of the copies to the host; hence --within 0.02, and the check below
# holds the host and the disk to the byte and the device to the byte or that one checkpoint. The
# next size up must fail with the clean error of the resource it overflows (both: the script's
# exit code), and the offload tiers must fit more parameters than the device alone (ZeRO-Offload's
# point).
source "$(dirname "$0")/common.sh"
cat >"$TMP/family.json" <<'JSON'
{"family": "llama", "n_layer": 1, "n_embd": 64, "n_head": 4, "n_kv_head": 2, "ffn_hidden": 192,
 "vocab_size": 256, "max_seq_len": 64}
JSON
python3 "$S/bench/offload_ladder.py" --bin "$B" --family "$TMP/family.json" --device cpu --device-mib 6 \
  --host-mib 16 --disk-mib 10 --within 0.02 --batch 2 --seq-len 64 --steps 2 --threads 1 --max-layers 64 \
  --nvme-dir "$TMP/nvme" --out "$TMP/ladder" >"$TMP/out" 2>&1 || { echo "FAIL: the ladder"; cat "$TMP/out"; exit 1; }
python3 - "$TMP/ladder/ladder.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = {x["tier"]: x for x in d["tiers"]}
assert list(t) == ["gpu", "opt-cpu", "cpu", "nvme"], list(t)
for name, x in t.items():
    m = x["fit"]["measured"]
    print(f"ok: {name}: {x['plan']['n_layer']} layers, {x['plan']['psi']} parameters, measured / predicted "
          f"{m['ratio']}; next size up {x['next_plan']['n_layer']} layers: {x['next']['status']} ({x['binds']})")
    assert m["within"] and x["next"]["status"] == "failed cleanly", x
    checkpoint = 2 * 64 * 64 * 4 if name in ("cpu", "nvme") else 0  # B x T x C float32
    assert abs(m["device"] - x["plan"]["device"]) <= checkpoint, (name, m["device"], x["plan"]["device"])
    assert (m["host"], m["disk"]) == (x["plan"]["host"], x["plan"]["disk"]), (name, m, x["plan"])
for name in ("opt-cpu", "cpu", "nvme"):
    assert t[name]["plan"]["psi"] > t["gpu"]["plan"]["psi"], (name, t[name]["plan"]["psi"], t["gpu"]["plan"]["psi"])
PY
