#!/usr/bin/env python3
# Every source opens with its table of contents: a `// defines:` line among its first comment lines
# (CTest meta.defines). Fails naming each .h / .cpp / .cu in the project's source folders (build
# folders and hidden ones skipped; no git needed: a fresh machine's tests run without it) whose
# opening comment lacks one:
#
#   zero/engine.cpp: no 'defines:' in its opening comment (e.g. "// defines: Engine (step, ...)")
#
#   python3 tests/check_defines.py [ROOT]      (default: the repository of this script)
import os
import sys

EXT = (".h", ".cpp", ".cu")
# The project's source folders: the layers (layers.txt) and the programs above them.
FOLDERS = ("core", "cuda", "autograd", "nn", "optim", "dist", "zero", "parallel", "models", "formats", "train",
           "tools", "tests", "bench", "examples")
# Shown verbatim as README.md's C++ example (docs.readme_example): its first line is the README's.
EXEMPT = {"examples/readme/main.cpp"}


def opening_comment(path):
    """The file's first lines up to the first line that is not a // comment."""
    lines = []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.startswith("//"):
                break
            lines.append(line)
    return lines


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = []
    for folder in FOLDERS:
        for d, dirs, names in os.walk(os.path.join(root, folder)):
            dirs[:] = sorted(x for x in dirs if not x.startswith((".", "build")))
            files += sorted(os.path.relpath(os.path.join(d, n), root) for n in names)
    missing = [f for f in files
               if f.endswith(EXT) and f not in EXEMPT and os.path.exists(os.path.join(root, f))
               and not any("defines:" in l for l in opening_comment(os.path.join(root, f)))]
    for f in missing:
        print(f"{f}: no 'defines:' in its opening comment (e.g. \"// defines: Engine (step, ...)\")")
    checked = sum(f.endswith(EXT) for f in files)
    if missing:
        print(f"FAIL: {len(missing)} of {checked} sources lack a '// defines:' line")
        return 1
    print(f"ok: all {checked} sources open with '// defines:'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
