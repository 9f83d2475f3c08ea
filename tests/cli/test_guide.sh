#!/usr/bin/env bash
# docs/memory-mechanics.md runs as written: every ```sh block is run in order (bash -e) from a
# directory laid out like the repository root (build/ -> the build under test, data/, configs/,
# scripts/), and every line of a ```text expect block must appear in the output of the block
# before it, in the order the page shows (spaces collapsed; tests/cli/doc_blocks.py). The
# guide's numbers are therefore the code's numbers. docs/multi-node.md: test_guide_multinode.sh.
source "$(dirname "$0")/common.sh"
W="$TMP/root"
mkdir -p "$W"
ln -s "$B" "$W/build"
for d in data configs scripts; do ln -s "$S/$d" "$W/$d"; done
# mpirun as the guide's note says (ranks beyond the cores; root in a container).
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
python3 "$(dirname "$0")/doc_blocks.py" "$S/docs/memory-mechanics.md" "$W" 10
