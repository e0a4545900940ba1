#!/usr/bin/env python3
"""Static SASS instructions of the backward's in-loop Y / W prefetch call (both tile bodies, full
and partial-tile paths): instructions whose inline stack passes through the call's source
line(s) of bwd_sm80.cuh. Usage:
  python3 loader_sass.py OBJ KERNEL FIRST_LINE LAST_LINE [--nvdisasm P --cuobjdump P]
(main at the time: the call is line 985; with ywrun.patch applied: lines 1025-1032)."""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../scripts"))
import ncu_lines as N  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("obj")
ap.add_argument("kernel")
ap.add_argument("first", type=int)
ap.add_argument("last", type=int)
ap.add_argument("--nvdisasm")
ap.add_argument("--cuobjdump")
a = ap.parse_args()
a.cubin = a.sass = None
a.arch = "sm_90a"
sass = N.parse_sass(N.disassemble(a), a.kernel)
ops = collections.Counter()
for off, t, st in sass:
    if any(fr[0].endswith("bwd_sm80.cuh") and a.first <= fr[1] <= a.last for fr in st):
        ops[N.opcode(t)] += 1
print(f"{a.kernel}: {len(sass)} SASS instructions, {sum(ops.values())} on the loader call; {ops.most_common(12)}")
