#!/usr/bin/env python3
"""Split a profiled dattn_fwd_ws_* kernel's warp-stall samples and executed warp instructions
into the categories of this folder's README, by each SASS instruction's full inline stack
(scripts/ncu_lines.py's parser and match check; same arguments as it, one --index).

  (a) gather_add   a frame at fwd_ws_d64_sm90.cu 186 / 200 (ws_gather_g2 / ws_gather_h) or 194 / 202 (ws_add_d)
  (b) wgmma_wait   innermost function wgmma_wait (any caller, fws_softmax's line 108 included)
  (c) softmax      a frame at 523 / 537 (the fws_softmax calls), its wgmma_wait apart
  (d) full_wait    the mbarrier waits on a full-stage barrier (the consumers' waits at 513 / 526)
  (e) named_bar    innermost function bar_sync_named (any caller)
  (f) rest         everything else
An mbar_wait is a try_wait (SYNCS.PHASECHK.TRANS64.TRYWAIT), a branch on its predicate and, out of
line at the function's end, a retry loop (TRYWAIT, @!P BRA to itself, BRA back). nvdisasm's line
table gives every retry loop to one caller (line 484, the Q wait, here) and may give an in-line
try_wait to a neighbouring wait's line (pos0: full stage 0's try_wait at 484); so the waits are
told apart by the barrier the TRYWAIT reads, [R + offset] with offset - FWS_BAR (the smallest
offset): 0 the Q barrier, 8 .. 8 FWS_NST the full stages, above those the empty stages (and
qempty); each group (in-line TRYWAIT, the branch entering its retry loop, the loop) counts as
one wait. Lines checked against src/cuda/fwd_ws_d64_sm90.cu at the profiled commit 168d916.
"""
import argparse, collections, os, re, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../scripts"))
import ncu_lines as N

ap = argparse.ArgumentParser()
for o in ("--csv", "--obj", "--kernel", "--nvdisasm", "--cuobjdump"):
    ap.add_argument(o)
ap.add_argument("--index", type=int, required=True)
a = ap.parse_args()
a.sass, a.cubin, a.arch = None, None, "sm_90a"
kernels, _ = N.read_csv(a.csv)
sass = N.parse_sass(N.disassemble(a), a.kernel)
k = kernels[a.index]
if k["name"] != a.kernel:
    sys.exit(f"[{a.index}] is {k['name']}")
err = N.check_match(k, sass)
print(f"=== kernel [{a.index}] {k['name']}: {'SASS MISMATCH ' + err if err else 'disassembly matches the profile'}")
if err:
    sys.exit(1)
F = "fwd_ws_d64_sm90.cu"
GATH, SOFT = {186, 194, 200, 202}, {523, 537}

# mbar_wait groups: retry loop at o (TRYWAIT, '@!Px BRA o', 'BRA back'), the branch entering it,
# the in-line TRYWAIT before that branch that sets its predicate on the same barrier operand
NST = 4
entry = collections.defaultdict(list)
for i, (off, t, st) in enumerate(sass):
    m = re.search(r"BRA (0x[0-9a-f]+)$", t)
    if m:
        entry[int(m.group(1), 16)].append(i)
TW = re.compile(r"TRYWAIT (P\d), (\[[^\]]*\+(0x[0-9a-f]+)\])")
tws = [(i, TW.search(t)) for i, (off, t, st) in enumerate(sass) if "TRYWAIT" in t]
qoff = min(int(m.group(3), 16) for _, m in tws)
role, groups = {}, []
for i, m in tws:
    off = sass[i][0]
    if not (i + 1 < len(sass) and re.search(r"@!P\d BRA 0x%x$" % off, sass[i + 1][1])):
        continue
    rel = int(m.group(3), 16) - qoff
    r = "Q" if rel == 0 else "full" if rel <= 8 * NST else "empty"
    members = [i, i + 1, i + 2]
    for src in [j for j in entry[off] if j != i + 1]:
        members.append(src)
        p = re.match(r"@!(P\d) BRA", sass[src][1]).group(1)
        for j in range(src - 1, -1, -1):
            mm = TW.search(sass[j][1])
            if mm and mm.group(1) == p and mm.group(2) == m.group(2):
                members.append(j)
                break
    for j in members:
        role[j] = r
    groups.append((r, m.group(2), ",".join("0x%x" % sass[j][0] for j in sorted(members))))
def fl(st):
    return [l for f, l in st if os.path.basename(f) == F]
def cls(i, st):
    fn = N.func_of(st[0][0], st[0][1]) if st else "?"
    ls = fl(st)
    if i in role:
        return "d full_wait" if role[i] == "full" else "f rest"
    if fn == "wgmma_wait":
        return "b wgmma_wait"
    if fn == "bar_sync_named":
        return "e named_bar"
    if any(l in GATH for l in ls):
        return "a gather_add"
    if any(l in SOFT for l in ls):
        return "c softmax"
    return "f rest"
S, E, n = collections.Counter(), collections.Counter(), collections.Counter()
RS, RE = collections.Counter(), collections.Counter()
extra = collections.Counter(), collections.Counter()
for i, (d, (_, _, st)) in enumerate(zip(k["ins"], sass)):
    c = cls(i, st)
    s, e = d.get("Warp Stall Sampling (All Samples)", 0), d.get("Instructions Executed", 0)
    S[c] += s; E[c] += e; n[c] += 1
    ls = fl(st)
    if c == "b wgmma_wait" and any(l in SOFT for l in ls):
        extra[0]["  (b) of it: fws_softmax's wait (108)"] += s; extra[1]["  (b) of it: fws_softmax's wait (108)"] += e
    if c == "f rest":
        body = ls[-2] if len(ls) >= 2 else (ls[-1] if ls else 0)
        key = f"  (f) of it: mbar_wait, {role[i]} barrier" if i in role else f"  (f) of it: body line {body}"
        RS[key] += s; RE[key] += e
ts, te = sum(S.values()), sum(E.values())
for g in groups:
    print("mbar_wait group: %s barrier %s: SASS %s" % g)
print(f"total: warp-stall samples {ts:.0f}, executed warp instructions {te:.0f}")
print(f"{'category':<40} {'samp%':>7} {'exec%':>7} {'nSASS':>6}")
for c in sorted(S):
    print(f"{c:<40} {100 * S[c] / ts:7.2f} {100 * E[c] / te:7.2f} {n[c]:6d}")
for c in sorted(extra[0]):
    print(f"{c:<40} {100 * extra[0][c] / ts:7.2f} {100 * extra[1][c] / te:7.2f}")
for c, v in RS.most_common(8):
    print(f"{c:<40} {100 * v / ts:7.2f} {100 * RE[c] / te:7.2f}")
