#!/usr/bin/env python3
"""A/B of two builds of the library on one GPU in one run: the backward (and forward) times
of the op-level shapes, and the gradients of a fixed set of configurations, saved per build
so that two builds can be compared bit for bit.

Each build runs in its own process (the library is loaded once per process, from
DATTN_LIBRARY); run the builds alternately, several rounds, then compare:

    DATTN_LIBRARY=A/libdattn.so PYTHONPATH=python python3 bench/gpu_lib_ab.py run --tag a --dir D
    DATTN_LIBRARY=B/libdattn.so PYTHONPATH=python python3 bench/gpu_lib_ab.py run --tag b --dir D
    (repeat the two lines; each run appends its timings to D/<tag>_times.jsonl)
    python3 bench/gpu_lib_ab.py compare --dir D --base a --new b [--json out.json]

run: fp16, H 12, D 64, S 256 (v3 log buckets, c2p|p2c, no mask): fwd and fwd+bwd medians
(CUDA events) at B32 L512 / B8 L2048 / B2 L8192, plus the diagnostics nopos (no position
terms), satmost (position_buckets 8, max_relative_positions 16) and band256 (no buckets,
max_relative_positions 256) and packed (the B sequences' lengths uniform in [L / 4, L], cu_seqlens,
max_seqlen L); bwd = fwd+bwd - fwd. Then the five gradients (dq, dk, dv, dpk,
dpq) of the configurations in CASES (fp16 / bf16, padded with a key mask, packed, dropout,
log buckets / none / few, lengths across tile edges), seeds fixed, saved to D/<tag>_grads.pt
(the first run of a tag writes it).
compare: per shape the median over rounds of each build's times and new / base; per case
whether every gradient is bitwise equal, and max |new - base| / max |base| otherwise.
"""
import argparse
import itertools
import json
import os
import sys

H, D, S = 12, 64, 256
SHAPES = [(32, 512), (8, 2048), (2, 8192)]
# name, dtype, B, L, mask, packed, dropout, position_buckets, max_relative_positions, S
CASES = [
    ("f16_L512", "float16", 4, 512, False, False, 0.0, 256, 512, 256),
    ("bf16_L777_mask", "bfloat16", 3, 777, True, False, 0.0, 256, 512, 256),
    ("f16_packed", "float16", 1, 1500, False, True, 0.0, 256, 512, 256),
    ("f16_drop", "float16", 2, 640, False, False, 0.1, 256, 512, 256),
    ("f16_band256", "float16", 2, 600, True, False, 0.0, -1, 256, 256),
    ("bf16_satmost", "bfloat16", 2, 700, False, False, 0.0, 8, 16, 8),
    ("f16_L2100", "float16", 1, 2100, False, False, 0.0, 256, 512, 256),
]


def run(args):
    import torch
    sys.path.insert(0, "python")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dattn import ops
    from dattn._lib import DattnUnsupported
    from gpu_bwd_bench import timed as timed_reps

    def timed(fn):
        return timed_reps(fn, 30, 4.0)

    dev = "cuda"
    times = {}
    for B, L in SHAPES:
        g = torch.Generator(device=dev).manual_seed(1000 + L)
        q, k, v = (torch.randn(B, L, H, D, device=dev, dtype=torch.float16, generator=g).requires_grad_()
                   for _ in range(3))
        pk, pq = (torch.randn(H, 2 * S, D, device=dev, dtype=torch.float16, generator=g).requires_grad_()
                  for _ in range(2))
        dout = torch.randn(B, L, H, D, device=dev, dtype=torch.float16, generator=g)
        diags = [("default", (pk, pq), 256, 512),
                 ("nopos", (None, None), 256, 512),
                 ("satmost", (pk[:, :16].detach().contiguous().requires_grad_(),
                              pq[:, :16].detach().contiguous().requires_grad_()), 8, 16),
                 ("band256", (pk, pq), -1, 256)]
        for name, (tk, tq), pb, mr in diags:
            ins = [t for t in (q, k, v, tk, tq) if t is not None]

            def fwd():
                with torch.no_grad():
                    ops.attention(q, k, v, tk, tq, position_buckets=pb, max_relative_positions=mr)

            def fwdbwd():
                out = ops.attention(q, k, v, tk, tq, position_buckets=pb, max_relative_positions=mr)
                torch.autograd.grad(out, ins, dout)

            tf, tfb = timed(fwd), timed(fwdbwd)
            times[f"B{B}_L{L}_{name}"] = {"fwd_ms": tf, "fwdbwd_ms": tfb, "bwd_ms": tfb - tf}
        # packed (cu_seqlens): the same B sequences with lengths uniform in [L / 4, L] (seeded:
        # the same in every run), max_seqlen L; the v3 map
        lens = torch.randint(L // 4, L + 1, (B,), generator=torch.Generator().manual_seed(L)).tolist()
        T = sum(lens)
        cu = torch.tensor([0] + list(itertools.accumulate(lens)), device=dev, dtype=torch.int32)
        qp, kp, vp = (t.detach().reshape(B * L, H, D)[:T].clone().requires_grad_() for t in (q, k, v))
        dp = dout.reshape(B * L, H, D)[:T].contiguous()

        def pfwd():
            with torch.no_grad():
                ops.attention(qp, kp, vp, pk, pq, cu_seqlens=cu, max_seqlen=L)

        def pfwdbwd():
            out = ops.attention(qp, kp, vp, pk, pq, cu_seqlens=cu, max_seqlen=L)
            torch.autograd.grad(out, (qp, kp, vp, pk, pq), dp)

        tf, tfb = timed(pfwd), timed(pfwdbwd)
        times[f"B{B}_L{L}_packed"] = {"fwd_ms": tf, "fwdbwd_ms": tfb, "bwd_ms": tfb - tf, "tokens": T}
    os.makedirs(args.dir, exist_ok=True)
    with open(os.path.join(args.dir, f"{args.tag}_times.jsonl"), "a") as f:
        f.write(json.dumps(times) + "\n")
    for k_, t in times.items():
        print(f"{args.tag} {k_:24s} fwd {t['fwd_ms']:.4f} fwdbwd {t['fwdbwd_ms']:.4f} bwd {t['bwd_ms']:.4f} ms")
    gpath = os.path.join(args.dir, f"{args.tag}_grads.pt")
    if os.path.exists(gpath):
        return 0
    grads = {}
    for name, dt, B, L, mask, packed, p, pb, mr, s_ in CASES:
        dt = getattr(torch, dt)
        g = torch.Generator(device=dev).manual_seed(7 + L)
        shape = (B * L, H, D) if packed else (B, L, H, D)
        q, k, v = (torch.randn(*shape, device=dev, dtype=dt, generator=g).requires_grad_() for _ in range(3))
        pk, pq = (torch.randn(H, 2 * s_, D, device=dev, dtype=dt, generator=g).requires_grad_() for _ in range(2))
        dout = torch.randn(*shape, device=dev, dtype=dt, generator=g)
        kw = dict(position_buckets=pb, max_relative_positions=mr, dropout_p=p)
        if mask:
            lens = torch.randint(L // 3, L + 1, (B,), device=dev, generator=g)
            kw["mask"] = (torch.arange(L, device=dev)[None, :] < lens[:, None])
        if packed:
            cuts = sorted(torch.randint(1, B * L, (5,), generator=torch.Generator().manual_seed(L)).tolist())
            kw["cu_seqlens"] = torch.tensor([0] + cuts + [B * L], device=dev, dtype=torch.int32)
            kw["max_seqlen"] = B * L
        if p > 0:
            torch.manual_seed(1234)
        try:
            out = ops.attention(q, k, v, pk, pq, **kw)
        except DattnUnsupported as e:
            # a DATTN_CUDA_FWD / _BWD pin the case's call cannot take: the pin is strict (no
            # fallback), so the case has nothing to compare on this side
            print(f"{args.tag} {name}: skipped, the pinned path does not take it ({str(e)[:80]}...)")
            continue
        gr = torch.autograd.grad(out, (q, k, v, pk, pq), dout)
        grads[name] = [t.detach().cpu() for t in (out,) + gr]
    torch.save(grads, gpath)
    return 0


def compare(args):
    import statistics
    import torch

    def load(tag):
        with open(os.path.join(args.dir, f"{tag}_times.jsonl")) as f:
            return [json.loads(x) for x in f if x.strip()]

    a, b = load(args.base), load(args.new)
    res = {"base": args.base, "new": args.new, "rounds": [len(a), len(b)], "times": {}, "grads": {}}
    print(f"times (median over {len(a)} / {len(b)} rounds, ms): {args.base} -> {args.new}")
    for key in a[0]:
        row = {}
        for part in ("fwd_ms", "bwd_ms", "fwdbwd_ms"):
            ma = statistics.median(r[key][part] for r in a)
            mb = statistics.median(r[key][part] for r in b)
            row[part] = {args.base: ma, args.new: mb, "ratio": mb / ma}
        res["times"][key] = row
        print(f"  {key:24s} bwd {row['bwd_ms'][args.base]:.4f} -> {row['bwd_ms'][args.new]:.4f} "
              f"({row['bwd_ms']['ratio']:.3f}x)  fwd {row['fwd_ms']['ratio']:.3f}x")
    ga = torch.load(os.path.join(args.dir, f"{args.base}_grads.pt"))
    gb = torch.load(os.path.join(args.dir, f"{args.new}_grads.pt"))
    print("out and gradients (out, dq, dk, dv, dpk, dpq):")
    for name in ga:
        if name not in gb:
            print(f"  {name:16s} only on {args.base} (skipped on {args.new})")
            continue
        iv = {2: torch.int16, 4: torch.int32, 8: torch.int64}
        bit = [x.shape == y.shape and x.dtype == y.dtype and
               bool(torch.equal(x.view(iv[x.element_size()]), y.view(iv[y.element_size()])))
               for x, y in zip(ga[name], gb[name])]
        rel = [float((y.float() - x.float()).abs().max() / x.float().abs().max().clamp_min(1e-30))
               for x, y in zip(ga[name], gb[name])]
        res["grads"][name] = {"bitwise": bit, "max_rel": rel}
        print(f"  {name:16s} bitwise {bit}  max_rel {['%.1e' % r for r in rel]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--tag", required=True)
    r.add_argument("--dir", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--dir", required=True)
    c.add_argument("--base", required=True)
    c.add_argument("--new", required=True)
    c.add_argument("--json")
    args = ap.parse_args()
    return run(args) if args.cmd == "run" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
