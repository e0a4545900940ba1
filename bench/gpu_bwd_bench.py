#!/usr/bin/env python3
"""Forward+backward timing of the dattn CUDA kernels (issue 5's op-level shapes) against
torch SDPA's flash backend fwd+bwd on the same Q/K/V shapes, through the Python layer
(dattn.ops.attention, autograd). fp16, H=12, D=64, S=256, v3 log buckets, c2p|p2c, no
mask. Medians of CUDA-event timings after a warm-up, random data. The first CUDA backward
(bwd_simple.cu) is a correctness-first version; these numbers record where it starts.
Since 2026-12-01 (gpu-2026-12-01-wslib) the default backward on an H200 for these calls (padded,
no dropout, fp16, D 64) is the warp-specialized wgmma kernel pair (bwd_ws_d64_sm90.cu, "ws"):
the dattn_* keys are ws, and the *_tc3g keys the previous default pinned (tc3g_bitwise is then
False: a different kernel; both are checked against float64 by test_cuda_bwd). Before that:
Each shape is timed several times in one run: the default backward (at D = 64 tc3g = tc3f
with D_i computed in the dq kernel; tc3f: the
round-3 tensor-core kernels with the lean tile loop, the run-sum scatter, the four-warp
saturated constants, the lean P / dS loop and both kernels' tile body per tile class;
sliding C window, two CTAs per SM; dattn_* keys; until gpu-2026-11-30-bwdvar the default was
tc3b, until gpu-2026-11-30-tc3d tc3c, until gpu-2026-11-30-tc3e tc3d, until
gpu-2026-11-30-tc3f tc3e) and the round-2 kernels
pinned (DATTN_CUDA_BWD=tc2; *_tc2 keys), and their gradients are compared (tc2_max_rel:
max |g_tc2 - g_default| / max |g_default| over the five gradients; both paths are checked
against float64 by test_cuda_bwd). Results before 2026-11-30 (gpu-2026-11-30-tc3 and older)
had the round-2 kernels as the default and *_tc3 keys for the round-3 ones.
Since tc3c is the default (after gpu-2026-11-30-bwdvar): tc3b is timed first (*_tc3b keys,
default_speedup_over_tc3b = tc3b bwd / default bwd, default_max_rel_vs_tc3b per gradient),
and every variant below is compared with tc3b, the kernel it modifies: *_speedup = tc3b bwd /
variant bwd, *_max_rel / *_bitwise / tc3p_* against tc3b's gradients (in results up to
gpu-2026-11-30-bwdvar tc3b was the default, so the keys mean the same there).
Also timed: the round-3 kernels with their first tile loop pinned (DATTN_CUDA_BWD=tc3, the
default before 2026-11-30's gpu-2026-11-30-next run; *_tc3 keys), right after the default;
tc3_bitwise: its five gradients equal the default's bit for bit (they must: same
arithmetic), tc3_speedup = tc3 bwd / default bwd. (Results up to gpu-2026-11-30-next had tc3
as the default and *_tc3b keys for the lean loop, tc3b_speedup = default / tc3b.)
And the opt-in tc3p (DATTN_CUDA_BWD=tc3p, timed after tc3: tc3b with P rounded once to fp16 for dV, one MMA per
fragment instead of the hi + lo pair; *_tc3p keys): tc3p_speedup = default bwd / tc3p bwd (> 1:
tc3p faster), tc3p_dv_max_rel = max |dv_tc3p - dv_default| / max |dv_default| (the P rounding:
~1e-4 expected in fp16), tc3p_rest_bitwise: dq, dk, dpk, dpq equal the default's bit for bit
(they must: only dV changes).
Also timed: tc3b with the run-sum scatter of log-zone band tiles (DATTN_CUDA_BWD=tc3s, opt-in;
*_tc3s keys): tc3s_speedup = default bwd / tc3s bwd, tc3s_max_rel = per gradient (dq, dk, dv,
dpk, dpq) max |g_tc3s - g_default| / max |g_default| (not bitwise: tc3s rounds the slot sums
C less often), and the band256 diagnostic again on tc3s (dattn_band256_tc3s_{fwdbwd,bwd}_ms):
'default - band256' of each path is the cost of the log buckets' collisions (the serial
scatter passes on tc3b).
Diagnostics (default kernels, same shapes, keys dattn_<diag>_{fwd,fwdbwd,bwd}_ms): nopos
(no position terms: the backward's attention core alone, comparable with flash), satmost
(position_buckets 8, max_relative_positions 16, S = 8: almost every tile saturated) and
band256 (no buckets, max_relative_positions 256, S = 256: band tiles for |i - j| < 256,
with 128 x 128 tiles ~88% of them at L512, ~29% at L2048, ~8% at L8192). All three run on the tensor-core
backward (S <= 256, S % 8 == 0). They split the backward's time into its core, the
saturated-tile and the band-tile work, as gpu_bench.py does for the forward.
tc3k (DATTN_CUDA_BWD=tc3k, opt-in): tc3b with the saturated column constants summed by all
four warps; *_tc3k keys, tc3k_speedup = default bwd / tc3k bwd, tc3k_max_rel = per gradient
(dq, dk, dv, dpk, dpq) max |g_tc3k - g_default| / max |g_default| (not bitwise: the constants'
summation order differs), and the nopos / satmost diagnostics again on tc3k
(dattn_<diag>_tc3k_{fwdbwd,bwd}_ms, bwd = fwdbwd - the default's diagnostic fwd), so that
satmost - nopos can be compared for both paths. (The first
version of these diagnostics, in gpu-2026-11-30-next, used S = 4 and S = L: both outside the
tensor-core routing, so they timed the simple backward: 60-3000 ms; not comparable.)
Dropout (attention dropout 0.1, the fine-tuning setting; Philox keep bits regenerated in the
forward and in both backward kernels): dattn_drop_{fwd,fwdbwd,bwd}_ms on the default kernels,
flash_drop_fwdbwd_ms = SDPA flash with dropout_p 0.1, ratio_drop (keys since 2026-11-30's
Philox rework: one call per four keys in the forward, the rounds unrolled; since branch
drop16 one call per eight keys, 16-bit uniforms, in every kernel).
tc3c (DATTN_CUDA_BWD=tc3c, the default before tc3d): tc3s + tc3k, i.e. tc3d without the lean
P / dS loop; *_tc3c keys, tc3c_speedup = tc3b bwd / tc3c bwd (like every variant),
default_speedup_over_tc3c = tc3c bwd / default bwd, tc3c_bitwise: its five gradients equal the
default's bit for bit (they must), and the nopos diagnostic again on tc3c
(dattn_nopos_tc3c_{fwdbwd,bwd}_ms). (In gpu-2026-11-30-tc3d, where tc3c was the default, the
same block timed tc3d with *_tc3d keys and tc3d_speedup_over_default = tc3c / tc3d.)
tc3d (DATTN_CUDA_BWD=tc3d, the default before tc3e): tc3e without the per-class tile
bodies of the dq kernel (tc3e = tc3d whose dq kernel compiles the tile body once for band tiles
and once for the others); *_tc3d keys, default_speedup_over_tc3d = tc3d bwd / default bwd,
tc3d_bitwise: its five gradients equal the default's bit for bit (they must), and the nopos /
satmost diagnostics again on tc3d (dattn_{nopos,satmost}_tc3d_{fwdbwd,bwd}_ms). (In
gpu-2026-11-30-tc3e, where tc3d was the default, the same block timed the opt-in tc3e with
*_tc3e keys, tc3e_speedup_over_default = tc3d / tc3e.)
tc3e (DATTN_CUDA_BWD=tc3e, the previous default): the default tc3f without the per-class tile
bodies of the dkdv kernel; *_tc3e keys, default_speedup_over_tc3e = tc3e bwd / default bwd,
tc3e_bitwise: its five gradients equal the default's bit for bit (they must), and the nopos /
satmost diagnostics again on tc3e (dattn_{nopos,satmost}_tc3e_{fwdbwd,bwd}_ms). (In
gpu-2026-11-30-tc3f, where tc3e was the default, the same block timed the opt-in tc3f with
*_tc3f keys, tc3f_speedup_over_default = tc3e / tc3f.)
tc3g (DATTN_CUDA_BWD=tc3g, the default since gpu-2026-11-30-tc3g; run this bench with
DATTN_CUDA_BWD=tc3f in the environment for the A/B: its "default" is then tc3f): tc3f whose dq kernel computes D_i of its rows
in its prologue (no separate D_i launch: one launch fewer per call); *_tc3g keys,
tc3g_speedup_over_default = default bwd / tc3g bwd (> 1: tc3g faster), tc3g_bitwise: its five
gradients equal the default's bit for bit (they must), and the nopos diagnostic again on tc3g
(dattn_nopos_tc3g_{fwdbwd,bwd}_ms). These op-level shapes are device-bound: what they show is
the device time of the fold (D_i pass gone, dq prologue longer); the host time of the saved
launch shows in the launch-bound training step (gpu_train_bench.py with DATTN_CUDA_BWD=tc3g).

Back to back (since 2026-12-06): dattn_fwdbwd_tp_ms / flash_fwdbwd_tp_ms / ratio_tp time the
target cells with triton.testing.do_bench, the forward bench's method (calls issued without a
sync between them, L2 flushed before each): the device time per call when the host keeps
ahead, as in a training loop. dattn_fwdbwd_ms / flash_fwdbwd_ms / ratio are one call between two
events after a sync (latency: the host time before the first launch included).

usage: DATTN_LIBRARY=build/libdattn.so PYTHONPATH=python python3 bench/gpu_bwd_bench.py
       [--json out.json] [--quick]
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

try:
    from dattn import ops
except ImportError:  # run from a checkout without PYTHONPATH (gpu_op_trace.py imports this file too)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
    from dattn import ops
from gpu_bench import bench  # triton do_bench, the forward bench's timing (back to back)


def timed(fn, reps, budget_s):
    fn()
    torch.cuda.synchronize()
    ts = []
    t_end = time.time() + budget_s
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
        if time.time() > t_end:
            break
    ts.sort()
    return ts[len(ts) // 2]


def rel_max(g, ref):
    """Per gradient pair: max |g - ref| / max |ref|."""
    return [float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30))
            for a, b in zip(g, ref)]


def pinned(path, fn):
    """fn() with DATTN_CUDA_BWD=path (the library reads it at every call); unset afterwards
    (main() removes any outside value first: unset = the default backward)."""
    os.environ["DATTN_CUDA_BWD"] = path
    try:
        return fn()
    finally:
        os.environ.pop("DATTN_CUDA_BWD", None)


def op_cell(B, L, H, D, S, device="cuda"):
    """The target cell's inputs and calls (also bench/gpu_op_trace.py's): fp16 q, k, v [B, L, H,
    D], tables pk, pq [H, 2 S, D] (all requiring grad), dout, from a generator seeded B * L; fwd
    (dattn, no grad), fwdbwd (dattn through autograd), and flash (SDPA's flash backend fwd+bwd on
    the same q, k, v, dout in [B, H, L, D]: qt, kt, vt, dt)."""
    import types
    g = torch.Generator(device=device).manual_seed(B * L)
    q, k, v = (torch.randn(B, L, H, D, device=device, dtype=torch.float16, generator=g)
               .requires_grad_() for _ in range(3))
    pk, pq = (torch.randn(H, 2 * S, D, device=device, dtype=torch.float16, generator=g)
              .requires_grad_() for _ in range(2))
    dout = torch.randn(B, L, H, D, device=device, dtype=torch.float16, generator=g)

    def fwd():
        with torch.no_grad():
            ops.attention(q, k, v, pk, pq)

    def fwdbwd():
        out = ops.attention(q, k, v, pk, pq)
        torch.autograd.grad(out, (q, k, v, pk, pq), dout)

    qt, kt, vt = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
    dt = dout.transpose(1, 2).contiguous()

    def flash():
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            o = F.scaled_dot_product_attention(qt, kt, vt)
        torch.autograd.grad(o, (qt, kt, vt), dt)

    return types.SimpleNamespace(q=q, k=k, v=v, pk=pk, pq=pq, dout=dout, qt=qt, kt=kt, vt=vt, dt=dt,
                                 fwd=fwd, fwdbwd=fwdbwd, flash=flash)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    H, D, S = 12, 64, 256
    shapes = [(32, 512), (8, 2048)] + ([] if args.quick else [(2, 8192)])
    rows = []
    old = os.environ.pop("DATTN_CUDA_BWD", None)  # restored at the end
    for B, L in shapes:
        c = op_cell(B, L, H, D, S)
        q, k, v, pk, pq, dout, qt, kt, vt, dt = c.q, c.k, c.v, c.pk, c.pq, c.dout, c.qt, c.kt, c.vt, c.dt
        fwd, fwdbwd, flash = c.fwd, c.fwdbwd, c.flash

        def grads():
            out = ops.attention(q, k, v, pk, pq)
            return torch.autograd.grad(out, (q, k, v, pk, pq), dout)

        def timed_grads():
            return timed(fwdbwd, 5, 15.0), grads()

        # the target cells (the default's fwd+bwd against flash's): 30 reps each, one after the
        # other (5-rep medians of the L512 cell spread +-4 % between runs: NOTES, 2026-12-03)
        t_f = timed(fwd, 30, 5.0)
        t_fb, g0 = timed(fwdbwd, 30, 15.0), grads()
        t_fl = timed(flash, 30, 5.0)
        # the same two cells timed back to back (triton's do_bench, as gpu_bench.py times the
        # forward target: L2 flushed between calls, no sync between them, so each side's host
        # time overlaps its device work as in a training loop); the cells above are one call
        # each between two events after a sync, so they include the host time before the
        # first launch (dattn's ~0.1 ms at L512, NOTES: host time per call)
        t_fb_tp, t_fl_tp = bench(fwdbwd, rep=300), bench(flash, rep=300)
        t_fbb, gb = pinned("tc3b", timed_grads)
        t_fb3, g3 = pinned("tc3", timed_grads)
        t_fbp, gp = pinned("tc3p", timed_grads)
        t_fb2, g2 = pinned("tc2", timed_grads)
        t_fbk, gk = pinned("tc3k", timed_grads)
        t_fb3s, g3s = pinned("tc3s", timed_grads)
        t_fbc, gc = pinned("tc3c", timed_grads)
        c_bitwise = all(torch.equal(a, b) for a, b in zip(gc, g0))
        t_fbd, gd = pinned("tc3d", timed_grads)
        d_bitwise = all(torch.equal(a, b) for a, b in zip(gd, g0))
        t_fbe, ge = pinned("tc3e", timed_grads)
        e_bitwise = all(torch.equal(a, b) for a, b in zip(ge, g0))
        t_fbg, gg = pinned("tc3g", timed_grads)
        g_bitwise = all(torch.equal(a, b) for a, b in zip(gg, g0))
        rel = max(rel_max(g2, g0))
        # the variants are tc3b plus one change each: compared with tc3b's gradients
        bitwise = all(torch.equal(a, b) for a, b in zip(g3, gb))
        # grads() order: q, k, v, pk, pq -> dq, dk, dv, dpk, dpq
        dv_rel = rel_max(gp[2:3], gb[2:3])[0]
        rest_bitwise = all(torch.equal(gp[i], gb[i]) for i in (0, 1, 3, 4))
        relk, rel3s, relc = rel_max(gk, gb), rel_max(g3s, gb), rel_max(g0, gb)
        tb = t_fbb - t_f  # tc3b's backward: the base of every variant's speedup
        diag = {}
        for name, tabs, pb, M in (("nopos", (None, None), 256, 512),
                                  ("satmost", (pk[:, :16].detach().contiguous().requires_grad_(),
                                               pq[:, :16].detach().contiguous().requires_grad_()), 8, 16),
                                  ("band256", (pk, pq), -1, 256)):
            leaves = [t for t in (q, k, v) + tabs if t is not None]

            def dfwd(tabs=tabs, pb=pb, M=M):
                with torch.no_grad():
                    ops.attention(q, k, v, *tabs, position_buckets=pb, max_relative_positions=M)

            def dfwdbwd(tabs=tabs, pb=pb, M=M, leaves=leaves):
                out = ops.attention(q, k, v, *tabs, position_buckets=pb, max_relative_positions=M)
                torch.autograd.grad(out, leaves, dout)

            df, dfb = timed(dfwd, 10, 3.0), timed(dfwdbwd, 5, 10.0)
            diag.update({f"dattn_{name}_fwd_ms": df, f"dattn_{name}_fwdbwd_ms": dfb,
                         f"dattn_{name}_bwd_ms": dfb - df})
            if name in ("nopos", "satmost"):
                dfbk = pinned("tc3k", lambda f=dfwdbwd: timed(f, 5, 10.0))
                diag.update({f"dattn_{name}_tc3k_fwdbwd_ms": dfbk, f"dattn_{name}_tc3k_bwd_ms": dfbk - df})
                dfbd = pinned("tc3d", lambda f=dfwdbwd: timed(f, 5, 10.0))
                diag.update({f"dattn_{name}_tc3d_fwdbwd_ms": dfbd, f"dattn_{name}_tc3d_bwd_ms": dfbd - df})
                dfbe = pinned("tc3e", lambda f=dfwdbwd: timed(f, 5, 10.0))
                diag.update({f"dattn_{name}_tc3e_fwdbwd_ms": dfbe, f"dattn_{name}_tc3e_bwd_ms": dfbe - df})
            if name == "nopos":
                dfbg = pinned("tc3g", lambda f=dfwdbwd: timed(f, 5, 10.0))
                diag.update({"dattn_nopos_tc3g_fwdbwd_ms": dfbg, "dattn_nopos_tc3g_bwd_ms": dfbg - df})
                dfbc = pinned("tc3c", lambda f=dfwdbwd: timed(f, 5, 10.0))
                diag.update({"dattn_nopos_tc3c_fwdbwd_ms": dfbc, "dattn_nopos_tc3c_bwd_ms": dfbc - df})
            if name == "band256":
                dfb3s = pinned("tc3s", lambda f=dfwdbwd: timed(f, 5, 10.0))
                diag.update({"dattn_band256_tc3s_fwdbwd_ms": dfb3s, "dattn_band256_tc3s_bwd_ms": dfb3s - df})
        # attention dropout 0.1 (training's setting): the same call with Philox keep bits in
        # the forward and both backward kernels, and SDPA flash with the same dropout
        def dropfwd():
            with torch.no_grad():
                ops.attention(q, k, v, pk, pq, dropout_p=0.1)

        def dropfwdbwd():
            out = ops.attention(q, k, v, pk, pq, dropout_p=0.1)
            torch.autograd.grad(out, (q, k, v, pk, pq), dout)

        def flashdrop():
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                o = F.scaled_dot_product_attention(qt, kt, vt, dropout_p=0.1)
            torch.autograd.grad(o, (qt, kt, vt), dt)

        t_df, t_dfb, t_fld = timed(dropfwd, 10, 3.0), timed(dropfwdbwd, 5, 10.0), timed(flashdrop, 10, 5.0)
        diag.update(dattn_drop_fwd_ms=t_df, dattn_drop_fwdbwd_ms=t_dfb, dattn_drop_bwd_ms=t_dfb - t_df,
                    flash_drop_fwdbwd_ms=t_fld, ratio_drop=t_dfb / t_fld)
        r = dict(B=B, L=L, H=H, D=D, dattn_fwd_ms=t_f, dattn_fwdbwd_ms=t_fb,
                 dattn_bwd_ms=t_fb - t_f, flash_fwdbwd_ms=t_fl, ratio=t_fb / t_fl,
                 dattn_fwdbwd_tp_ms=t_fb_tp, flash_fwdbwd_tp_ms=t_fl_tp, ratio_tp=t_fb_tp / t_fl_tp,
                 dattn_fwdbwd_tc2_ms=t_fb2, dattn_bwd_tc2_ms=t_fb2 - t_f, ratio_tc2=t_fb2 / t_fl,
                 tc2_max_rel=rel, dattn_fwdbwd_tc3_ms=t_fb3, dattn_bwd_tc3_ms=t_fb3 - t_f,
                 ratio_tc3=t_fb3 / t_fl, tc3_speedup=(t_fb3 - t_f) / tb, tc3_bitwise=bitwise,
                 dattn_fwdbwd_tc3b_ms=t_fbb, dattn_bwd_tc3b_ms=tb, ratio_tc3b=t_fbb / t_fl,
                 default_speedup_over_tc3b=tb / (t_fb - t_f),
                 default_max_rel_vs_tc3b=dict(zip(("dq", "dk", "dv", "dpk", "dpq"), relc)),
                 dattn_fwdbwd_tc3p_ms=t_fbp, dattn_bwd_tc3p_ms=t_fbp - t_f, ratio_tc3p=t_fbp / t_fl,
                 tc3p_speedup=tb / (t_fbp - t_f), tc3p_dv_max_rel=dv_rel,
                 tc3p_rest_bitwise=rest_bitwise,
                 dattn_fwdbwd_tc3k_ms=t_fbk, dattn_bwd_tc3k_ms=t_fbk - t_f, ratio_tc3k=t_fbk / t_fl,
                 tc3k_speedup=tb / (t_fbk - t_f),
                 tc3k_max_rel=dict(zip(("dq", "dk", "dv", "dpk", "dpq"), relk)),
                 dattn_fwdbwd_tc3s_ms=t_fb3s, dattn_bwd_tc3s_ms=t_fb3s - t_f, ratio_tc3s=t_fb3s / t_fl,
                 tc3s_speedup=tb / (t_fb3s - t_f), tc3s_max_rel=rel3s,
                 dattn_fwdbwd_tc3c_ms=t_fbc, dattn_bwd_tc3c_ms=t_fbc - t_f, ratio_tc3c=t_fbc / t_fl,
                 tc3c_speedup=tb / (t_fbc - t_f), default_speedup_over_tc3c=(t_fbc - t_f) / (t_fb - t_f),
                 tc3c_bitwise=c_bitwise,
                 dattn_fwdbwd_tc3d_ms=t_fbd, dattn_bwd_tc3d_ms=t_fbd - t_f, ratio_tc3d=t_fbd / t_fl,
                 tc3d_speedup=tb / (t_fbd - t_f), default_speedup_over_tc3d=(t_fbd - t_f) / (t_fb - t_f),
                 tc3d_bitwise=d_bitwise,
                 dattn_fwdbwd_tc3e_ms=t_fbe, dattn_bwd_tc3e_ms=t_fbe - t_f, ratio_tc3e=t_fbe / t_fl,
                 tc3e_speedup=tb / (t_fbe - t_f), default_speedup_over_tc3e=(t_fbe - t_f) / (t_fb - t_f),
                 tc3e_bitwise=e_bitwise,
                 dattn_fwdbwd_tc3g_ms=t_fbg, dattn_bwd_tc3g_ms=t_fbg - t_f, ratio_tc3g=t_fbg / t_fl,
                 tc3g_speedup_over_default=(t_fb - t_f) / (t_fbg - t_f), tc3g_bitwise=g_bitwise,
                 **diag)
        rows.append(r)
        print(f"B={B:3d} L={L:5d}: dattn fwd {t_f:8.3f} ms, fwd+bwd {t_fb:9.3f} ms "
              f"(bwd ~{t_fb - t_f:8.3f}); flash fwd+bwd {t_fl:7.3f} ms; ratio {t_fb / t_fl:6.3f}x",
              flush=True)
        print(f"     back to back (do_bench): dattn fwd+bwd {t_fb_tp:9.3f} ms, flash {t_fl_tp:7.3f} ms; "
              f"ratio {t_fb_tp / t_fl_tp:6.3f}x", flush=True)
        print(f"     tc2 (round 2): fwd+bwd {t_fb2:9.3f} ms (bwd ~{t_fb2 - t_f:8.3f}); ratio "
              f"{t_fb2 / t_fl:6.1f}x; tc2 vs default max rel diff {rel:.2e}", flush=True)
        print(f"     tc3b (previous default): fwd+bwd {t_fbb:9.3f} ms (bwd ~{tb:8.3f}); default speedup "
              f"over it {tb / (t_fb - t_f):5.3f}x; default vs tc3b max rel dq/dk/dv/dpk/dpq "
              + " ".join(f"{x:.2e}" for x in relc), flush=True)
        print(f"     tc3 (first loop): fwd+bwd {t_fb3:9.3f} ms (bwd ~{t_fb3 - t_f:8.3f}, "
              f"{(t_fb3 - t_f) / tb:5.3f}x tc3b's); ratio {t_fb3 / t_fl:6.1f}x; "
              f"bitwise equal to tc3b: {bitwise}", flush=True)
        print(f"     tc3p (P rounded once for dV): fwd+bwd {t_fbp:9.3f} ms (bwd ~{t_fbp - t_f:8.3f}, "
              f"speedup {tb / (t_fbp - t_f):5.3f}x over tc3b); dv max rel diff vs tc3b "
              f"{dv_rel:.2e}; dq, dk, dpk, dpq bitwise equal: {rest_bitwise}", flush=True)
        print(f"     tc3k (4-warp sat consts): fwd+bwd {t_fbk:9.3f} ms (bwd ~{t_fbk - t_f:8.3f}, "
              f"speedup {tb / (t_fbk - t_f):5.3f}x over tc3b); ratio {t_fbk / t_fl:6.1f}x; "
              "max rel diff vs tc3b " + " ".join(f"{n} {x:.1e}" for n, x in
                                                     zip(("dq", "dk", "dv", "dpk", "dpq"), relk)), flush=True)
        print("     bwd by tile kind (ms): " + ", ".join(
            f"{n} {diag[f'dattn_{n}_bwd_ms']:.3f} (fwd {diag[f'dattn_{n}_fwd_ms']:.3f})"
            for n in ("nopos", "satmost", "band256")), flush=True)
        sd, sk = (diag["dattn_satmost_bwd_ms"] - diag["dattn_nopos_bwd_ms"],
                  diag["dattn_satmost_tc3k_bwd_ms"] - diag["dattn_nopos_tc3k_bwd_ms"])
        print(f"     tc3k by tile kind (ms): nopos {diag['dattn_nopos_tc3k_bwd_ms']:.3f}, satmost "
              f"{diag['dattn_satmost_tc3k_bwd_ms']:.3f}; satmost - nopos {sk:.3f} (default {sd:.3f})",
              flush=True)
        print(f"     tc3s (run-sum scatter): fwd+bwd {t_fb3s:9.3f} ms (bwd ~{t_fb3s - t_f:8.3f}, "
              f"speedup {tb / (t_fb3s - t_f):5.3f}x over tc3b); ratio {t_fb3s / t_fl:6.1f}x; "
              "max rel diff vs tc3b dq/dk/dv/dpk/dpq " + " ".join(f"{x:.2e}" for x in rel3s), flush=True)
        print(f"     default - band256 bwd: default {t_fb - t_f - diag['dattn_band256_bwd_ms']:.3f} ms, "
              f"tc3s {t_fb3s - t_f - diag['dattn_band256_tc3s_bwd_ms']:.3f} ms "
              f"(band256 bwd: default {diag['dattn_band256_bwd_ms']:.3f}, tc3s {diag['dattn_band256_tc3s_bwd_ms']:.3f})",
              flush=True)
        print(f"     dropout 0.1: fwd {t_df:.3f} ms (no dropout {t_f:.3f}), fwd+bwd {t_dfb:.3f} ms (bwd ~{t_dfb - t_df:.3f}; "
              f"no dropout {t_fb - t_f:.3f}); flash fwd+bwd with dropout {t_fld:.3f} ms; ratio {t_dfb / t_fld:4.1f}x", flush=True)
        print(f"     tc3c (default before tc3d): fwd+bwd {t_fbc:9.3f} ms (bwd ~{t_fbc - t_f:8.3f}, speedup "
              f"{tb / (t_fbc - t_f):5.3f}x over tc3b; the default is {(t_fbc - t_f) / (t_fb - t_f):5.3f}x faster); "
              f"bitwise equal to the default: {c_bitwise}; nopos bwd {diag['dattn_nopos_tc3c_bwd_ms']:.3f} "
              f"(default {diag['dattn_nopos_bwd_ms']:.3f}, tc3k {diag['dattn_nopos_tc3k_bwd_ms']:.3f})", flush=True)
        print(f"     tc3d (default before tc3e): fwd+bwd {t_fbd:9.3f} ms (bwd ~{t_fbd - t_f:8.3f}; the default is "
              f"{(t_fbd - t_f) / (t_fb - t_f):5.3f}x faster); bitwise equal to the default: {d_bitwise}; "
              f"nopos bwd {diag['dattn_nopos_tc3d_bwd_ms']:.3f} (default {diag['dattn_nopos_bwd_ms']:.3f}), "
              f"satmost bwd {diag['dattn_satmost_tc3d_bwd_ms']:.3f} (default {diag['dattn_satmost_bwd_ms']:.3f})",
              flush=True)
        print(f"     tc3e (previous default, dq tile body per class only): fwd+bwd {t_fbe:9.3f} ms (bwd ~{t_fbe - t_f:8.3f}; "
              f"default speedup {(t_fbe - t_f) / (t_fb - t_f):5.3f}x over it); bitwise equal to the default: "
              f"{e_bitwise}; nopos bwd {diag['dattn_nopos_tc3e_bwd_ms']:.3f} (default {diag['dattn_nopos_bwd_ms']:.3f}), "
              f"satmost bwd {diag['dattn_satmost_tc3e_bwd_ms']:.3f} (default {diag['dattn_satmost_bwd_ms']:.3f})",
              flush=True)
        print(f"     tc3g (opt-in, D_i in the dq kernel, no D_i launch): fwd+bwd {t_fbg:9.3f} ms (bwd ~{t_fbg - t_f:8.3f}; "
              f"speedup {(t_fb - t_f) / (t_fbg - t_f):5.3f}x over the default); bitwise equal to the default: "
              f"{g_bitwise}; nopos bwd {diag['dattn_nopos_tc3g_bwd_ms']:.3f} (default {diag['dattn_nopos_bwd_ms']:.3f})",
              flush=True)
        del g0, gb, g2, g3, gp, gk, g3s, gc, gd, ge, gg
        del c, q, k, v, pk, pq, dout, qt, kt, vt, dt, fwd, fwdbwd, flash
        torch.cuda.empty_cache()
    if old is not None:
        os.environ["DATTN_CUDA_BWD"] = old
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), f,
                      indent=1)


if __name__ == "__main__":
    main()
