#!/usr/bin/env bash
# zt-train's --cpu-checkpointing and --host-memory-limit-mib (train/memory_caps.h,
# zero/activation_offload.h): the flag and key checks, a run under a host cap, and the same losses
# with the checkpoints in host memory as on the device.
source "$(dirname "$0")/common.sh"
T="$S/data/corpus/train.txt"
A=(--model gpt2-nano --train "$T" --steps 3 -t 32 --threads 1)   # batch: -b 4, or the config's

cat > "$TMP/plain.json" <<'JSON'
{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}},
 "activation_checkpointing": {"enabled": true, "cpu_checkpointing": true}}
JSON
cat > "$TMP/capped.json" <<'JSON'
{"train_micro_batch_size_per_gpu": 4, "host_memory_limit_mib": 0.25,
 "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
JSON
cat > "$TMP/nockpt.json" <<'JSON'
{"activation_checkpointing": {"enabled": false, "cpu_checkpointing": true}}
JSON

expect_fail "--cpu-checkpointing with --config" "--cpu-checkpointing cannot be combined with --config" \
  "$B/zt-train" "${A[@]}" --config "$TMP/plain.json" --cpu-checkpointing
expect_fail "--cpu-checkpointing alone" "--cpu-checkpointing needs --activation-checkpointing" \
  "$B/zt-train" "${A[@]}" -b 4 --cpu-checkpointing
expect_fail "cpu_checkpointing without enabled" "activation_checkpointing.cpu_checkpointing = true needs activation_checkpointing.enabled = true" \
  "$B/zt-train" "${A[@]}" --config "$TMP/nockpt.json"
expect_fail "the host cap in both places" "--host-memory-limit-mib cannot be combined with --config" \
  "$B/zt-train" "${A[@]}" --config "$TMP/capped.json" --host-memory-limit-mib 64
expect_fail "a negative host cap" "--host-memory-limit-mib" "$B/zt-train" "${A[@]}" -b 4 --host-memory-limit-mib -1
# A cap too small for the offloaded optimizer state and gradient shards: before setup, with the
# host tier's peak in the run's own dry run (train/dry_run.h).
expect_fail "a host cap too small at setup" "host_memory_limit_mib = 256.00 KiB is too small" \
  "$B/zt-train" "${A[@]}" --config "$TMP/capped.json"
grep -qE "dry run \(train/dry_run.h\) peaks at [0-9]+ bytes" "$TMP/err" || { echo "FAIL: the setup error does not say the bytes needed"; cat "$TMP/err"; exit 1; }

# Under a generous host cap, the checkpoints through host memory give the losses of the run that
# keeps them on the device, bit for bit.
"$B/zt-train" "${A[@]}" -b 4 --activation-checkpointing --log "$TMP/device.jsonl" 2>"$TMP/err1" || { cat "$TMP/err1"; exit 1; }
"$B/zt-train" "${A[@]}" -b 4 --activation-checkpointing --cpu-checkpointing --host-memory-limit-mib 64 \
  --log "$TMP/host.jsonl" 2>"$TMP/err2" || { cat "$TMP/err2"; exit 1; }
diff <(losses "$TMP/device.jsonl") <(losses "$TMP/host.jsonl") || { echo "FAIL: losses differ with --cpu-checkpointing"; exit 1; }
[ "$(losses "$TMP/host.jsonl" | wc -l)" = 3 ] || { echo "FAIL: expected 3 logged steps"; exit 1; }
# The flag beside a config that does not set the key: the config's offload and checkpoints under it.
"$B/zt-train" "${A[@]}" --config "$TMP/plain.json" --host-memory-limit-mib 64 2>"$TMP/err3" || { cat "$TMP/err3"; exit 1; }
echo "ok: runs under --host-memory-limit-mib 64, losses equal with --cpu-checkpointing"
