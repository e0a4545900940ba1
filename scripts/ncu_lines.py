#!/usr/bin/env python3
"""Map an ncu SourceCounters export (per-SASS-instruction stall samples and executed counts)
to CUDA source lines.

ncu's `--page source --csv --print-source sass` export (scripts/gpu_prof.sh writes it as
source.csv) lists, per kernel, every SASS instruction by absolute address with its warp-stall
samples and "Instructions Executed", but no source line. This script disassembles the same
kernel from a local build with line info (`nvdisasm -gi`, the library is compiled with
-lineinfo), checks that the instruction sequence is the profiled one (offset by offset, branch
targets resolved), and aggregates the counters per source line:

  inner   the innermost source line (e.g. a line of ptx.cuh or common.cuh);
  body    the frame inlined directly into the kernel's entry function (for the dattn kernels:
          the statement of fwd_sm80_body, or the call of the helper it inlines);
  body2   one frame further in (the backward: the lines of bwd_sm80_unit, which the kernel's
          bwd_sm80_body inlines); body3 two frames further (the tile lambda's lines);
  func    the source function of the innermost frame (found by scanning the source file for
          the enclosing definition; a heuristic, good enough for this code base).

  python3 scripts/ncu_lines.py --csv bench/results/gpu-2026-11-30-prof/source.csv.gz \
      --obj build/src/cuda/fwd_d64_sm90.o --kernel dattn_fwd_sm90_d64_f16_n64_w4o0 \
      [--index 0 2] [--top 40] [--by body inner func] [--unit N ...] [--rev 1fa2164]
      [--nvdisasm PATH] [--cuobjdump PATH] [--sass LISTING]

The object must be compiled by the same nvcc with the same flags (the Makefile's, which
include -lineinfo) from the profiled commit; a mismatch is reported (first differing offset)
and the run stops unless --force. nvdisasm / cuobjdump come from the CUDA toolkit or from
the pip wheels nvidia-cuda-nvdisasm / nvidia-cuda-cuobjdump (any version that knows the
architecture). --sass FILE reads an existing `nvdisasm -gi` listing instead.

Columns: samp% (share of all warp-stall samples of the kernel), ni% (not-issued samples),
exec% (share of executed warp instructions), exec/unit (executed warp instructions divided by
--unit, e.g. the number of (CTA, key tile) steps x warps to get instructions per warp per
tile), top stall reasons (share of the line's samples), opcode mix.
"""
import argparse
import collections
import csv
import gzip
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile

INT_OPS = ("IMAD", "IADD3", "LOP3", "VIADD", "VIADDMNMX", "ISETP", "SHF", "LEA", "IABS", "IMNMX",
           "VIMNMX", "SEL", "PRMT", "SGXT", "BMSK", "FLO", "POPC", "BREV", "IMUL", "ULEA", "UIMAD",
           "UIADD3", "ULOP3", "USHF", "UISETP", "USEL", "UMOV", "MOV", "S2R", "S2UR", "R2UR", "CS2R",
           "P2R", "R2P", "PLOP3", "ULDC", "LDC")


def opcode(text):
    t = text.strip()
    if t.startswith("@"):
        t = t.split(None, 1)[1] if " " in t else t
    return t.split()[0] if t else ""


def opclass(op):
    base = op.split(".")[0]
    if base in ("IMAD", "IADD3", "LOP3", "VIADD", "ISETP", "SHF", "LEA", "IABS", "IMNMX", "VIMNMX",
                "SEL", "PRMT", "SGXT", "BMSK", "FLO", "POPC", "BREV", "VIADDMNMX"):
        return "int"
    if base in ("HMMA", "HGMMA"):
        return base
    return base


def read_csv(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    kernels, hdr, cur = [], None, None
    for r in rows:
        if not r:
            continue
        if r[0] == "Kernel Name":
            cur = {"name": r[1], "rows": []}
            kernels.append(cur)
        elif r[0] == "Address":
            hdr = r
        elif cur is not None and r[0].startswith("0x"):
            cur["rows"].append(r)
    if hdr is None:
        sys.exit("no header row in " + path)
    col = {h: i for i, h in enumerate(hdr)}
    for k in kernels:
        base = int(k["rows"][0][0], 16)
        ins = []
        for r in k["rows"]:
            d = {"off": int(r[0], 16) - base, "text": r[1].strip()}
            for h, i in col.items():
                if 2 <= i < len(r):
                    try:
                        d[h] = float(r[i])
                    except ValueError:
                        pass
            ins.append(d)
        k["base"] = base
        k["ins"] = ins
    return kernels, hdr


def find_tool(name, given):
    if given:
        return given
    p = shutil.which(name)
    if p:
        return p
    for cand in ("/usr/local/cuda/bin/" + name,):
        if os.path.exists(cand):
            return cand
    sys.exit(f"{name} not found: pass --{name} PATH (pip download nvidia-cuda-{name}; unzip)")


def disassemble(args):
    if args.sass:
        return open(args.sass).read()
    nvdisasm = find_tool("nvdisasm", args.nvdisasm)
    cubin = args.cubin
    tmp = None
    if not cubin:
        cuobjdump = find_tool("cuobjdump", args.cuobjdump)
        tmp = tempfile.mkdtemp()
        obj = os.path.abspath(args.obj)
        subprocess.run([cuobjdump, "-xelf", "all", obj], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        cubins = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".cubin")]
        pick = [c for c in cubins if args.arch in c] or cubins
        if not pick:
            sys.exit("no cubin in " + args.obj)
        cubin = pick[0]
    out = subprocess.run([nvdisasm, "-gi", "-c", cubin], check=True, capture_output=True, text=True).stdout
    if tmp:
        shutil.rmtree(tmp)
    return out


LINE_RE = re.compile(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')
INS_RE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def parse_sass(text, kernel):
    """Instructions of one function: [(offset, text, stack)] with stack a list of (file, line)
    frames, innermost first (the '//## File' block above the instruction)."""
    lines = text.split("\n")
    start = None
    for i, l in enumerate(lines):
        if l.strip() == kernel + ":":
            start = i
            break
    if start is None:
        sys.exit(f"kernel {kernel} not in the disassembly")
    ins, labels, block, prev_stack = [], {kernel: 0}, [], []
    pending_labels = []
    for l in lines[start + 1:]:
        s = l.strip()
        if s.startswith("//----") and ins:
            break  # the next section (function)
        m = LINE_RE.search(s)
        if m:
            block.append((m.group(1), int(m.group(2)), m.group(3), int(m.group(4)) if m.group(4) else None))
            continue
        if re.match(r"^[^\s/.][^\s]*:$", s) or re.match(r"^\.L_x_\d+:", s):
            pending_labels.append(s[:-1])
            continue
        m = INS_RE.search(s)
        if m:
            off = int(m.group(1), 16)
            if block:
                # the block lists one line per frame chain: the first entry is the innermost
                # frame with its 'inlined at' parent; the rest repeat the chain outward
                stack = [(block[0][0], block[0][1])]
                for f in block:
                    if f[2] is not None:
                        stack.append((f[2], f[3]))
                # de-duplicate consecutive repeats
                st = []
                for fr in stack:
                    if not st or st[-1] != fr:
                        st.append(fr)
                prev_stack = st
                block = []
            for lb in pending_labels:
                labels[lb] = off
            pending_labels = []
            ins.append((off, m.group(2), prev_stack))
    # resolve `(.L_x_N) targets to offsets
    out = []
    for off, t, st in ins:
        t2 = re.sub(r"`\(([^)]+)\)", lambda mm: "0x%x" % labels.get(mm.group(1), -1), t)
        out.append((off, t2, st))
    return out


def norm(t, base=None):
    t = " ".join(t.replace(";", "").replace(".reuse", "").split())
    if base is not None:
        # branch targets are absolute in the profile: make those (and only those) offsets
        t = re.sub(r"0x([0-9a-f]{8,})",
                   lambda m: "0x%x" % (int(m.group(1), 16) - base)
                   if 0 <= int(m.group(1), 16) - base < (1 << 24) else m.group(0), t)
    return t


def check_match(kern, sass):
    k = kern["ins"]
    if len(k) != len(sass):
        return f"instruction count differs: profile {len(k)}, disassembly {len(sass)}"
    for a, b in zip(k, sass):
        if a["off"] != b[0]:
            return f"offset differs: profile 0x{a['off']:x}, disassembly 0x{b[0]:x}"
        ta, tb = norm(a["text"], kern["base"]), norm(b[1])
        if ta != tb and opnd_key(ta) != opnd_key(tb):
            return f"instruction differs at 0x{a['off']:x}: profile '{ta}', disassembly '{tb}'"
    return None


def opnd_key(t):
    """Opcode and the multiset of operands: ncu prints some operands in another order than
    nvdisasm (LDGSTS: source before destination)."""
    head, _, rest = t.partition(" ")
    if head.startswith("@"):
        p, _, rest = rest.partition(" ")
        head += " " + p
    return head, sorted(x for x in re.split(r"[,\s]+", rest) if x)


_func_cache = {}
SRC_REV = None  # --rev: read the source text of that git revision (the profiled commit)


def read_source(path):
    if SRC_REV:
        try:
            top = subprocess.run(["git", "-C", os.path.dirname(path) or ".", "rev-parse", "--show-toplevel"],
                                 capture_output=True, text=True, check=True).stdout.strip()
            rel = os.path.relpath(os.path.realpath(path), os.path.realpath(top))
            return subprocess.run(["git", "-C", top, "show", f"{SRC_REV}:{rel}"], capture_output=True,
                                  text=True, check=True).stdout
        except (subprocess.CalledProcessError, OSError, ValueError):
            pass
    try:
        return open(path).read()
    except OSError:
        return ""


def func_of(path, line):
    """The C/C++ function that encloses path:line (the last definition-looking line before
    it at column 0: 'name(' after a type, not a control statement)."""
    if path not in _func_cache:
        src = read_source(path).split("\n")
        defs = []
        for i, l in enumerate(src):
            m = re.match(r"^(?:template\s*<.*>\s*)?(?:[A-Za-z_][\w:<>,\s\*&]*\s+)?\**([A-Za-z_]\w*)\s*\(", l)
            if m and not l.startswith((" ", "\t", "#", "}", "/", "*")) and m.group(1) not in (
                    "if", "for", "while", "switch", "return", "sizeof", "static_assert"):
                defs.append((i + 1, m.group(1)))
            m = re.match(r"^#define\s+(\w+)\(", l)
            if m:
                defs.append((i + 1, m.group(1)))
        _func_cache[path] = (src, defs)
    src, defs = _func_cache[path]
    name = "?"
    for ln, nm in defs:
        if ln <= line:
            name = nm
        else:
            break
    return name


def src_text(path, line, width=70):
    if path not in _func_cache:
        func_of(path, line)
    src = _func_cache[path][0]
    if 1 <= line <= len(src):
        return " ".join(src[line - 1].split())[:width]
    return ""


STALLS = ["wait", "short_sb", "long_sb", "mio", "math", "barrier", "dispatch", "branch_resolving",
          "not_selected", "selected", "lg", "tex", "membar", "drain", "imc", "misc", "no_inst", "sleep"]


BODY_DEPTH = {"body": 2, "body2": 3, "body3": 4}


def aggregate(kern, sass, mode, root):
    agg = collections.OrderedDict()
    for d, (off, t, st) in zip(kern["ins"], sass):
        if not st:
            key = ("?", 0)
        elif mode == "inner":
            key = st[0]
        elif mode in BODY_DEPTH:
            # body: the frame just inside the entry function's own line (the outermost frame);
            # body2 / body3: one / two frames further in (the deepest there is, if fewer)
            key = st[-min(BODY_DEPTH[mode], len(st))]
        else:
            key = (os.path.basename(st[0][0]), func_of(st[0][0], st[0][1]))
        a = agg.setdefault(key, {"samp": 0.0, "ni": 0.0, "exec": 0.0, "n": 0,
                                 "st": collections.Counter(), "ops": collections.Counter()})
        a["samp"] += d.get("Warp Stall Sampling (All Samples)", 0)
        a["ni"] += d.get("Warp Stall Sampling (Not-issued Samples)", 0)
        ex = d.get("Instructions Executed", 0)
        a["exec"] += ex
        a["n"] += 1
        for s in STALLS:
            a["st"][s] += d.get("stall_" + s, 0)
        a["ops"][opclass(opcode(t))] += ex
    return agg


def table(kern, sass, mode, top, unit, root):
    agg = aggregate(kern, sass, mode, root)
    ts = sum(a["samp"] for a in agg.values()) or 1
    tn = sum(a["ni"] for a in agg.values()) or 1
    te = sum(a["exec"] for a in agg.values()) or 1
    rows = sorted(agg.items(), key=lambda kv: -kv[1]["samp"])[:top]
    out = []
    hdr = f"{'where':<34} {'samp%':>6} {'ni%':>5} {'exec%':>6} {'exec/u':>8} {'nSASS':>5}  {'stalls (share of line samples)':<34} {'exec mix':<32} source"
    out.append(hdr)
    for key, a in rows:
        if mode == "func":
            where, text = f"{key[0]}:{key[1]}", ""
        else:
            where = f"{os.path.basename(key[0])}:{key[1]}"
            text = src_text(key[0], key[1]) if key[0] != "?" else ""
            where += f" {func_of(key[0], key[1])}" if key[0] != "?" else ""
        tot = sum(a["st"].values()) or 1
        st = " ".join(f"{s}{100 * v / tot:.0f}" for s, v in a["st"].most_common(3) if v > 0)
        ex = a["exec"] or 1
        mix = " ".join(f"{o}{100 * v / ex:.0f}" for o, v in a["ops"].most_common(3) if v > 0)
        out.append(f"{where[:34]:<34} {100 * a['samp'] / ts:6.2f} {100 * a['ni'] / tn:5.1f} {100 * a['exec'] / te:6.2f} "
                   f"{a['exec'] / unit:8.1f} {a['n']:5d}  {st[:34]:<34} {mix[:32]:<32} {text}")
    return "\n".join(out)


def mix_summary(kern, sass, unit):
    c = collections.Counter()
    s = collections.Counter()
    for d, (off, t, st) in zip(kern["ins"], sass):
        op = opclass(opcode(t))
        c[op] += d.get("Instructions Executed", 0)
        s[op] += d.get("Warp Stall Sampling (All Samples)", 0)
    te, ts = sum(c.values()) or 1, sum(s.values()) or 1
    return ("executed (per unit) / share / share of samples: " +
            ", ".join(f"{o} {v / unit:.0f} {100 * v / te:.1f}%/{100 * s[o] / ts:.1f}%" for o, v in c.most_common(14)) +
            f"; total {te / unit:.0f} per unit")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", required=True, help="ncu source page export (.csv or .csv.gz)")
    ap.add_argument("--obj", help="object file holding the kernel (cuobjdump extracts the cubin)")
    ap.add_argument("--cubin")
    ap.add_argument("--sass", help="an existing nvdisasm -gi listing")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--index", type=int, nargs="*", help="which kernels of the CSV (default: all)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--by", nargs="*", default=["body", "inner"], choices=["body", "body2", "body3", "inner", "func"])
    ap.add_argument("--unit", type=float, nargs="*",
                    help="divisor of the executed counts per kernel index (e.g. warp-tiles)")
    ap.add_argument("--nvdisasm")
    ap.add_argument("--cuobjdump")
    ap.add_argument("--force", action="store_true", help="aggregate even if the SASS differs")
    ap.add_argument("--rev", help="git revision whose source text the tables quote (default: the files "
                                  "on disk, which must be those the object was built from)")
    args = ap.parse_args()
    global SRC_REV
    SRC_REV = args.rev
    if not (args.obj or args.cubin or args.sass):
        ap.error("one of --obj, --cubin, --sass")
    kernels, _ = read_csv(args.csv)
    sass = parse_sass(disassemble(args), args.kernel)
    idx = args.index if args.index is not None else list(range(len(kernels)))
    for n, i in enumerate(idx):
        k = kernels[i]
        if k["name"] != args.kernel:
            print(f"[{i}] is {k['name']}, skipped")
            continue
        err = check_match(k, sass)
        print(f"=== kernel [{i}] {k['name']}: {len(k['ins'])} SASS instructions; "
              f"{'SASS MISMATCH: ' + err if err else 'disassembly matches the profile (every offset and instruction)'}")
        if err and not args.force:
            sys.exit(1)
        unit = args.unit[n] if args.unit and n < len(args.unit) else 1.0
        print(mix_summary(k, sass, unit))
        for mode in args.by:
            print(f"--- by {mode} (top {args.top} by warp-stall samples; exec/u = executed warp instructions / {unit:g})")
            print(table(k, sass, mode, args.top, unit, None))
        print()


if __name__ == "__main__":
    main()
