"""Per-entry counts of STS, ISETP and all instructions in cuobjdump -sass listings.

usage: python3 sass_counts.py BASE.sass NEW.sass   (cuobjdump -sass OBJ > X.sass)
"""
import re
import sys


def parse(path):
    d, cur = {}, None
    for line in open(path):
        m = re.match(r"\s+Function : (\S+)", line)
        if m:
            cur = m.group(1)
            d[cur] = {"STS": 0, "ISETP": 0, "n": 0}
            continue
        if cur and re.match(r"\s+/\*[0-9a-f]{4,}\*/", line):
            d[cur]["n"] += 1
            if re.search(r"\bSTS\b", line):
                d[cur]["STS"] += 1
            if "ISETP" in line:
                d[cur]["ISETP"] += 1
    return d


b, n = parse(sys.argv[1]), parse(sys.argv[2])
print(f"{'kernel':34s} {'STS base':>9s} {'new':>5s} {'ISETP base':>11s} {'new':>5s} {'instr base':>11s} {'new':>6s}")
for k in sorted(b):
    if k in n:
        x, y = b[k], n[k]
        print(f"{k:34s} {x['STS']:9d} {y['STS']:5d} {x['ISETP']:11d} {y['ISETP']:5d} {x['n']:11d} {y['n']:6d}")
