#!/usr/bin/env python3
"""Every CTest test that can skip is registered so that CTest reports it as skipped.

A test that cannot run on this machine (no GPU, no CUDA build, no tmpfs mount, no O_DIRECT) exits
77 and prints why; CTest counts that exit as "Skipped" only when the test has the property
SKIP_RETURN_CODE 77, and as a failure otherwise. This checker reads the build's test list
(ctest --show-only=json-v1), finds the files each test runs (the scripts on its command line, the
scripts they source, and the sources of the test programs it starts, from
<build>/tests/test_programs.txt, which tests/CMakeLists.txt writes) and fails, naming the test and
the file, for every test whose files can exit 77 but whose registration lacks SKIP_RETURN_CODE 77.

"Can exit 77", outside comments: `exit 77` in a shell script; `return 77`, `exit(77)`,
`_Exit(77)` or `ZT_SKIP(` (tests/skip.h) in C++.

  check_skip_codes.py --ctest CTEST --build BUILD_DIR
  check_skip_codes.py --self-test     (the checker must find a missing registration)
"""
import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile

SHELL_SKIP = re.compile(r"\bexit\s+77\b")
CPP_SKIP = re.compile(r"\breturn\s+77\s*;|\b_?[Ee]xit\s*\(\s*77\s*\)|\bZT_SKIP\s*\(")
SHELL_SOURCE = re.compile(r'^\s*(?:source|\.)\s+"?\$\(dirname "\$0"\)/([^"\s]+)"?')


def strip_comments(text, shell):
    """The text with its comments blanked; line numbers stay those of the file."""
    if shell:
        return "\n".join("" if line.lstrip().startswith("#") else line for line in text.splitlines())
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


@functools.lru_cache(maxsize=None)  # every case of a Catch2 program shares its sources: read each once
def skip_lines(path, seen=frozenset()):
    """The lines of `path` (and of the shell scripts it sources) that can exit 77, as 'file:line'."""
    if path in seen or not os.path.isfile(path):
        return ()
    seen = seen | {path}
    shell = path.endswith(".sh")
    if not (shell or path.endswith((".cpp", ".cu", ".h"))):
        return ()
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = []
    pattern = SHELL_SKIP if shell else CPP_SKIP
    for n, line in enumerate(strip_comments(text, shell).splitlines(), 1):
        if pattern.search(line):
            found.append(f"{path}:{n}")
        m = SHELL_SOURCE.match(line) if shell else None
        if m:
            found += skip_lines(os.path.join(os.path.dirname(path), m.group(1)), seen)
    return tuple(found)


def read_programs(path):
    """{program file: [its source files]} from test_programs.txt ('<file>\\t<src>|<src>...')."""
    programs = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if "\t" in line:
                    exe, srcs = line.rstrip("\n").split("\t", 1)
                    programs[exe] = [s for s in srcs.split("|") if s]
    return programs


def problems(tests, programs):
    out = []
    for t in tests:
        files = []
        for arg in t.get("command", []):
            files += programs.get(arg, [])
            if arg.endswith(".sh"):
                files.append(arg)
        lines = [l for f in files for l in skip_lines(f)]
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        code = props.get("SKIP_RETURN_CODE")
        if lines and str(code) != "77":
            out.append(f"{t['name']}: can exit 77 ({', '.join(lines[:3])}) but is registered with "
                       f"SKIP_RETURN_CODE {code if code is not None else '(not set)'}: CTest would "
                       f"count its skip as a failure; set_tests_properties(... SKIP_RETURN_CODE 77)")
    return out


def check(ctest, build):
    res = subprocess.run([ctest, "--show-only=json-v1"], cwd=build, capture_output=True, text=True)
    if res.returncode != 0:
        print(f"FAIL: '{ctest} --show-only=json-v1' in {build} exited {res.returncode}:\n{res.stderr}")
        return 1
    tests = json.loads(res.stdout).get("tests", [])
    programs = read_programs(os.path.join(build, "tests", "test_programs.txt"))
    if not programs:
        print(f"FAIL: {build}/tests/test_programs.txt lists no test program (tests/CMakeLists.txt writes it)")
        return 1
    found = problems(tests, programs)
    for p in found:
        print("FAIL:", p)
    skippers = sum(1 for t in tests if any(p["name"] == "SKIP_RETURN_CODE" for p in t.get("properties", [])))
    print(f"{len(tests)} tests, {len(programs)} test programs; {skippers} registered with SKIP_RETURN_CODE; "
          f"{len(found)} that can skip without it")
    return 1 if found else 0


def self_test():
    with tempfile.TemporaryDirectory() as d:
        def write(name, text):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                f.write(text)
            return p
        skips = write("skips.sh", 'echo "SKIP: no device"; exit 77\n')
        write("common.sh", "skip() { echo SKIP; exit 77; }\n")
        sources = write("sources.sh", 'source "$(dirname "$0")/common.sh"\ntrue\n')
        quiet = write("quiet.sh", "# exit 77 only in a comment\nexit 0\n")
        cpp = write("t.cpp", 'TEST_CASE("x") { if (no) ZT_SKIP("no O_DIRECT"); }\n')
        cpp_comment = write("c.cpp", "// returns 77: exit(77) in a comment only\nint main() { return 0; }\n")
        prog, prog2 = os.path.join(d, "prog"), os.path.join(d, "prog2")
        programs = {prog: [cpp], prog2: [cpp_comment]}
        skip77 = [{"name": "SKIP_RETURN_CODE", "value": 77}]
        cases = [  # (test, must be reported)
            ({"name": "script_without", "command": ["/bin/bash", skips]}, True),
            ({"name": "script_with", "command": ["/bin/bash", skips], "properties": skip77}, False),
            ({"name": "sourced_without", "command": ["/bin/bash", sources]}, True),
            ({"name": "comment_only", "command": ["/bin/bash", quiet]}, False),
            ({"name": "program_without", "command": [prog, "case"]}, True),
            ({"name": "program_with", "command": [prog, "case"], "properties": skip77}, False),
            ({"name": "program_comment_only", "command": [prog2]}, False),
            ({"name": "wrapper_without", "command": ["/bin/bash", quiet, prog]}, True),
        ]
        bad = 0
        for test, must in cases:
            got = bool(problems([test], programs))
            if got != must:
                print(f"FAIL: self-test case {test['name']}: reported={got}, expected {must}")
                bad += 1
        print(f"self-test: {len(cases) - bad} of {len(cases)} cases as expected")
        return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ctest")
    ap.add_argument("--build")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not (a.ctest and a.build):
        ap.error("--ctest and --build are required (or --self-test)")
    return check(a.ctest, a.build)


if __name__ == "__main__":
    sys.exit(main())
