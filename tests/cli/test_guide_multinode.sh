#!/usr/bin/env bash
# docs/multi-node.md runs as written, like docs/memory-mechanics.md in test_guide.sh: its ```sh
# blocks (the cluster in a box: scripts/cluster.sh up / run / down, and box) run in order from a
# directory laid out like the repository root, and each ```text expect block's lines must appear
# in the output of the block before it, in order (tests/cli/doc_blocks.py). The page's box is
# named 'zt' (subnet 10.77.0): with a box of that name already up the test skips rather than
# touch it, and it takes down a box it left up. Skipped (77) where namespaces cannot be made
# (not root, no CAP_NET_ADMIN), as tests/cli/test_cluster_box.sh is.
source "$(dirname "$0")/common.sh"
if [ -e /run/zt-cluster/zt ]; then echo "SKIP: a box named 'zt' is up already (/run/zt-cluster/zt): the page's commands use that name"; exit 77; fi
W="$TMP/root"
mkdir -p "$W"
ln -s "$B" "$W/build"
for d in data configs scripts; do ln -s "$S/$d" "$W/$d"; done
trap 'bash "$S/scripts/cluster.sh" down --name zt >/dev/null 2>&1; rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=1
python3 "$(dirname "$0")/doc_blocks.py" "$S/docs/multi-node.md" "$W" 2
