#!/usr/bin/env python3
"""Where the op-level forward+backward's time goes: device kernels, device idle, host lead.

bwd-bench's target cell (bench/gpu_bwd_bench.py, `ratio`) times one dattn.ops.attention
forward+backward through autograd between two CUDA events after a sync, against SDPA's flash
backend on the same shapes (fp16, H 12, D 64, S 256, v3 log buckets, c2p|p2c, no mask). The
wall time of such a call is the kernels' time plus whatever the device waits for the host:
the lead before the first launch, and gaps where the host has not yet launched the next
kernel (e.g. the backward's host work taking longer than the forward's kernels). This script
splits it, per shape and side, from a torch.profiler trace (CUDA activity, CUPTI timestamps):

  wall_ms      median of the same event-timed call as bwd-bench, without the profiler
  kernels      kernels launched per call (memsets and copies counted separately)
  kernel_ms    sum of the call's kernel durations (memsets / copies in other_ms)
  span_ms      first device activity start to last end (per call, median)
  idle_ms      span_ms - the union of the device activities' intervals: device waiting inside
               the call
  lead_ms      from the call's host start (a record_function range) to its first device activity
  top          the call's kernels by time (name, ms per call, count)
  gaps         the call's device activities in launch order, each with the median time the
               device sat idle before it (after the lead): which launch the device waited for

Under the profiler the host runs slower than without it, so lead_ms and idle_ms are upper
bounds of the unprofiled call's; wall_ms is the unprofiled figure. One GPU, run from the
repository root with the library built: python3 bench/gpu_op_trace.py --json out.json
"""
import argparse
import json
import statistics
import sys

import torch

from gpu_bwd_bench import op_cell, timed  # the target cell's inputs and calls, and bwd-bench's event timing
from gpu_train_bench import interval_union_ns as union_us  # (any time unit)


def device_kind(name):
    """'memset', 'memcpy' or 'kernel' for a device activity's name (CUPTI names memory
    operations "Memset (Device)", "Memcpy DtoD (Device -> Device)", ...)."""
    n = name.lower()
    for k in ("memset", "memcpy"):
        if k in n:
            return k
    return "kernel"


def gaps_us(acts):
    """[(name, gap)] for a call's device activities [(name, start, end)]: in start order, the
    time each waited after all earlier ones had ended (0 when it overlapped or followed at
    once). The first activity's wait is the call's lead, reported apart: its gap is 0."""
    out, end = [], None
    for name, t0, t1 in sorted(acts, key=lambda a: a[1]):
        out.append((name, 0 if end is None else max(0, t0 - end)))
        end = t1 if end is None else max(end, t1)
    return out


def median_gaps(per_call_gaps):
    """Per position, the median gap over the calls whose activity sequence (names) is the
    most common one; [(name, median gap)]."""
    seqs = {}
    for g in per_call_gaps:
        seqs.setdefault(tuple(n for n, _ in g), []).append(g)
    if not seqs:
        return []
    calls = max(seqs.values(), key=len)
    return [(calls[0][i][0], statistics.median(c[i][1] for c in calls)) for i in range(len(calls[0]))]


def trace(fn, calls, tag):
    """Profile `calls` synchronized calls of fn; return the per-call split (medians)."""
    from torch.profiler import ProfilerActivity, profile, record_function
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            with record_function(f"{tag}#{i}"):
                fn()
                torch.cuda.synchronize()
    evs = prof.events()
    ranges = []
    for e in evs:
        if e.name.startswith(tag + "#") and e.device_type == torch.autograd.DeviceType.CPU:
            ranges.append((e.time_range.start, e.time_range.end))
    ranges.sort()
    # (the record_function ranges appear on the device timeline too, as annotations: not device work)
    dev = [e for e in evs if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith(tag + "#")]
    per_call = []
    for (c0, c1) in ranges:
        mine = [e for e in dev if c0 <= e.time_range.start <= c1]
        if not mine:
            continue
        iv = [(e.time_range.start, e.time_range.end) for e in mine]
        ks = [e for e in mine if device_kind(e.name) == "kernel"]
        span = max(x[1] for x in iv) - min(x[0] for x in iv)
        per_call.append({
            "kernels": len(ks),
            "kernel_us": sum(e.time_range.end - e.time_range.start for e in ks),
            "other_us": sum(e.time_range.end - e.time_range.start for e in mine
                            if device_kind(e.name) != "kernel"),
            "span_us": span,
            "idle_us": span - union_us(iv),
            "lead_us": min(x[0] for x in iv) - c0,
            "names": [(e.name, e.time_range.end - e.time_range.start) for e in ks],
            "gaps": gaps_us([(e.name, e.time_range.start, e.time_range.end) for e in mine]),
        })
    if not per_call:
        return {"error": "no device activity matched the calls' host ranges"}
    med = lambda key: statistics.median(p[key] for p in per_call) / 1000.0  # noqa: E731
    by = {}
    for p in per_call:
        for n, d in p["names"]:
            t = by.setdefault(n, [0.0, 0])
            t[0] += d
            t[1] += 1
    nc = len(per_call)
    top = sorted(((n, t[0] / nc / 1000.0, t[1] / nc) for n, t in by.items()), key=lambda x: -x[1])
    return {
        "calls": nc,
        "kernels": statistics.median(p["kernels"] for p in per_call),
        "kernel_ms": med("kernel_us"),
        "other_ms": med("other_us"),
        "span_ms": med("span_us"),
        "idle_ms": med("idle_us"),
        "lead_ms": med("lead_us"),
        "top": [{"name": n[:120], "ms": round(ms, 4), "count": round(c, 2)} for n, ms, c in top[:12]],
        # where the device waited inside the call: each activity in order, with its median wait
        "gaps": [{"name": n[:120], "gap_ms": round(g / 1000.0, 4)}
                 for n, g in median_gaps([p["gaps"] for p in per_call])],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--shapes", default="32x512,8x2048,2x8192")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("gpu_op_trace.py: needs a CUDA device", file=sys.stderr)
        return 2
    H, D, S = 12, 64, 256
    out = {"card": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "H": H, "D": D, "S": S, "dtype": "float16", "shapes": []}
    for sh in args.shapes.split(","):
        B, L = (int(x) for x in sh.split("x"))
        c = op_cell(B, L, H, D, S)
        fwdbwd, fwd, flash = c.fwdbwd, c.fwd, c.flash

        row = {"B": B, "L": L}
        for name, fn in (("dattn_fwdbwd", fwdbwd), ("dattn_fwd", fwd), ("flash_fwdbwd", flash)):
            try:
                r = {"wall_ms": timed(fn, args.reps, float("inf"))}
                r.update(trace(fn, args.calls, name))
            except Exception as exc:  # one side failing keeps the others' figures
                r = {"wall_ms": float("nan"), "error": f"{type(exc).__name__}: {exc}"}
            row[name] = r
        row["ratio_wall"] = row["dattn_fwdbwd"]["wall_ms"] / row["flash_fwdbwd"]["wall_ms"]
        if "kernel_ms" in row["dattn_fwdbwd"] and "kernel_ms" in row["flash_fwdbwd"]:
            row["ratio_kernels"] = ((row["dattn_fwdbwd"]["kernel_ms"] + row["dattn_fwdbwd"]["other_ms"])
                                    / (row["flash_fwdbwd"]["kernel_ms"] + row["flash_fwdbwd"]["other_ms"]))
        out["shapes"].append(row)
        for name in ("dattn_fwdbwd", "dattn_fwd", "flash_fwdbwd"):
            r = row[name]
            if "error" in r:
                print(f"B={B:3d} L={L:5d} {name:13s} wall {r['wall_ms']:.3f} ms; {r['error']}")
                continue
            print(f"B={B:3d} L={L:5d} {name:13s} wall {r['wall_ms']:.3f} ms | kernels {r['kernels']:.0f} "
                  f"{r['kernel_ms']:.3f} ms + other {r['other_ms']:.3f} | span {r['span_ms']:.3f} "
                  f"idle {r['idle_ms']:.3f} lead {r['lead_ms']:.3f}")
            for t in r["top"][:8]:
                print(f"      {t['ms']:8.4f} ms x{t['count']:<5g} {t['name']}")
            waits = [g for g in r.get("gaps", []) if g["gap_ms"] >= 0.001]
            if waits:
                print("      device waited before: " + ", ".join(
                    f"{g['name'][:40]} {1000 * g['gap_ms']:.1f} us" for g in waits))
        print(f"B={B:3d} L={L:5d} ratio (wall) {row['ratio_wall']:.3f}x, "
              f"(device work) {row.get('ratio_kernels', float('nan')):.3f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
