#!/usr/bin/env python3
"""Keeps the docs true to the repository: what a doc points at must exist.

    tests/check_doc_paths.py ROOT [DOC...]   (no DOC: README.md and every docs/*.md)
    tests/check_doc_paths.py --self-test     (each kind of failure must be found in small docs)

Three checks, each failure listed with the doc and line:

1. Backticked paths. A backticked token with a '/' whose first part is a top-level folder or file
   of the repository (`zero/stage.h`, `tests/check_layers.py`) must exist; a trailing `'s`, `:`,
   `,` or `.` is ignored. A token with `*` or `?` is a pattern and must match at least one file;
   `{a,b}` stands for each of its alternatives (`zero/engine_config.{h,cpp}`), and each must exist.
2. Relative Markdown links. `[text](target)`, `![alt](target)` and reference definitions
   (`[label]: target`): the target, relative to the
   doc's own folder, must exist. http(s)://, mailto: and other scheme links are not checked. An
   anchor (`page.md#a-heading`, or `#a-heading` for the doc itself) must be the GitHub anchor of a
   heading of that Markdown file (lower case, punctuation dropped, spaces as '-'). Code (fenced
   blocks and `inline code`) is not read for links.
3. "`file`'s `Name`" claims. When a backticked repository file is followed by 's and a
   backticked name (the two may sit on different lines), every identifier in the name
   (`Trainer::step` gives Trainer and step; a trailing `()` is ignored) must occur as a whole word
   in that file's text. Files outside the repository (llm.c's `dev/...`) are not checked.
Exits 1 when anything fails.
"""
import glob
import os
import re
import sys
import tempfile

PATH_TOKEN = re.compile(r"`([^`\s]+)`")
LINK = re.compile(r"!?\[[^\[\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"  # [text](target "title")
                  r"|^[ ]{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?", re.M)                 # [label]: target
CLAIM = re.compile(r"`([^`\s]+)`'s\s+`([^`]+)`")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FENCE = re.compile(r"^\s*(```|~~~)")


def blank(text, start, end):
    """text with [start, end) replaced by spaces, newlines kept (offsets and lines stay)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def without_code(text):
    """The doc with fenced blocks and inline code blanked."""
    text = without_fences(text)
    for m in reversed(list(re.finditer(r"`[^`\n]*`", text))):
        text = blank(text, m.start(), m.end())
    return text


def without_fences(text):
    """The doc with the lines of fenced code blocks emptied (line numbers stay)."""
    lines, inside = text.split("\n"), False
    for i, line in enumerate(lines):
        if FENCE.match(line):
            inside = not inside
            lines[i] = ""
        elif inside:
            lines[i] = ""
    return "\n".join(lines)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"[`*]", "", heading.strip()).lower()  # markup is not part of the anchor
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found, seen = set(), {}
    with open(path, encoding="utf-8") as f:
        for line in without_fences(f.read()).split("\n"):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
    return found


def expand_braces(path):
    """`zero/engine_config.{h,cpp}` -> both files (the shell's brace expansion, one level)."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",")
            for p in expand_braces(path[:m.start()] + alt + path[m.end():])]


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def check(root, docs):
    """The failures of `docs` (paths relative to `root`), as 'doc:line: what' strings."""
    top = set(os.listdir(root))
    problems = []

    def repo_path(tok):
        tok = re.sub(r"('s)?[:,.]?$", "", tok)
        return tok if "/" in tok and tok.split("/")[0] in top else None

    for doc in docs:
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            text = f.read()
        # 1. backticked paths
        for lineno, line in enumerate(text.split("\n"), 1):
            for tok in PATH_TOKEN.findall(line):
                path = repo_path(tok)
                if path is None:
                    continue
                for one in expand_braces(path):
                    full = os.path.join(root, one)
                    if not (glob.glob(full) if any(c in one for c in "*?") else os.path.exists(full)):
                        problems.append(f"{doc}:{lineno}: `{one}` does not exist")
        # 2. relative links
        prose = without_code(text)
        here = os.path.dirname(os.path.join(root, doc))
        for m in LINK.finditer(prose):
            target = m.group(1) or m.group(2)
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:, ...
            where = f"{doc}:{line_of(prose, m.start())}"
            file_part, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(here, file_part)) if file_part else os.path.join(root, doc)
            if not os.path.exists(full):
                problems.append(f"{where}: link ({target}) points at {os.path.relpath(full, root)}, "
                                f"which does not exist")
                continue
            if anchor and full.endswith(".md") and os.path.isfile(full) and anchor not in anchors(full):
                problems.append(f"{where}: link ({target}): no heading of "
                                f"{os.path.relpath(full, root)} has the anchor #{anchor}")
        # 3. "`file`'s `Name`" claims
        body = without_fences(text)
        for m in CLAIM.finditer(body):
            path, name = repo_path(m.group(1)), m.group(2)
            if path is None or not os.path.isfile(os.path.join(root, path)):
                continue
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                source = f.read()
            name_core = re.sub(r"\(.*\)$", "", name.strip())
            absent = [w for w in IDENT.findall(name_core)
                      if not re.search(r"(?<![A-Za-z0-9_])" + re.escape(w) + r"(?![A-Za-z0-9_])", source)]
            if absent:
                problems.append(f"{doc}:{line_of(body, m.start())}: `{path}`'s `{name}`: "
                                f"{', '.join(absent)} does not occur in {path}")
    return problems


def self_test():
    """Small docs in a temporary repository: each kind of failure must be reported, a good doc not."""
    with tempfile.TemporaryDirectory() as root:
        def write(name, text):
            p = os.path.join(root, name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
        write("src/engine.cpp", "void publish_unit(Unit& u) {}\nstruct Trainer { void step(); };\n")
        write("docs/other.md", "# Other page\n\n## A section: with `code`, and more\n\n## `run_unit`\n")
        write("README.md", "# Top\n")
        good = ("# Good\n\nSee `src/engine.cpp`'s `publish_unit` and `src/engine.cpp`'s\n"
                "`Trainer::step()`; [the other page](other.md), [its section]"
                "(other.md#a-section-with-code-and-more), [a name](other.md#run_unit), [the top](../README.md), [here](#good),\n"
                "[the web](https://example.com/x.md), [a reference][r], `src/*.cpp`, `src/{engine,engine}.cpp`; llm.c's `dev/data/x.py`'s `NOPE`.\n"
                "```\n[a](not-a-link.md) and `src/engine.cpp`'s `gone`\n```\n"
                "Inline code is not a link: `[a](b.md)`.\n\n[r]: other.md#other-page\n")
        cases = [  # (doc, its text, what a reported failure must contain; None: must pass)
            ("docs/good.md", good, None),
            ("docs/path.md", "Read `src/gone.h`.\n", "`src/gone.h` does not exist"),
            ("docs/glob.md", "Every `src/*.py`.\n", "`src/*.py` does not exist"),
            ("docs/braces.md", "In `src/engine.{cpp,h}`.\n", "`src/engine.h` does not exist"),
            ("docs/link.md", "See [it](../docs/missing.md).\n", "docs/missing.md, which does not exist"),
            ("docs/uplink.md", "See [it](../other.md).\n", "points at other.md, which does not exist"),
            ("docs/image.md", "![a\nmulti-line alt](img/none.png)\n", "docs/img/none.png"),
            ("docs/anchor.md", "See [it](other.md#no-such-heading).\n", "anchor #no-such-heading"),
            ("docs/reference.md", "See [it][r].\n\n[r]: ../gone/README.md\n", "gone/README.md, which does not exist"),
            ("docs/bracket.md", "Elements [64, 3136) of it; [a link](gone.md).\n", "docs/gone.md, which"),
            ("docs/self_anchor.md", "# Title\n\n[up](#titel)\n", "anchor #titel"),
            ("docs/name.md", "`src/engine.cpp`'s `publish_units` is it.\n", "publish_units does not occur"),
            ("docs/name_lines.md", "As `src/engine.cpp`'s\n`Trainer::run` does.\n", "run does not occur"),
        ]
        bad = 0
        for doc, text, expect in cases:
            write(doc, text)
            found = check(root, [doc])
            ok = (not found) if expect is None else any(expect in p for p in found)
            if not ok:
                bad += 1
                print(f"FAIL: {doc}: expected {expect or 'no failure'}, got {found}")
            if expect is not None and len(found) != 1:
                bad += 1
                print(f"FAIL: {doc}: expected exactly one failure, got {found}")
        if bad:
            sys.exit(1)
        print(f"ok: the checker reports each of {len(cases) - 1} broken docs and passes the good one")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    docs = sys.argv[2:] or ["README.md"] + sorted(
        os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    problems = check(root, docs)
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"{len(docs)} docs checked: every path, relative link and `file`'s `name` they give exists")


if __name__ == "__main__":
    main()
