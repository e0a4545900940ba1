#!/usr/bin/env python3
"""Instruction mix and stall regions of the D = 64 tensor-core backward (tc3b) against SDPA
flash's backward, from a committed ncu run (scripts/gpu_prof.sh: prof/source.csv.gz,
prof/details.txt.gz).

  python3 scripts/bwd_prof_mix.py [--dir bench/results/gpu-2026-11-30-defaults/prof]
      [--obj build/src/cuda/bwd_tc3b_d64.o --nvdisasm P --cuobjdump P --rev a4c8a26]

Prints, per profiled instance of dattn_bwd_tc3b_f16_d64_kv0 (dq kernel) / _kv1 (dkdv kernel):
  * executed warp instructions by category per (CTA, tile) step (64 rows x BN 32 columns),
    per 128 x 128 tile area (flash's tile: 8 steps) and per HMMA;
  * warp-stall samples by category;
  * with --obj (an object built from the profiled commit, checked instruction by instruction
    by ncu_lines.py): samples and executed instructions per source region of bwd_sm80_unit
    (REGIONS below: line ranges of src/cuda/bwd_sm80.cuh at the profiled commit a4c8a26).
For flash's kernel the export holds no per-SASS rows (gpu_prof.sh exports regex:dattn_ only),
so its mix comes from details.txt: HMMA = 5 GEMMs x (128 x 128 x 64) / (16 x 8 x 16) = 2560
per (CTA, tile), checked against the Tensor pipe's instruction rate; the other pipes
(LSU, ALU, FMA, XU, ADU, CBU) from "Inst Executed Pipe" percentages, converted to counts with
a per-pipe peak rate fitted on the dattn kernels (whose opcode counts are known): PIPE_OPS
is the opcode -> pipe assumption; the fit's spread across the 8 dattn instances is printed.

Shapes (gpu_prof_target.py --shapes 32x512,2x8192 --nopos: H 12, D 64): instance order in
source.csv is default 32x512, nopos 32x512, default 2x8192, nopos 2x8192.
"""
import argparse
import collections
import gzip
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_lines  # noqa: E402

H, BM, BN = 12, 64, 32
SHAPES = [("32x512", 32, 512), ("2x8192", 2, 8192)]

CATS = [
    ("HMMA", lambda o: o == "HMMA"),
    ("LDSM", lambda o: o == "LDSM"),
    ("LDS/STS", lambda o: o in ("LDS", "STS")),
    ("LDG/LDGSTS/STG", lambda o: o in ("LDG", "LDGSTS", "STG", "RED", "ATOM", "ATOMG", "REDG", "LDL", "STL")),
    ("MUFU", lambda o: o == "MUFU"),
    ("FFMA/FADD/FMUL", lambda o: o in ("FFMA", "FADD", "FMUL")),
    ("fp other (FSEL FMNMX FSETP)", lambda o: o in ("FSEL", "FMNMX", "FSETP", "FCHK")),
    ("convert (F2FP HADD2 I2F F2I)", lambda o: o in ("F2FP", "HADD2", "HFMA2", "HMUL2", "F2F", "I2F", "F2I", "I2FP")),
    ("SHFL", lambda o: o == "SHFL"),
    ("barrier/sync (BAR DEPBAR LDGDEPBAR WARPSYNC)", lambda o: o in ("BAR", "DEPBAR", "LDGDEPBAR", "WARPSYNC", "MEMBAR")),
    ("int/address", lambda o: o in ("IMAD", "IADD3", "LOP3", "VIADD", "ISETP", "SHF", "LEA", "IABS", "IMNMX", "VIMNMX",
                                    "SEL", "PRMT", "SGXT", "BMSK", "FLO", "POPC", "BREV", "VIADDMNMX", "PLOP3", "P2R",
                                    "R2P", "IMUL")),
    ("moves/constants (MOV CS2R LDC ULDC S2R U*)", lambda o: o in ("MOV", "CS2R", "LDC", "ULDC", "S2R", "S2UR", "R2UR",
                                                                   "B2R", "VOTE", "VOTEU") or o.startswith("U")),
    ("branch (BRA BSSY BSYNC EXIT YIELD)", lambda o: o in ("BRA", "BSSY", "BSYNC", "EXIT", "CALL", "RET", "BRX", "JMP",
                                                           "YIELD", "NOP", "BREAK", "KILL")),
]


def cat_of(op):
    for name, f in CATS:
        if f(op):
            return name
    return "other"


# bwd_sm80_unit regions (first line, name) in src/cuda/bwd_sm80.cuh at a4c8a26 (== main 0183ea7):
# an instruction belongs to the innermost frame of that file inside [386, 1169) (the unit;
# lambdas defined in it count where they are written), else to the frame's function.
REGIONS = [
    (386, "row-block prologue (X/Z load, row facts, sat row consts)"),
    (545, "tile top: barrier, first Y/W load, tile class"),
    (563, "band: window tables + ring rows (cp.async)"),
    (630, "dropout keep bits"),
    (633, "column facts lse/D (dkdv)"),
    (658, "validity bits"),
    (672, "cp.async wait + barrier"),
    (674, "prefetch Y/W of tile n+1"),
    (682, "dP = dO V^T MMA (dq: sat/plain tiles)"),
    (703, "saturated column constants (64-deep FFMA)"),
    (723, "band c2p window MMA + skew read"),
    (759, "S init: saturated / plain constants"),
    (773, "band p2c window MMA + skew store"),
    (802, "S += X Y^T MMA"),
    (815, "band p2c skew add (barrier)"),
    (829, "dP MMA (dq band tiles; dkdv all tiles)"),
    (849, "P = exp2, dS (elementwise)"),
    (919, "dX += dS Y MMA"),
    (934, "dV += P^T dO, hi + lo MMA"),
    (958, "saturated row sums of dS"),
    (968, "band scatter of dS into C"),
    (991, "in-loop flush (bwd_v3_flush)"),
    (1005, "row-block end: flush rest, partials"),
    (1144, "dX / dV out"),
    (1169, None),
]
UNIT_LO, UNIT_HI = 386, 1169


# regions grouped for the summary table
GROUPS = [
    ("GEMM core (S, dP, dX, dV MMAs)", ("dP = dO V^T MMA (dq: sat/plain tiles)", "S += X Y^T MMA", "dX += dS Y MMA",
                                         "dV += P^T dO, hi + lo MMA", "dP MMA (dq band tiles; dkdv all tiles)")),
    ("P, dS elementwise", ("P = exp2, dS (elementwise)",)),
    ("tile loop: barriers, Y/W loads, cp.async, validity",
     ("tile top: barrier, first Y/W load, tile class", "prefetch Y/W of tile n+1", "cp.async wait + barrier",
      "validity bits")),
    ("column facts lse/D (dkdv)", ("column facts lse/D (dkdv)",)),
    ("prologue lines (in the loop: rematerialised values)", ("row-block prologue (X/Z load, row facts, sat row consts)",)),
    ("band: window MMAs, skew, tables, ring", ("band c2p window MMA + skew read", "band p2c window MMA + skew store",
                                              "band p2c skew add (barrier)", "band: window tables + ring rows (cp.async)")),
    ("band: scatter of dS into C", ("band scatter of dS into C",)),
    ("flush (in-loop + row-block end)", ("in-loop flush (bwd_v3_flush)", "row-block end: flush rest, partials")),
    ("saturated: column consts, S init, row sums", ("saturated column constants (64-deep FFMA)",
                                                    "S init: saturated / plain constants", "saturated row sums of dS")),
    ("other (keep bits, output, body loop)", ("dropout keep bits", "dX / dV out")),
]


def group_of(region):
    for g, regs in GROUPS:
        if region in regs:
            return g
    return "other (keep bits, output, body loop)"


def region_of(stack):
    for f, ln in stack:  # innermost first
        if os.path.basename(f) == "bwd_sm80.cuh" and UNIT_LO <= ln < UNIT_HI:
            name = None
            for lo, nm in REGIONS:
                if ln >= lo:
                    name = nm
            return name
    if stack:
        f, ln = stack[-2] if len(stack) >= 2 else stack[-1]
        return f"outside the unit ({os.path.basename(f)}:{ncu_lines.func_of(f, ln)})"
    return "?"


def parse_details(path):
    """[(kernel header, {metric: value})] from ncu's details page (first value of a name wins)."""
    out, cur, table = [], None, ""
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.startswith("  ") and not line.startswith("   ") and "Context" in line:
                cur, table = (line.strip(), {}), ""
                out.append(cur)
                continue
            if cur is None:
                continue
            t = re.match(r"^\s+Table Name : (.*)$", line)
            if t:
                table = t.group(1).strip()
                continue
            m = re.match(r"^\s{4}(\S.*?)\s{2,}(\S+)?\s+([\d,.]+|no data)\s*$", line)
            if m and m.group(3) != "no data":
                name = m.group(1).strip()
                if table.startswith("Pipe Utilization (% of peak instructions executed over elapsed"):
                    name = "inst: " + name
                cur[1].setdefault(name, float(m.group(3).replace(",", "")))
    return out


# opcode -> pipe for the instruction-rate fit (assumption; the fit's spread tests it)
PIPE_OPS = {
    "LSU": ("LDS", "STS", "LDSM", "LDG", "STG", "LDGSTS", "SHFL", "LDL", "STL", "RED", "ATOM", "ATOMG", "REDG"),
    "XU": ("MUFU", "I2F", "F2I", "I2FP", "F2F", "POPC", "FLO", "BREV"),
    "Tensor (FP)": ("HMMA",),
}


def dattn_instances(kernels):
    """(index, kernel, shape, variant) of the tc3b kernels in source.csv (each appears twice in
    the export: the first copy of each pair is used)."""
    seen = collections.Counter()
    res = []
    for i, k in enumerate(kernels):
        if not k["name"].startswith("dattn_bwd_tc3b"):
            continue
        seen[k["name"]] += 1
        n = seen[k["name"]]
        if n % 2 == 0:
            continue  # duplicate copy
        occ = (n - 1) // 2  # 0..3
        shape = SHAPES[occ // 2]
        variant = "default" if occ % 2 == 0 else "nopos"
        res.append((i, k, shape, variant))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="bench/results/gpu-2026-11-30-defaults/prof")
    ap.add_argument("--obj")
    ap.add_argument("--nvdisasm")
    ap.add_argument("--cuobjdump")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--rev", default="a4c8a26")
    ap.add_argument("--regions", type=int, default=14, help="rows of the region tables")
    args = ap.parse_args()
    ncu_lines.SRC_REV = args.rev
    kernels, _ = ncu_lines.read_csv(os.path.join(args.dir, "source.csv.gz"))
    det = parse_details(os.path.join(args.dir, "details.txt.gz"))
    insts = dattn_instances(kernels)

    sass = {}
    if args.obj:
        class A:  # the arguments ncu_lines.disassemble reads
            pass
        a = A()
        a.sass, a.cubin, a.obj, a.arch = None, None, args.obj, args.arch
        a.nvdisasm, a.cuobjdump = args.nvdisasm, args.cuobjdump
        text = ncu_lines.disassemble(a)
        for kv in (0, 1):
            name = f"dattn_bwd_tc3b_f16_d64_kv{kv}"
            sass[name] = ncu_lines.parse_sass(text, name)

    # ---- details of the matching launches (same order as the export)
    det_by = collections.defaultdict(list)
    for hdr, m in det:
        key = "flash_bwd" if "flash_bwd_dq_dk_dv" in hdr else hdr.split()[0]
        det_by[key].append((hdr, m))

    rows = []
    for n, (i, k, (sname, B, L), var) in enumerate(insts):
        steps = B * H * (L // BM) * (L // BN)
        dets = det_by[k["name"]]
        occ = sum(1 for x in insts[:n] if x[1]["name"] == k["name"])
        d = dets[occ][1]
        cat = collections.Counter()
        samp = collections.Counter()
        ops = collections.Counter()
        for ins in k["ins"]:
            op = ncu_lines.opcode(ins["text"]).split(".")[0]
            ex = ins.get("Instructions Executed", 0)
            s = ins.get("Warp Stall Sampling (All Samples)", 0)
            cat[cat_of(op)] += ex
            samp[cat_of(op)] += s
            ops[op] += ex
        rows.append(dict(i=i, name=k["name"], shape=sname, var=var, steps=steps, cat=cat, samp=samp, ops=ops,
                         det=d, kern=k))

    # ---- fit of per-pipe peak rates on the dattn instances
    print("# per-pipe peak instruction rate (per SM per cycle) fitted on the dattn instances:")
    print("#   rate = (opcode count of the pipe) / (pct/100 x elapsed cycles x 132 SMs)")
    rate = {}
    for pipe, opset in PIPE_OPS.items():
        rs = []
        for r in rows:
            pct = r["det"].get("inst: " + pipe)
            cyc = r["det"]["Elapsed Cycles"]
            cnt = sum(r["ops"][o] for o in opset)
            if pct:
                rs.append(cnt / (pct / 100 * cyc * 132))
        rate[pipe] = sum(rs) / len(rs)
        print(f"#   {pipe:<12} mean {rate[pipe]:.3f}  min {min(rs):.3f}  max {max(rs):.3f}  ({len(rs)} instances)")

    # ---- table: category per (CTA, tile) step and per 128x128 area
    fl = det_by["flash_bwd"]
    flash_cpa = {}
    print()
    print("# executed warp instructions per (CTA, tile) step (dattn: 64 x 32 tile, 4 warps; "
          "flash: 128 x 128 tile, 8 warps)")
    hdr = ["category"] + [f"{r['name'][-3:]} {r['var']} {r['shape']}" for r in rows]
    print(" | ".join(hdr))
    for cname, _ in CATS + [("other", None)]:
        vals = [r["cat"][cname] / r["steps"] for r in rows]
        if max(vals) == 0:
            continue
        print(" | ".join([cname] + [f"{v:.1f}" for v in vals]))
    print(" | ".join(["total"] + [f"{sum(r['cat'].values()) / r['steps']:.1f}" for r in rows]))
    print(" | ".join(["HMMA per step (expected: kv0 192, kv1 320 on plain tiles)"] +
                     [f"{r['cat']['HMMA'] / r['steps']:.1f}" for r in rows]))
    print(" | ".join(["instructions per HMMA"] + [f"{sum(r['cat'].values()) / r['cat']['HMMA']:.2f}" for r in rows]))
    print(" | ".join(["non-HMMA instructions per HMMA"] +
                     [f"{(sum(r['cat'].values()) - r['cat']['HMMA']) / r['cat']['HMMA']:.2f}" for r in rows]))
    print(" | ".join(["per 128x128 area (x8 steps), total"] +
                     [f"{8 * sum(r['cat'].values()) / r['steps']:.0f}" for r in rows]))
    print(" | ".join(["elapsed cycles"] + [f"{r['det']['Elapsed Cycles']:.0f}" for r in rows]))
    print(" | ".join(["issue slots busy %"] + [f"{r['det'].get('Issue Slots Busy', 0):.2f}" for r in rows]))
    print(" | ".join(["tensor pipe active %"] + [f"{r['det'].get('SM: Pipe Tensor Cycles Active', 0):.2f}" for r in rows]))
    print(" | ".join(["cycles per 128x128 area per SM (elapsed x 132 / areas)"] +
                     [f"{r['det']['Elapsed Cycles'] * 132 / (r['steps'] / 8):.0f}" for r in rows]))

    flash_cpa = {}
    for (fhdr, m), (sname, B, L) in zip(fl, SHAPES):
        g = re.search(r"\((\d+), (\d+), (\d+)\)x", fhdr)
        flash_cpa[sname] = m["Elapsed Cycles"] * 132 / (int(g.group(1)) * int(g.group(2)) * int(g.group(3)) * (L // 128))
    print(" | ".join(["kernel time in flash units (fu: flash bwd kernel cycles per 128x128 area, same shape)"] +
                     [f"{r['det']['Elapsed Cycles'] * 132 / (r['steps'] / 8) / flash_cpa[r['shape']]:.3f}" for r in rows]))
    print()
    print("# SDPA flash backward kernel (flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel), from details.txt")
    for (fhdr, m), (sname, B, L) in zip(fl, SHAPES):
        grid = re.search(r"\((\d+), (\d+), (\d+)\)x\((\d+), 1, 1\)", fhdr)
        gx, gy, gz, blk = (int(x) for x in grid.groups())
        tiles = gx * gy * gz * (L // 128)
        inst = m["Instructions Executed"]
        cyc = m["Elapsed Cycles"]
        hmma = tiles * 2560
        tens = hmma / (cyc * 132 * m["inst: Tensor (FP)"] / 100)
        print(f"{sname}: grid ({gx},{gy},{gz}) x {blk} threads, regs {m.get('Registers Per Thread', 0):.0f}, "
              f"dyn smem {m.get('Dynamic Shared Memory Per Block', 0):.2f} KB, blocks/SM "
              f"{m.get('Block Limit Shared Mem', 0):.0f}; (CTA, tile) steps {tiles}; "
              f"instructions {inst:.4g} = {inst / tiles:.0f} per step (128x128), {inst / hmma:.2f} per HMMA "
              f"(HMMA {hmma:.4g} = 2560/step; Tensor-pipe check: fitted rate {tens:.3f}/SM/cycle vs "
              f"{rate['Tensor (FP)']:.3f} on dattn); elapsed cycles {cyc:.0f}, issue busy "
              f"{m.get('Issue Slots Busy', 0):.2f}%, tensor active {m.get('SM: Pipe Tensor Cycles Active', 0):.2f}%, "
              f"cycles per 128x128 area per SM {cyc * 132 / tiles:.0f}")
        for pipe in ("LSU", "XU"):
            pct = m.get("inst: " + pipe, 0)
            est = pct / 100 * cyc * 132 * rate[pipe]
            print(f"   {pipe} pipe {pct:.2f}% -> ~{est / tiles:.0f} per step ({'+'.join(PIPE_OPS[pipe][:4])}...)")
        for key in ("Branch Instructions", "L1 Wavefronts Shared", "L2 Theoretical Sectors Global",
                    "Local Memory Spilling Requests"):
            if key in m:
                print(f"   {key}: {m[key]:.4g} = {m[key] / tiles:.1f} per step")
        print(f"   stall samples: " + ", ".join(
            f"{s} {m.get('stall_' + s, 0) / max(1, m.get('# Samples', 1)) * 100:.1f}%"
            for s in ("wait", "short_sb", "selected", "long_sb", "math", "mio", "not_selected", "barrier",
                      "dispatch")))
    print()
    print("# dattn kernels: same metrics")
    for r in rows:
        m = r["det"]
        print(f"{r['name'][-3:]} {r['var']} {r['shape']}: steps {r['steps']}; "
              + "; ".join(f"{key} {m[key] / (r['steps'] / 8):.1f} per 128x128 area" for key in
                          ("Branch Instructions", "L1 Wavefronts Shared", "L2 Theoretical Sectors Global") if key in m)
              + "; stall samples: " + ", ".join(
                  f"{s} {m.get('stall_' + s, 0) / max(1, m.get('# Samples', 1)) * 100:.1f}%"
                  for s in ("wait", "short_sb", "selected", "long_sb", "math", "mio", "not_selected", "barrier",
                            "dispatch")))

    print()
    print("# warp-stall samples by instruction category (share of the kernel's samples)")
    print(" | ".join(hdr))
    for cname, _ in CATS + [("other", None)]:
        vals = [100 * r["samp"][cname] / max(1, sum(r["samp"].values())) for r in rows]
        if max(vals) == 0:
            continue
        print(" | ".join([cname] + [f"{v:.1f}" for v in vals]))

    if not sass:
        return
    print()
    grp_fu = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    grp_ex = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    print("# regions of bwd_sm80_unit: samp% (share of the kernel's warp-stall samples), "
          "exec/step (executed warp instructions per (CTA, tile) step), HMMA/step")
    for r in rows:
        s = sass[r["name"]]
        err = ncu_lines.check_match(r["kern"], s)
        if err:
            sys.exit(f"{r['name']}: SASS mismatch: {err}")
        agg = collections.defaultdict(lambda: [0.0, 0.0, 0.0, collections.Counter(), collections.Counter()])
        for ins, (off, t, st) in zip(r["kern"]["ins"], s):
            reg = region_of(st)
            a = agg[reg]
            a[0] += ins.get("Warp Stall Sampling (All Samples)", 0)
            a[1] += ins.get("Instructions Executed", 0)
            a[4][ncu_lines.opcode(t).split(".")[0]] += ins.get("Instructions Executed", 0)
            if ncu_lines.opcode(t).split(".")[0] == "HMMA":
                a[2] += ins.get("Instructions Executed", 0)
            for stn in ("wait", "short_sb", "long_sb", "barrier", "mio", "math", "selected", "branch_resolving",
                        "not_selected", "dispatch"):
                a[3][stn] += ins.get("stall_" + stn, 0)
        ts = sum(a[0] for a in agg.values()) or 1
        for reg, a in agg.items():
            grp_fu[(r["var"], r["shape"])][group_of(reg)][r["name"][-3:]] += 0.0
            grp_fu[(r["var"], r["shape"])][group_of(reg)][r["name"][-3:]] += a[0] / ts * (
                r["det"]["Elapsed Cycles"] * 132 / (r["steps"] / 8) / flash_cpa[r["shape"]])
            grp_ex[(r["var"], r["shape"])][group_of(reg)][r["name"][-3:]] += a[1] / r["steps"]
        print(f"## {r['name']} {r['var']} {r['shape']} (export index {r['i']}; {r['steps']} steps)")
        fu = r["det"]["Elapsed Cycles"] * 132 / (r["steps"] / 8) / flash_cpa[r["shape"]]
        print(f"kernel = {fu:.3f} fu; region fu = samp share x {fu:.3f}")
        print("region | samp% | fu | exec/step | HMMA/step | top stalls | top opcodes per step")
        for reg, a in sorted(agg.items(), key=lambda kv: -kv[1][0])[:args.regions]:
            tot = sum(a[3].values()) or 1
            top = " ".join(f"{k}{100 * v / tot:.0f}" for k, v in a[3].most_common(3) if v)
            mix = " ".join(f"{k} {v / r['steps']:.0f}" for k, v in a[4].most_common(7) if v)
            print(f"{reg} | {100 * a[0] / ts:.1f} | {fu * a[0] / ts:.3f} | {a[1] / r['steps']:.1f} | {a[2] / r['steps']:.1f} | {top} | {mix}")
        print()

    # ---- group summary: fu (flash units) and ms (bwd_bench's backward time / kernel fu sum)
    import json
    bb = json.load(open(os.path.join(args.dir, "..", "bwd_bench.json")))
    real = {}
    for row in bb["rows"]:
        sh = f"{row['B']}x{row['L']}"
        real[("default", sh)] = row["dattn_bwd_ms"]
        real[("nopos", sh)] = row["dattn_nopos_bwd_ms"]
    print("# groups of regions: fu (kv0 + kv1) and ms = fu x (bwd_bench backward ms / (kv0 + kv1 fu)); "
          "exec = executed warp instructions per (CTA, tile) step, kv0 + kv1")
    keys = sorted(grp_fu, key=lambda k: (k[1], k[0]))
    print("group | " + " | ".join(f"{v} {sh}" for v, sh in keys))
    scale = {}
    for k in keys:
        tot = sum(sum(c.values()) for c in grp_fu[k].values())
        scale[k] = real.get(k, 0) / tot if tot else 0
    for g, _ in GROUPS:
        cells = []
        for k in keys:
            fu = sum(grp_fu[k][g].values())
            cells.append(f"{fu:.3f} fu {fu * scale[k]:.2f} ms (kv0 {grp_fu[k][g]['kv0']:.3f}, kv1 {grp_fu[k][g]['kv1']:.3f};"
                         f" exec {grp_ex[k][g]['kv0']:.0f}+{grp_ex[k][g]['kv1']:.0f})")
        print(g + " | " + " | ".join(cells))
    print("total | " + " | ".join(
        f"{sum(sum(c.values()) for c in grp_fu[k].values()):.3f} fu = {real.get(k, 0):.3f} ms "
        f"({scale[k]:.3f} ms/fu)" for k in keys))


if __name__ == "__main__":
    main()
