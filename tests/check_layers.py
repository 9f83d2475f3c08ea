#!/usr/bin/env python3
# The one dependency rule, checked on the sources (CTest label `layers`; the build enforces the
# same table through each layer's include view, CMakeLists.txt's zt_layer).
#
# Reads layers.txt (the only place the layers are written), then every #include "..." of every
# C++/CUDA source under the repository, and fails naming file:line and the forbidden arrow when a
# file includes a layer that is not its own or below it:
#
#   nn/unit.h:18: #include "zero/engine.h": nn -> zero points up (nn may include: nn autograd core)
#
# A file's layer is the longest layer folder that holds it (dist/nccl/x.cpp: dist/nccl);
# tools/, tests/, bench/ and examples/ sit above every layer and may include anything. A folder with sources
# that is in no layer is an error too (a new folder needs its row in layers.txt).
#
#   python3 tests/check_layers.py [ROOT]      check ROOT (default: the repository of this script)
#   python3 tests/check_layers.py --self-test prove the check fails: a copy of layers.txt in a
#                                             temporary tree with a bad include in each direction
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOP = ("tools", "tests", "bench", "examples")  # above every layer: may include any of them
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def read_layers(path):
    """layers.txt -> (ordered layer folders, {layer: set of layers it may include})."""
    order, sees = [], {}
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.fullmatch(r"([a-z0-9_/]+):(.*)", line)
            if not m:
                sys.exit(f"{path}:{n}: cannot read '{line}': expected '<folder>: <the layers it builds on>'")
            layer, below = m.group(1), m.group(2).split()
            for b in below:  # listed bottom-up, as CMakeLists.txt requires: no cycle is possible
                if b not in sees:
                    sys.exit(f"{path}:{n}: {layer} builds on '{b}', which is not a layer listed above it")
            sees[layer] = {layer}.union(*(sees[b] for b in below))
            order.append(layer)
    return order, sees


def layer_of(rel, layers):
    """The layer holding path `rel` (longest folder prefix), 'top' for tools/tests/bench, or None."""
    best = None
    for layer in layers:
        if rel.startswith(layer + "/") and (best is None or len(layer) > len(best)):
            best = layer
    if best is None and rel.split("/", 1)[0] in TOP:
        return "top"
    return best


def sources(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        # skip hidden folders, build trees at the top (build/, build-cuda/: generated views) and the
        # GPU pack scripts/gpu-pack.sh makes there (gpu-pack/: a copy of tests and peers' sources)
        dirnames[:] = sorted(d for d in dirnames
                             if not d.startswith(".")
                             and not (rel_dir == "." and (d.startswith("build") or d == "gpu-pack")))
        for name in sorted(filenames):
            if name.endswith(SOURCE_EXT):
                yield os.path.normpath(os.path.join(rel_dir, name)).replace(os.sep, "/")


def check(root):
    """Returns the list of violations (strings) of the tree at `root`."""
    layers, sees = read_layers(os.path.join(root, "layers.txt"))
    errors = []
    for rel in sources(root):
        src = layer_of(rel, layers)
        if src is None:
            errors.append(f"{rel}: the folder '{rel.split('/', 1)[0]}' is in no layer: give it a row in layers.txt "
                          f"(or put the file under {', '.join(TOP)})")
            continue
        if src == "top":
            continue
        with open(os.path.join(root, rel), errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                # as the compiler looks: beside the file first, then from the root
                beside = os.path.normpath(os.path.join(os.path.dirname(rel), inc)).replace(os.sep, "/")
                target_path = beside if os.path.exists(os.path.join(root, beside)) else inc
                dst = layer_of(target_path, layers)
                if dst is None and "/" not in target_path:
                    continue  # a header found on the system path ("nccl.h"-style): not ours
                if dst in sees[src]:
                    continue
                if dst == "top" or dst is None:
                    what = f"{src} -> {target_path.split('/', 1)[0]} points out of the layers"
                elif src in sees[dst]:
                    what = f"{src} -> {dst} points up"
                else:
                    what = f"{src} -> {dst} points sideways"
                allowed = " ".join(l for l in layers if l in sees[src])
                errors.append(f'{rel}:{n}: #include "{inc}": {what} ({src} may include: {allowed}; layers.txt)')
    return errors


def self_test():
    """The check must fail on a bad include, naming file:line and the arrow, and pass a clean tree."""
    here = os.path.dirname(os.path.abspath(__file__))
    table = os.path.join(os.path.dirname(here), "layers.txt")
    layers, _ = read_layers(table)
    assert {"core", "nn", "zero", "dist"} <= set(layers), "layers.txt lost a layer the self-test uses"
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(table, os.path.join(tmp, "layers.txt"))

        def write(rel, text):
            os.makedirs(os.path.join(tmp, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(tmp, rel), "w") as f:
                f.write(text)

        write("core/tensor.h", "#pragma once\n")
        write("nn/unit.h", '#pragma once\n#include "core/tensor.h"\n#include "unit_detail.h"\n')
        write("nn/unit_detail.h", "#pragma once\n")
        write("zero/engine.h", '#pragma once\n#include "nn/unit.h"\n#include <vector>\n')
        write("tools/zt-x.cpp", '#include "zero/engine.h"\n')
        clean = check(tmp)
        assert clean == [], f"a clean tree fails: {clean}"

        write("nn/unit.h", '#pragma once\n#include "core/tensor.h"\n#include "zero/engine.h"\n')  # up
        write("dist/group.cpp", '// x\n#include "nn/unit.h"\n')                                  # sideways
        write("core/x.cpp", '#include "tests/helper.h"\n')                                       # out
        write("tests/helper.h", "#pragma once\n")
        write("scratch/y.cpp", "int y;\n")                                                        # no layer
        errors = check(tmp)
        want = ['nn/unit.h:3: #include "zero/engine.h": nn -> zero points up',
                'dist/group.cpp:2: #include "nn/unit.h": dist -> nn points sideways',
                'core/x.cpp:1: #include "tests/helper.h": core -> tests points out of the layers',
                "scratch/y.cpp: the folder 'scratch' is in no layer"]
        for w in want:
            assert any(e.startswith(w) for e in errors), f"expected an error starting with {w!r}, got {errors}"
        assert len(errors) == len(want), f"unexpected errors: {errors}"
        # and through the command line: exit status 1, the messages on stderr
        r = subprocess.run([sys.executable, os.path.abspath(__file__), tmp], capture_output=True, text=True)
        assert r.returncode == 1 and want[0] in r.stderr, (r.returncode, r.stderr)
    print("check_layers self-test: a clean tree passes; an upward, a sideways and an outward include and a "
          "folder in no layer each fail with file:line and the arrow")


def main(argv):
    if argv[1:] == ["--self-test"]:
        self_test()
        return 0
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    errors = check(root)
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"check_layers: {len(errors)} include(s) break the dependency rule of layers.txt", file=sys.stderr)
        return 1
    layers, sees = read_layers(os.path.join(root, "layers.txt"))
    print(f"check_layers: every #include of {sum(1 for _ in sources(root))} sources follows layers.txt "
          f"({len(layers)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
