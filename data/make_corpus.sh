#!/usr/bin/env bash
# Builds the bundled byte-level corpus data/corpus/{train,val}.txt from the project's own text:
# every *.md, *.h, *.cpp, *.py, *.sh and CMakeLists.txt present under the repository (tracked or
# not), excluding build*/ at the top, data/ itself and hidden directories (.git, .ci, ...).
#
# Deterministic: the file list is sorted bytewise (LC_ALL=C) and each file is written whole, after
# a separator line "<<< file: PATH >>>". File i of the sorted list (0-based) goes to val.txt when
# i % 10 == 9, else to train.txt. The same tree gives the same bytes.
#
# Writes data/corpus/train.txt, data/corpus/val.txt, data/corpus/files.txt (the split of each
# file), and refreshes the statistics block of data/README.md. Prints the byte counts and the
# unigram (byte) entropy of each split in nats: H = -sum_b p(b) ln p(b), p = byte frequency.
# Needs only bash, find, sort and python3 (standard library).
#
# Usage: bash data/make_corpus.sh        (from anywhere)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$here/corpus"
mkdir -p "$out"

cd "$root"
export LC_ALL=C
mapfile -t files < <(
  find . \( -path './build*' -o -path './data' -o -name '.*' ! -name '.' \) -prune -o \
       -type f \( -name '*.md' -o -name '*.h' -o -name '*.cpp' -o -name '*.py' -o -name '*.sh' \
                  -o -name 'CMakeLists.txt' \) -print |
  sed 's|^\./||' | sort
)
if [ "${#files[@]}" -eq 0 ]; then
  echo "make_corpus.sh: no source files found under $root" >&2
  exit 1
fi

train="$out/train.txt.tmp"
val="$out/val.txt.tmp"
list="$out/files.txt.tmp"
: >"$train"
: >"$val"
: >"$list"
i=0
for f in "${files[@]}"; do
  if [ $((i % 10)) -eq 9 ]; then dest="$val"; split=val; else dest="$train"; split=train; fi
  printf '<<< file: %s >>>\n' "$f" >>"$dest"
  cat -- "$f" >>"$dest"
  # Keep the next separator on its own line even when a file lacks a final newline.
  if [ -s "$f" ] && [ "$(tail -c 1 -- "$f" | od -An -c | tr -d ' ')" != '\n' ]; then printf '\n' >>"$dest"; fi
  printf '%s\t%s\n' "$split" "$f" >>"$list"
  i=$((i + 1))
done
mv -f "$train" "$out/train.txt"
mv -f "$val" "$out/val.txt"
mv -f "$list" "$out/files.txt"

python3 - "$out" "$here/README.md" <<'PY'
import math, os, sys

out, readme = sys.argv[1], sys.argv[2]

def stats(path):
    data = open(path, "rb").read()
    counts = [0] * 256
    for b in data:
        counts[b] += 1
    n = len(data)
    h = -sum(c / n * math.log(c / n) for c in counts if c) if n else 0.0
    return n, h, sum(1 for c in counts if c)

files = open(os.path.join(out, "files.txt")).read().splitlines()
nfiles = {s: sum(1 for l in files if l.startswith(s + "\t")) for s in ("train", "val")}
lines = []
for split in ("train", "val"):
    n, h, distinct = stats(os.path.join(out, split + ".txt"))
    line = (f"{split}.txt: {n} bytes, {nfiles[split]} files, {distinct} distinct bytes, "
            f"unigram entropy {h:.4f} nats/byte")
    print(line)
    lines.append("- " + line)

begin, end = "<!-- stats:begin -->", "<!-- stats:end -->"
if os.path.exists(readme):
    text = open(readme).read()
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + begin + "\n" + "\n".join(lines) + "\n" + end + tail
        tmp = readme + ".tmp"
        open(tmp, "w").write(text)
        os.replace(tmp, readme)
PY
