#!/usr/bin/env python3
# doc_blocks.py DOC ROOT MIN_BLOCKS: runs a guide page as written, for tests/cli/test_guide*.sh.
# Every ```sh block of DOC runs in order (bash -euo pipefail) from ROOT, a directory laid out like
# the repository root. Every ```text expect block is checked against the output (stdout + stderr)
# of the sh block just before it, IN ORDER: each expected line, spaces collapsed, must be part of
# an output line after the one that held the previous expected line. So a block may leave lines
# out (timings, other ranks), but not reorder them. A block that exits 77 after printing
# "cannot build a cluster in a box here" (scripts/cluster.sh: no network namespaces) skips the
# rest: exit 77. Fewer than MIN_BLOCKS sh blocks fail (a page whose blocks were renamed would
# otherwise pass empty).
import re
import subprocess
import sys

doc, root, min_blocks = sys.argv[1], sys.argv[2], int(sys.argv[3])
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
        if p.returncode == 77 and "cannot build a cluster in a box here" in out:
            print(f"SKIP: {out.strip().splitlines()[-1]}")
            sys.exit(77)
        if p.returncode != 0:
            print(f"FAIL: the block of {doc} exited {p.returncode}:\n{body}\n--- output:\n{out}")
            sys.exit(1)
        ran += 1
        print(f"ok: ran block {ran}: {body.strip().splitlines()[0][:100]}")
    elif tag == "text expect":
        if out is None:
            print(f"FAIL: {doc}: an expect block before any command block")
            sys.exit(1)
        lines = [norm(l) for l in out.splitlines()]
        at = 0  # the first output line the next expected line may be on
        for want in body.strip().splitlines():
            w = norm(want)
            j = next((k for k in range(at, len(lines)) if w in lines[k]), None)
            if j is None:
                earlier = next((k for k in range(0, at) if w in lines[k]), None)
                why = (f"it is there (output line {earlier + 1}), but not after the previous expected line "
                       f"(output line {at}): the page shows the lines in another order") if earlier is not None else "it is not there"
                print(f"FAIL: {doc} says the output holds\n  {want}\n{why}. The command printed:\n{out}")
                sys.exit(1)
            at = j + 1
            checked += 1
if ran < min_blocks:
    print(f"FAIL: only {ran} command blocks found in {doc} (expected at least {min_blocks})")
    sys.exit(1)
print(f"ok: {ran} command blocks of {doc} ran as written; {checked} output lines as the page shows them, in order")
