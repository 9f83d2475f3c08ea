#!/usr/bin/env bash
# zt-info runs on any machine: a CUDA build without a GPU (or without a driver) reports that
# there is no device and why, and exits 0; with a GPU it lists the devices.
source "$(dirname "$0")/common.sh"
"$B/zt-info" > "$TMP/out" 2>&1 || { echo "FAIL: zt-info exited non-zero"; cat "$TMP/out"; exit 1; }
grep -q "^CUDA: " "$TMP/out" || { echo "FAIL: no CUDA line"; cat "$TMP/out"; exit 1; }
"$B/zt-info" --json > "$TMP/j"
python3 - "$TMP/j" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
c = j["cuda"]
if c["built"]:
    assert c["devices"] or c["reason"], "a CUDA build must list devices or say why there are none"
print("ok: zt-info:", "CUDA built," if c["built"] else "CPU-only build,",
      f"{len(c.get('devices', []))} device(s)" + (f" ({c['reason']})" if c.get("reason") else ""))
PY
