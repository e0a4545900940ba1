#!/usr/bin/env python3
"""Host (Python) cost per call of dattn.ops.attention on a tiny shape, where the kernel
is negligible and the time is the Python layer + ctypes + the library's own host work.

Three modes, each timed per call with perf_counter_ns (median of --iters calls, best
median of --repeats rounds):
  nograd    ops.attention under torch.no_grad() (the eager fast path, no dispatcher)
  fwd_grad  ops.attention with inputs that require grad (torch.ops.dattn.fwd + autograd
            node); the result is dropped after the clock stops
  bwd       out.backward(dout) of a forward run outside the clock (autograd engine +
            torch.ops.dattn.bwd)
The time spent inside the library call (_lib.fwd / _lib.bwd: the ctypes call of
dattn_fwd / dattn_bwd, including the kernel on the CPU or the launches on CUDA) is
measured by a thin timing wrapper installed by this script on those two functions;
"outside" is the per-call total minus that (the median of the per-call differences).

On CUDA the loop never synchronizes (only at the end of a round), so the figures are
host-side launch overhead; the tiny kernels finish long before the next call is issued.

usage: DATTN_LIBRARY=build/libdattn.so PYTHONPATH=python nice python3 bench/host_overhead.py
       [--device cpu|cuda] [--dtype D] [--shape B L H D] [--packed | --mask] [--terms c2p,p2c]
       [--dropout P] [--threads N] [--iters 2000] [--repeats 5] [--modes nograd,fwd_grad,bwd]
       [--json out.json]
Before/after: run it with PYTHONPATH pointing at the other tree's python/ (same library);
the header line names the ops.py that was measured.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

try:
    import dattn  # noqa: F401
except ImportError:  # a source checkout without PYTHONPATH
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from dattn import _lib, ops  # noqa: E402

_ns = time.perf_counter_ns
_lib_ns = [0]


def _timed(fn):
    def wrapper(p):
        t0 = _ns()
        try:
            return fn(p)
        finally:
            _lib_ns[0] += _ns() - t0
    return wrapper


_lib.fwd = _timed(_lib.fwd)
_lib.bwd = _timed(_lib.bwd)


def _round(call, iters, sync, setup=None):
    """Per-call (total, lib) in ns for `iters` calls."""
    tot, lib = [], []
    for _ in range(iters):
        arg = setup() if setup is not None else None
        _lib_ns[0] = 0
        t0 = _ns()
        res = call(arg)
        t1 = _ns()
        tot.append(t1 - t0)
        lib.append(_lib_ns[0])
        del res
    sync()
    return tot, lib


def measure(call, iters, repeats, warmup, sync, setup=None):
    _round(call, warmup, sync, setup)
    best = None
    for _ in range(repeats):
        tot, lib = _round(call, iters, sync, setup)
        r = dict(total_us=statistics.median(tot) / 1e3, lib_us=statistics.median(lib) / 1e3,
                 outside_us=statistics.median([a - b for a, b in zip(tot, lib)]) / 1e3)
        if best is None or r["total_us"] < best["total_us"]:
            best = r
    best["lib_share"] = best["lib_us"] / best["total_us"] if best["total_us"] else 0.0
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default=None, help="default: float32 on cpu, float16 on cuda")
    ap.add_argument("--shape", type=int, nargs=4, default=[1, 8, 2, 64],
                    metavar=("B", "L", "H", "D"))
    ap.add_argument("--packed", action="store_true", help="packed layout (cu_seqlens)")
    ap.add_argument("--mask", action="store_true", help="padded layout with a mask")
    ap.add_argument("--terms", default="c2p,p2c")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch.set_num_threads (default 1 on the CPU: the library call's "
                         "OpenMP team only adds noise at this size)")
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--modes", default="nograd,fwd_grad,bwd")
    ap.add_argument("--json")
    args = ap.parse_args()

    dev = torch.device(args.device)
    if args.threads or dev.type == "cpu":
        torch.set_num_threads(args.threads or 1)
    dt = getattr(torch, args.dtype) if args.dtype else (
        torch.float16 if dev.type == "cuda" else torch.float32)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    B, L, H, D = args.shape
    terms = [t for t in args.terms.split(",") if t]
    S = _lib.att_span(256, 512)
    g = torch.Generator().manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(device=dev, dtype=dt)

    kw = dict(dropout_p=args.dropout)
    if args.packed:
        q, k, v = rnd(B * L, H, D), rnd(B * L, H, D), rnd(B * L, H, D)
        kw.update(cu_seqlens=torch.arange(0, B * L + 1, L, dtype=torch.int32, device=dev),
                  max_seqlen=L)
    else:
        q, k, v = rnd(B, L, H, D), rnd(B, L, H, D), rnd(B, L, H, D)
        if args.mask:
            m = torch.ones(B, L, dtype=torch.bool, device=dev)
            m[:, L // 2:] = False
            kw["mask"] = m
    pk = rnd(H, 2 * S, D) if "c2p" in terms else None
    pq = rnd(H, 2 * S, D) if "p2c" in terms else None
    dout = torch.randn_like(q)
    leaves = [t.detach().requires_grad_() if t is not None else None for t in (q, k, v, pk, pq)]

    def nograd(_):
        with torch.no_grad():
            return ops.attention(q, k, v, pk, pq, **kw)

    def fwd_grad(_):
        return ops.attention(*leaves, **kw)

    def bwd_setup():
        for t in leaves:
            if t is not None:
                t.grad = None
        return ops.attention(*leaves, **kw)

    def bwd(out):
        out.backward(dout)

    modes = dict(nograd=(nograd, None), fwd_grad=(fwd_grad, None), bwd=(bwd, bwd_setup))
    res = dict(device=str(dev), dtype=str(dt).replace("torch.", ""), shape=[B, L, H, D],
               packed=args.packed, mask=args.mask, terms=terms, dropout=args.dropout,
               threads=torch.get_num_threads(), iters=args.iters, repeats=args.repeats,
               torch=torch.__version__, library=str(_lib.library_path()),
               ops_file=str(Path(ops.__file__).resolve()), results={})
    print(f"# {res['device']} {res['dtype']} B{B} L{L} H{H} D{D} "
          f"{'packed' if args.packed else 'padded'}{' mask' if args.mask else ''} "
          f"terms={args.terms or 'none'} dropout={args.dropout} threads={res['threads']} "
          f"ops={res['ops_file']}")
    print(f"{'mode':10s} {'total_us':>9s} {'lib_us':>8s} {'outside_us':>10s} {'lib_share':>9s}")
    for name in args.modes.split(","):
        call, setup = modes[name]
        r = measure(call, args.iters, args.repeats, args.warmup, sync, setup)
        res["results"][name] = r
        print(f"{name:10s} {r['total_us']:9.1f} {r['lib_us']:8.1f} {r['outside_us']:10.1f} "
              f"{r['lib_share']:9.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
