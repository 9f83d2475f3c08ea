#!/usr/bin/env python3
# check_doc_blocks.py ROOT DOC...: a code block a page shows as a file's text stays that file's
# text, so it cannot rot. A fenced block right after the marker line
#
#   <!-- file: examples/readme/main.cpp -->
#
# must equal that file (relative to ROOT) line for line. Each DOC must hold at least one marked
# block (a marker deleted by accident fails instead of passing empty). Exit 1 with the first
# differing line of every mismatch. Run by CTest (label docs): the README's C++ example.
import difflib
import pathlib
import re
import sys

MARKER = re.compile(r"^<!-- file: (\S+) -->$")


def blocks(lines):
    """(marker line number, path, block text) for every marked fenced block."""
    for i, line in enumerate(lines):
        m = MARKER.match(line.strip())
        if not m:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            yield i + 1, m.group(1), None  # a marker not followed by a fence
            continue
        end = next((j for j in range(i + 2, len(lines)) if lines[j].startswith("```")), None)
        yield i + 1, m.group(1), None if end is None else "".join(lines[i + 2:end])


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: check_doc_blocks.py ROOT DOC...")
    root = pathlib.Path(argv[1])
    failures, checked = [], 0
    for doc in argv[2:]:
        lines = (root / doc).read_text().splitlines(keepends=True)
        found = list(blocks(lines))
        if not found:
            failures.append(f"{doc}: no '<!-- file: PATH -->' marked code block (expected at least one)")
        for line_no, path, text in found:
            where = f"{doc}:{line_no}"
            if text is None:
                failures.append(f"{where}: the marker of {path} is not followed by a closed ``` block")
                continue
            f = root / path
            if not f.is_file():
                failures.append(f"{where}: {path} does not exist")
                continue
            want = f.read_text()
            if text != want:
                diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), path, where, n=0))
                failures.append(f"{where}: the block differs from {path}:\n{diff}")
                continue
            checked += 1
            print(f"ok: {where} shows {path} verbatim ({len(want.splitlines())} lines)")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
