#!/usr/bin/env python3
"""Every source that tests an optional package's macro compiles without that package.

An optional package (libtorch, CUDA, cuDNN, NCCL, BLIS, oneDNN) reaches the code as a macro
ZT_HAVE_<NAME>, defined by CMake when the package was found. Code that compiles only when the
macro is defined (a header included inside `#if defined(ZT_HAVE_TORCH)` but used outside it) builds
on the machine where it was written and fails on one without the package. This checker takes the
build's compile commands (compile_commands.json), and for every C++ source that has a preprocessor
conditional on one of those macros, compiles it again with -fsyntax-only and the macro removed:
each macro alone, and all of them at once when a file tests several. A failure names the file, the
macros removed and the compiler's first errors.

What it cannot see: a macro the build did not define (the package is absent here) is already
"removed"; scripts/sanitizer-build.sh's build hides every optional package and builds every
target, so together the two cover both sides on any machine.

  check_optional_builds.py BUILD_DIR
"""
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

OPTIONAL = ["TORCH", "CUDA", "CUDNN", "NCCL", "BLIS", "ONEDNN"]
COND = re.compile(r"^\s*#\s*(?:if|ifdef|ifndef|elif)\b.*\bZT_HAVE_(" + "|".join(OPTIONAL) + r")\b", re.M)


def variants(macros):
    out = [[m] for m in macros]
    if len(macros) > 1:
        out.append(list(macros))
    return out


def without(args, macros):
    """The compile command with -DZT_HAVE_<m>[=...] removed for each m, compiling for syntax only."""
    out, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c":
            out.append("-fsyntax-only")
            continue
        if any(re.fullmatch(rf"-DZT_HAVE_{m}(=.*)?", a) for m in macros):
            continue
        if a == "-D" and i + 1 < len(args) and any(re.fullmatch(rf"ZT_HAVE_{m}(=.*)?", args[i + 1]) for m in macros):
            skip = True
            continue
        out.append(a)
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    build = sys.argv[1]
    db = os.path.join(build, "compile_commands.json")
    if not os.path.isfile(db):
        print(f"FAIL: {db} is missing (CMAKE_EXPORT_COMPILE_COMMANDS is ON in CMakeLists.txt)")
        return 1
    jobs = []
    for e in json.load(open(db)):
        src = e["file"]
        if not src.endswith(".cpp"):
            continue  # .cu sources are CUDA-only by nature
        with open(src, encoding="utf-8", errors="replace") as f:
            macros = sorted(set(COND.findall(f.read())))
        args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        # ccache (the compiler launcher) is not needed to check syntax
        if os.path.basename(args[0]) == "ccache":
            args = args[1:]
        for v in variants(macros):
            jobs.append((src, v, e["directory"], without(args, v)))

    def run(job):
        src, v, cwd, cmd = job
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        return job, r

    failed = 0
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for (src, v, _, _), r in pool.map(run, jobs):
            if r.returncode != 0:
                failed += 1
                errors = [l for l in r.stderr.splitlines() if "error" in l][:5]
                print(f"FAIL: {os.path.relpath(src)} does not compile without "
                      f"{', '.join('ZT_HAVE_' + m for m in v)}:\n  " + "\n  ".join(errors))
    files = len({j[0] for j in jobs})
    print(f"{files} sources test an optional package's macro; {len(jobs)} compiled without it, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
