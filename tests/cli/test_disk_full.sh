#!/usr/bin/env bash
# A disk that fills, for real: small tmpfs file systems mounted for the test (root; skipped with
# a message where mounting is not allowed).
#  1. A checkpoint save that runs out of space fails with an error naming the file, the bytes and
#     ENOSPC on every rank; the previous checkpoint and `latest` stay intact, and resuming from
#     them is bitwise the uninterrupted run.
#  2. The NVMe tier's swap files: a disk too small fails at setup naming the swap file and the
#     bytes needed and free; a disk that another writer fills during the run does not disturb it
#     (the swap space is preallocated with fallocate at setup: zero/aio.h), losses bitwise.
source "$(dirname "$0")/common.sh"
A=(--model gpt2-nano --train "$S/data/corpus/train.txt" -t 32 -b 2 --steps 8 --seed 7 --zero-stage 3 --threads 1)
disk="$TMP/disk"
mkdir -p "$disk"
if ! mount -t tmpfs -o size=1m tmpfs "$disk" 2>"$TMP/mount.err"; then
  echo "SKIP: cannot mount a small tmpfs here ($(head -c 200 "$TMP/mount.err")): the disk-full tests need root"
  exit 77
fi
umount "$disk"
trap 'umount "$disk" 2>/dev/null || true; rm -rf "$TMP"' EXIT
mount_disk() { umount "$disk" 2>/dev/null || true; mount -t tmpfs -o "size=$1" tmpfs "$disk"; }

# ---- 1. checkpoint save ----
"${MPI[@]}" -np 2 "$B/zt-train" "${A[@]}" --ckpt-dir "$TMP/full" --ckpt-interval 2 --log "$TMP/full.jsonl" 2>/dev/null
ck=$(du -sb "$TMP/full/step_00000002" | cut -f1)
mount_disk "$(( ck * 3 / 2 / 1024 ))k"  # room for one checkpoint and a half
if "${MPI[@]}" -np 2 "$B/zt-train" "${A[@]}" --ckpt-dir "$disk/ck" --ckpt-interval 2 --log "$TMP/k.jsonl" 2>"$TMP/k.err"; then
  echo "FAIL: a save to a full disk succeeded"; exit 1
fi
for needle in "$disk/ck/step_00000004.tmp/rank_0000" "No space left on device" "ENOSPC: the disk is full" "bytes at offset"; do
  grep -qF -- "$needle" "$TMP/k.err" || { echo "FAIL: the error lacks '$needle':"; cat "$TMP/k.err"; exit 1; }
done
echo "ok: disk full during the step-4 save ($ck bytes per checkpoint, $(df -B1 --output=size "$disk" | tail -1) byte disk): $(grep -m1 -o 'checkpoint rank file.*' "$TMP/k.err" | cut -c1-170)"
[ "$(cat "$disk/ck/latest")" = step_00000002 ] || { echo "FAIL: latest is '$(cat "$disk/ck/latest")'"; exit 1; }
cp -r "$disk/ck" "$TMP/ck"  # resume where there is room
"${MPI[@]}" -np 2 "$B/zt-train" "${A[@]}" --ckpt-dir "$TMP/ck" --ckpt-interval 2 --resume --log "$TMP/k.jsonl" 2>"$TMP/r.err" ||
  { echo "FAIL: resume from the last good checkpoint failed:"; cat "$TMP/r.err"; exit 1; }
diff <(losses "$TMP/full.jsonl") <(losses "$TMP/k.jsonl") >"$TMP/diff" ||
  { echo "FAIL: resumed losses differ from the uninterrupted run:"; head "$TMP/diff"; exit 1; }
for r in 0 1; do cmp "$TMP/full/step_00000008/rank_0000$r.bin" "$TMP/ck/step_00000008/rank_0000$r.bin"; done
echo "ok: latest stayed step_00000002; resumed from it: 8 losses and the final shards bitwise"

# ---- 2. NVMe swap files ----
python3 - "$S/configs/zero3-nvme.json" "$TMP/nvme.json" "$disk/swap" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["train_micro_batch_size_per_gpu"] = 2
c.pop("train_batch_size", None)
c["activation_checkpointing"] = {"enabled": True}
z = c["zero_optimization"]
for k in ["offload_optimizer", "offload_param"]:
    if z.get(k, {}).get("device") == "nvme": z[k]["nvme_path"] = sys.argv[3]
json.dump(c, open(sys.argv[2], "w"))
PY
N=(--model gpt2-nano --train "$S/data/corpus/train.txt" -t 32 --steps 40 --seed 7 --threads 1 --config "$TMP/nvme.json")
mount_disk 64k
expect_fail "swap files on a disk too small" "cannot allocate the NVMe tier's swap space" "${MPI[@]}" -np 2 "$B/zt-train" "${N[@]}"
grep -qF "$disk/swap/zt-swap-rank" "$TMP/err" && grep -q "bytes) needed" "$TMP/err" ||
  { echo "FAIL: the error does not name the swap file and the bytes:"; cat "$TMP/err"; exit 1; }
mount_disk 64m
"${MPI[@]}" -np 2 "$B/zt-train" "${N[@]}" --log "$TMP/n.jsonl" 2>/dev/null
rm -rf "$disk/swap"
# Again, while a writer fills the disk to the last byte after step 2 (the swap space exists then).
"${MPI[@]}" -np 2 "$B/zt-train" "${N[@]}" --log "$TMP/f.jsonl" 2>"$TMP/f.err" &
job=$!
for _ in $(seq 600); do [ -s "$TMP/f.jsonl" ] && [ "$(wc -l <"$TMP/f.jsonl")" -ge 2 ] && break; sleep 0.05; done
dd if=/dev/zero of="$disk/filler" bs=64k 2>/dev/null || true
avail=$(df -B1 --output=avail "$disk" | tail -1)
at=$(wc -l <"$TMP/f.jsonl")
kill -0 "$job" 2>/dev/null || { echo "FAIL: the run ended before the disk was full: nothing was tested"; exit 1; }
wait "$job" || { echo "FAIL: the NVMe run failed when the disk filled:"; cat "$TMP/f.err"; exit 1; }
diff <(losses "$TMP/n.jsonl") <(losses "$TMP/f.jsonl") >"$TMP/diff" ||
  { echo "FAIL: losses with a full disk differ:"; head "$TMP/diff"; exit 1; }
echo "ok: the disk filled ($avail bytes left) at step $at of an NVMe-offload run: it completed, 40 losses bitwise"
