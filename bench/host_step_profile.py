"""Where the host time of a GPU training step goes (the B8 L512 training target is
host-bound: the device is busy about half of dattn's step). Two parts, one run:

1. Per call: ops.attention on CUDA at shapes where the kernels take a few microseconds
   (B1 H1 D64, L 64 and L 512 -- the latter takes the warp-specialized forward and its TMA
   maps), in a loop without synchronisation, so the wall time per call is the host time
   per call. Each case also reports the part spent inside the library's C calls (the
   ctypes calls of dattn._lib timed by wrappers), and torch SDPA's flash call on the same
   q/k/v for scale.
2. Per step: the v3-base encoder's training step at B8 L512 (fp16 autocast, dropout 0.1, as
   bench/gpu_train_bench.py) for transformers, dattn and the SDPA floor: the median step,
   then one step under torch.profiler (CPU activity only): the ops by self CPU time; then
   one step under cProfile: the Python functions by own time.

    PYTHONPATH=python DATTN_LIBRARY=build/libdattn.so python3 bench/host_step_profile.py --json OUT.json
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_train_bench as tb  # noqa: E402  (step_fn, side_context: the train bench's own)

from dattn import _lib, ops, testing  # noqa: E402

_C_NAMES = ("fwd", "bwd", "fwd_workspace_size", "bwd_workspace_size")


class CTimer:
    """Wraps dattn._lib's C entry points (ops looks them up at every call) and sums the
    wall time spent in them."""

    def __init__(self):
        self.orig = {n: getattr(_lib, n) for n in _C_NAMES}
        self.s = 0.0
        self.n = 0

    def __enter__(self):
        for n, f in self.orig.items():
            def w(p, f=f):
                t = time.perf_counter()
                try:
                    return f(p)
                finally:
                    self.s += time.perf_counter() - t
                    self.n += 1
            setattr(_lib, n, w)
        return self

    def __exit__(self, *a):
        for n, f in self.orig.items():
            setattr(_lib, n, f)


def per_call(dev, L, reps):
    torch.manual_seed(L)
    B, H, D, S = 1, 1, 64, 256
    q, k, v = (torch.randn(B, L, H, D, device=dev, dtype=torch.float16) for _ in range(3))
    pk, pq = (torch.randn(H, 2 * S, D, device=dev, dtype=torch.float16) for _ in range(2))
    leaves = [t.clone().requires_grad_() for t in (q, k, v, pk, pq)]
    dout = torch.randn_like(q)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    lt = [t.clone().requires_grad_() for t in (qt, kt, vt)]
    doutt = dout.transpose(1, 2)

    def nograd():
        with torch.no_grad():
            ops.attention(q, k, v, pk, pq)

    def grad(p=0.0):
        def f():
            torch.autograd.grad(ops.attention(*leaves, dropout_p=p), leaves, dout)
        return f

    def sdpa_nograd():
        with torch.no_grad():
            F.scaled_dot_product_attention(qt, kt, vt)

    def sdpa_grad():
        torch.autograd.grad(F.scaled_dot_product_attention(*lt), lt, doutt)

    rows = {}
    cases = [("dattn no-grad fwd", nograd), ("dattn fwd+bwd", grad()),
             ("dattn fwd+bwd dropout 0.1", grad(0.1)),
             ("sdpa no-grad fwd", sdpa_nograd), ("sdpa fwd+bwd", sdpa_grad)]
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for name, fn in cases:
        ctx = sdpa_kernel(SDPBackend.FLASH_ATTENTION) if name.startswith("sdpa") else None
        if ctx:
            ctx.__enter__()
        for _ in range(30):
            fn()
        torch.cuda.synchronize(dev)
        with CTimer() as ct:
            t = time.perf_counter()
            for _ in range(reps):
                fn()
            host = time.perf_counter() - t
        torch.cuda.synchronize(dev)
        wall = time.perf_counter() - t
        if ctx:
            ctx.__exit__(None, None, None)
        rows[name] = dict(host_us=host / reps * 1e6, wall_us=wall / reps * 1e6,
                          c_us=ct.s / reps * 1e6, c_calls=ct.n / reps)
        print(f"  L{L:5d} {name:28s} host {host / reps * 1e6:7.1f} us/call  wall {wall / reps * 1e6:7.1f}"
              f"  in C {ct.s / reps * 1e6:6.1f} us ({ct.n / reps:.0f} C calls)", flush=True)
    return rows


def op_table(prof, top):
    rows = []
    for e in prof.key_averages():
        rows.append(dict(name=e.key[:90], count=e.count, self_cpu_us=e.self_cpu_time_total,
                         cpu_us=e.cpu_time_total))
    rows.sort(key=lambda r: -r["self_cpu_us"])
    return rows[:top], sum(r["self_cpu_us"] for r in rows)


def py_table(step, top):
    pr = cProfile.Profile()
    pr.enable()
    step()
    pr.disable()
    s = io.StringIO()
    st = pstats.Stats(pr, stream=s)
    out = []
    for (fn, line, name), (cc, nc, tt, ct, _) in st.stats.items():
        out.append(dict(func=f"{os.path.basename(fn)}:{line}:{name}", calls=nc,
                        own_ms=tt * 1e3, cum_ms=ct * 1e3))
    out.sort(key=lambda r: -r["own_ms"])
    return out[:top]


def per_step(dev, B, L, top, budget):
    from transformers import DebertaV2Model
    from torch.profiler import ProfilerActivity, profile

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    cfg = testing.v3_base(layers=12, dropout=0.1, attention_dropout=0.1)
    enc = DebertaV2Model(cfg).encoder.to(dev).train()
    params = list(enc.parameters())
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn(B, L, cfg.hidden_size, device=dev, generator=g)
    mask = torch.ones(B, L, dtype=torch.long, device=dev)
    res = {}
    for side in ("transformers", "dattn", "sdpa-floor"):
        step = tb.step_fn(enc, params, x, mask, True, dev)
        with tb.side_context(enc, side):
            for _ in range(3):
                step()
            torch.cuda.synchronize(dev)
            ms, host = [], []
            t_end = time.perf_counter() + budget
            while time.perf_counter() < t_end or len(ms) < 5:
                w, h = tb.timed_call(step, dev)
                ms.append(w)
                host.append(h)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    step()
                    torch.cuda.synchronize(dev)
            ops_top, self_total = op_table(prof, top)
            torch.cuda.synchronize(dev)
            py = py_table(step, top)
            torch.cuda.synchronize(dev)
        r = dict(median_ms=statistics.median(ms), min_ms=min(ms), n=len(ms),
                 host_median_ms=statistics.median(host), profiled_self_cpu_ms=self_total / 1e3,
                 ops=ops_top, python=py)
        res[side] = r
        print(f"\nB{B} L{L} {side}: median {r['median_ms']:.2f} ms (min {r['min_ms']:.2f}, n {r['n']}), "
              f"host {r['host_median_ms']:.2f} ms; profiled self CPU {r['profiled_self_cpu_ms']:.2f} ms")
        print(f"  {'op':60s} {'count':>6s} {'self ms':>8s} {'us/call':>8s}")
        for o in ops_top:
            print(f"  {o['name'][:60]:60s} {o['count']:6d} {o['self_cpu_us'] / 1e3:8.2f} "
                  f"{o['self_cpu_us'] / max(o['count'], 1):8.1f}")
        print(f"  {'python function (cProfile)':60s} {'calls':>6s} {'own ms':>8s} {'cum ms':>8s}")
        for p in py:
            print(f"  {p['func'][:60]:60s} {p['calls']:6d} {p['own_ms']:8.2f} {p['cum_ms']:8.2f}")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--budget", type=float, default=3.0, help="seconds of timed steps per side")
    ap.add_argument("--no-step", action="store_true")
    args = ap.parse_args()
    dev = torch.device("cuda")
    out = dict(what="host time per ops.attention call and per v3-base training step",
               device=torch.cuda.get_device_name(dev), torch=torch.__version__,
               date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               commit=os.environ.get("DATTN_GIT_COMMIT", ""), command=" ".join(sys.argv),
               per_call={})
    print("per call (B1 H1 D64 S256 fp16, both terms; host = time until the loop returned):")
    for L in (64, 512):
        out["per_call"][f"L{L}"] = per_call(dev, L, args.reps)
    if not args.no_step:
        out["step"] = per_step(dev, 8, 512, args.top, args.budget)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
