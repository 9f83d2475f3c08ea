#!/usr/bin/env python3
"""Keeps the map true: every repository path a doc names in backticks must exist.

    tests/check_doc_paths.py ROOT docs/architecture.md [more docs...]

A path is a backticked token with a '/' whose first part is a top-level folder or file of the
repository (`zero/stage.h`, `tests/check_layers.py`); a trailing `'s name` or `:` is ignored.
Exits 1 listing each missing path with the doc and line that names it.
"""
import os
import re
import sys

root = sys.argv[1]
top = set(os.listdir(root))
missing = []
for doc in sys.argv[2:]:
    for lineno, line in enumerate(open(os.path.join(root, doc), encoding="utf-8"), 1):
        for tok in re.findall(r"`([^`\s]+)`", line):
            tok = re.sub(r"('s)?[:,.]?$", "", tok)
            if "/" not in tok or tok.split("/")[0] not in top:
                continue
            if not os.path.exists(os.path.join(root, tok)):
                missing.append(f"{doc}:{lineno}: `{tok}` does not exist")
for m in missing:
    print(m)
if missing:
    sys.exit(1)
print(f"every path named in {', '.join(sys.argv[2:])} exists")
