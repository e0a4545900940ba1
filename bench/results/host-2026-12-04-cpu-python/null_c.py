"""Python-side host time of one ops.attention forward+backward on the CPU backend with the
library's C calls replaced by no-ops (B1 L8 H1 D64 S256), next to a bare autograd.Function
with the same five inputs. Run from the repository root:

    DATTN_LIBRARY=build/libdattn.so PYTHONPATH=python python3 bench/results/host-2026-12-04-cpu-python/null_c.py
"""
import time

import torch

from dattn import _lib, ops


def per_call(fn, n=2000, best_of=7):
    for _ in range(200):
        fn()
    best = float("inf")
    for _ in range(best_of):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    return best


class Id(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *a):
        return a[0].clone()

    @staticmethod
    def backward(ctx, g):
        return (g,) + (None,) * 4


torch.manual_seed(0)
B, L, H, D, S = 1, 8, 1, 64, 256
q, k, v = (torch.randn(B, L, H, D) for _ in range(3))
pk, pq = (torch.randn(H, 2 * S, D) for _ in range(2))
leaves = [t.clone().requires_grad_() for t in (q, k, v, pk, pq)]
dout = torch.randn_like(q)
print("real C:  fwd+bwd %.1f us (best of 7 x 2000)"
      % per_call(lambda: torch.autograd.grad(ops.attention(*leaves), leaves, dout)))
_lib.fwd = lambda p: None
_lib.bwd = lambda p: None
print("null C:  fwd+bwd %.1f us" % per_call(lambda: torch.autograd.grad(ops.attention(*leaves), leaves, dout)))
print("bare autograd.Function, 5 inputs: fwd+bwd %.1f us"
      % per_call(lambda: torch.autograd.grad(Id.apply(*leaves), leaves[:1], dout)))
