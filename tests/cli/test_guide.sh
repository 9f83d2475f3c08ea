#!/usr/bin/env bash
# docs/memory-mechanics.md runs as written: every ```sh block is run in order (bash -e) from a
# directory laid out like the repository root (build/ -> the build under test, data/, configs/,
# scripts/), and every line of a ```text expect block must appear in the output of the block
# before it (spaces collapsed). The guide's numbers are therefore the code's numbers.
source "$(dirname "$0")/common.sh"
W="$TMP/root"
mkdir -p "$W"
ln -s "$B" "$W/build"
for d in data configs scripts; do ln -s "$S/$d" "$W/$d"; done
# mpirun as the guide's note says (ranks beyond the cores; root in a container).
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
python3 - "$S/docs/memory-mechanics.md" "$W" <<'PY'
import re, subprocess, sys
doc, root = sys.argv[1], sys.argv[2]
text = open(doc).read()
blocks = re.findall(r"^```([^\n]*)\n(.*?)^```$", text, re.M | re.S)
norm = lambda s: " ".join(s.split())
ran = checked = 0
out = None
for tag, body in blocks:
    tag = tag.strip()
    if tag == "sh":
        p = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=root, capture_output=True, text=True)
        out = p.stdout + p.stderr
        if p.returncode != 0:
            print(f"FAIL: the guide's block exited {p.returncode}:\n{body}\n--- output:\n{out}")
            sys.exit(1)
        ran += 1
        print(f"ok: ran block {ran}: {body.strip().splitlines()[0][:100]}")
    elif tag == "text expect":
        if out is None:
            print("FAIL: an expect block before any command block"); sys.exit(1)
        have = norm(out)
        for line in body.strip().splitlines():
            if norm(line) not in have:
                print(f"FAIL: the guide says the output holds\n  {line}\nbut the command printed:\n{out}")
                sys.exit(1)
            checked += 1
if ran < 6:
    print(f"FAIL: only {ran} command blocks found in {doc}"); sys.exit(1)
print(f"ok: {ran} command blocks of docs/memory-mechanics.md ran as written; {checked} output lines as the guide shows them")
PY
