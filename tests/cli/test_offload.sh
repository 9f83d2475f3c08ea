#!/usr/bin/env bash
# ZeRO-Offload / ZeRO-Infinity through zt-train under mpirun (docs/offload.md): the ready offload
# configs train on 2 ranks with the losses of the same run without offload; under a device cap
# the memory table shows the model states in the host tier and the swap file, each rank's equal to
# its own dry run's; a path that is not
# a directory and a disk that is full (a file-size limit) are errors before the first step,
# naming the path; the swap files are gone after the run.
source "$(dirname "$0")/common.sh"
A=(--model gpt2-nano --train "$S/data/corpus/train.txt" -t 32 --threads 1 --steps 8)

# The ready configs with the swap directory in $TMP.
python3 - "$S/configs" "$TMP" <<'PY'
import json, sys
src, tmp = sys.argv[1], sys.argv[2]
for name in ["zero3.json", "zero3-offload.json", "zero3-nvme.json"]:
    c = json.load(open(f"{src}/{name}"))
    c.pop("model", None)
    c["activation_checkpointing"] = {"enabled": True}  # as the offload configs: the same arithmetic
    c["train_micro_batch_size_per_gpu"] = 2
    z = c["zero_optimization"]
    for k in ["offload_optimizer", "offload_param"]:
        if z.get(k, {}).get("device") == "nvme": z[k]["nvme_path"] = f"{tmp}/nvme"
    z["sub_group_size"] = 5000  # several sub-groups per unit
    json.dump(c, open(f"{tmp}/{name}", "w"))
PY

for cfg in zero3 zero3-offload zero3-nvme; do
  "${MPI[@]}" -np 2 "$B/zt-train" --config "$TMP/$cfg.json" "${A[@]}" --memory-limit-mib 8 --log "$TMP/$cfg.jsonl" \
    2>"$TMP/$cfg.err" || { echo "FAIL: $cfg"; cat "$TMP/$cfg.err"; exit 1; }
done
grep -q "offload: optimizer -> nvme" "$TMP/zero3-nvme.err" || { echo "FAIL: no offload banner"; cat "$TMP/zero3-nvme.err"; exit 1; }
for cfg in zero3-offload zero3-nvme; do
  diff <(losses "$TMP/zero3.jsonl") <(losses "$TMP/$cfg.jsonl") >/dev/null \
    || { echo "FAIL: $cfg losses differ from zero3's"; paste <(losses "$TMP/zero3.jsonl") <(losses "$TMP/$cfg.jsonl"); exit 1; }
  echo "ok: $cfg trains on 2 ranks with zero3's losses, bit for bit (8 steps)"
done
# The tables: the device keeps no optimizer state; the host (cpu) or the file (nvme) does.
python3 - "$TMP/zero3-offload.err" "$TMP/zero3-nvme.err" <<'PY'
import re, sys
for path, tier in [(sys.argv[1], "host"), (sys.argv[2], "nvme")]:
    lines = open(path).read().splitlines()
    cells = lambda l: re.split(r"\s{2,}", l.strip())
    dev = next(cells(l) for l in lines if re.match(r"\s+0\s{2,}\S", l))  # rank, params, grads, optim, ...
    assert dev[3] == "0 B / 0 B", f"{path}: the device holds optimizer state: {dev}"
    row = next(cells(l) for l in lines if re.match(r"\s+0\s+" + tier + r"\s", l))  # rank, tier, params, grads, optim
    assert not row[4].startswith("0 B"), f"{path}: no optimizer state in the {tier} tier: {row}"
print("ok: the memory tables show the optimizer state off the device, in the host tier or the swap file")
PY
# Each rank's measured memory beside its own dry run (train/dry_run.h), in zt-train's tables: the
# device's peak per category and in total over the steps, and the host tier's and the swap file's
# current / peak model states, equal as printed (the same allocators' accounting, both ranks).
python3 "$(dirname "$0")/dry_run_rows.py" "$TMP"/zero3.err "$TMP"/zero3-offload.err "$TMP"/zero3-nvme.err
[ -z "$(ls -A "$TMP/nvme")" ] || { echo "FAIL: swap files left: $(ls "$TMP/nvme")"; exit 1; }
echo "ok: the swap files are removed at exit"

# Bad input: nvme_path is a regular file.
touch "$TMP/not-a-dir"
python3 - "$TMP/zero3-nvme.json" "$TMP/bad-path.json" "$TMP/not-a-dir" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["zero_optimization"]["offload_optimizer"]["nvme_path"] = sys.argv[3]
c["zero_optimization"]["offload_param"]["nvme_path"] = sys.argv[3]
json.dump(c, open(sys.argv[2], "w"))
PY
expect_fail "nvme_path is a file" "$TMP/not-a-dir" "$B/zt-train" --config "$TMP/bad-path.json" "${A[@]}"
grep -q "step " "$TMP/err" && { echo "FAIL: a step ran before the error"; exit 1; }
# A full disk: a 64 KiB file-size limit makes allocating the swap file fail before any step.
(ulimit -f 64; expect_fail "disk full" "zt-swap-rank0.bin" "$B/zt-train" --config "$TMP/zero3-nvme.json" "${A[@]}")
grep -q "step " "$TMP/err" && { echo "FAIL: a step ran before the error"; exit 1; }
echo "ok: a full disk is an error before training"
