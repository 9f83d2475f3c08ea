#!/usr/bin/env python3
# dry_run_rows.py [--device-rows N] ERR...: zt-train's memory tables (its stderr, ERR) hold every
# rank's measured memory beside its own dry run (train/dry_run.h), and the two must be equal as
# printed: the device's peak per category and in total over the steps ("dry run" row under each
# rank), and the host tier's and the swap file's current / peak model states ("<rank> host" rows
# beside "<rank> host dry run"). --device-rows N: each file must hold exactly N ranks' device rows
# (else at least one row of any kind). For tests/cli/test_offload.sh and test_tensor_parallel.sh.
import re
import sys

args = sys.argv[1:]
want_rows = None
if args[:1] == ["--device-rows"]:
    want_rows, args = int(args[1]), args[2:]
pairs = lambda l: re.findall(r"(\S+ \S+) / (\S+ \S+)", l)  # "current / peak" cells, each "<number> <unit>"
for path in args:
    lines = open(path).read().splitlines()
    device_rows = rows = 0
    for i, l in enumerate(lines):
        if re.match(r"\s+\d+\s", l) and i + 1 < len(lines) and lines[i + 1].strip().startswith("dry run"):
            measured = [peak for _, peak in pairs(l)]
            dry = re.findall(r"peak (\S+ \S+)", lines[i + 1])
            assert len(measured) == 8 and measured == dry, f"{path}: {l.split()[0]}: measured {measured}, dry run {dry}"
            device_rows += 1
        m = re.match(r"\s+(\d+)\s+(host|nvme)\s{2,}", l)  # a measured row (its dry run's: "host dry run")
        if m:
            want = next(x for x in lines[i:] if re.match(r"\s+" + m.group(1) + r"\s+" + m.group(2) + r" dry run\s", x))
            assert len(pairs(l)) == 3 and pairs(l) == pairs(want), f"{path}: {l} / {want}"
            rows += 1
    rows += device_rows
    if want_rows is not None:
        assert device_rows == want_rows, f"{path}: {device_rows} ranks' device rows, expected {want_rows}"
    assert rows >= 1, f"{path}: no dry-run rows found"
    print(f"ok: {path.split('/')[-1]}: every rank's measured peaks equal its dry run's, as zt-train prints them ({rows} rows)")
