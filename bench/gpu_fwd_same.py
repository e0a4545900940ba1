#!/usr/bin/env python3
"""Bitwise comparison of the forward's output under two DATTN_CUDA_FWD pins (read by the
library at every call), in one process on the GPU: fp16 and bf16, H 12, D 64, S 256, c2p|p2c,
v3 log buckets, the op-level shapes and lengths across tile edges. Exit status 1 when any pair
differs (or a call fails).

    PYTHONPATH=python python3 bench/gpu_fwd_same.py --a wskg --b wskgt [--shapes 32x512,...]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, "python")
from dattn import ops  # noqa: E402

H, D, S = 12, 64, 256


def run(path, q, k, v, pk, pq):
    os.environ["DATTN_CUDA_FWD"] = path
    try:
        with torch.no_grad():
            out = ops.attention(q, k, v, pk, pq)
        torch.cuda.synchronize()
        return out
    finally:
        os.environ.pop("DATTN_CUDA_FWD", None)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--shapes", default="32x512,8x2048,2x8192,3x777,2x1031,1x300,2x4100")
    args = ap.parse_args()
    bad = 0
    for dt in (torch.float16, torch.bfloat16):
        for shape in args.shapes.split(","):
            B, L = (int(x) for x in shape.split("x"))
            g = torch.Generator(device="cuda").manual_seed(B * 100003 + L)
            q, k, v = (torch.randn(B, L, H, D, device="cuda", dtype=dt, generator=g) for _ in range(3))
            pk, pq = (torch.randn(H, 2 * S, D, device="cuda", dtype=dt, generator=g) for _ in range(2))
            oa = run(args.a, q, k, v, pk, pq)
            ob = run(args.b, q, k, v, pk, pq)
            same = torch.equal(oa, ob)
            diff = (oa.float() - ob.float()).abs().max().item()
            bad += not same
            print(f"{str(dt)[6:]:9s} B{B} L{L}: {args.b} vs {args.a} bitwise {same} (max |out diff| {diff:.3g})")
    print(f"{'all bitwise equal' if not bad else f'{bad} differ'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
