"""Host time of ops.attention's eager autograd path with its Function entered through
torch.autograd.Function.apply (the Python wrapper: before) and through the C apply
(ops._eager_apply: after), interleaved in one process, the library's C calls replaced by
no-ops (B1 L8 H1 D64 S256 on the CPU backend: what is left is Python and torch). Run from
the repository root:

    DATTN_LIBRARY=build/libdattn.so PYTHONPATH=python python3 bench/results/host-2026-12-07-apply/apply_ab.py
"""
import time

import torch

from dattn import _lib, ops

B, L, H, D, S = 1, 8, 1, 64, 256
torch.manual_seed(0)
leaves = [torch.randn(B, L, H, D).requires_grad_() for _ in range(3)]
leaves += [torch.randn(H, 2 * S, D).requires_grad_() for _ in range(2)]
dout = torch.randn(B, L, H, D)
_lib.fwd = lambda p: None
_lib.bwd = lambda p: None
after = ops._eager_apply
before = ops._EagerAttention.apply
assert after is not before


def per_call(fn, n=2000):
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


cells = {
    "forward (grad mode), to the returned out": lambda: ops.attention(*leaves),
    "forward + backward (torch.autograd.grad)":
        lambda: torch.autograd.grad(ops.attention(*leaves), leaves, dout),
}
for name, fn in cells.items():
    best = {"before": float("inf"), "after": float("inf")}
    for side in best:  # warm-up
        ops._eager_apply = before if side == "before" else after
        per_call(fn, 300)
    for _ in range(9):  # interleaved rounds, best of each side
        for side in best:
            ops._eager_apply = before if side == "before" else after
            best[side] = min(best[side], per_call(fn))
    ops._eager_apply = after
    print(f"{name}: before {best['before']:.1f} us, after {best['after']:.1f} us "
          f"({best['after'] - best['before']:+.1f} us; best of 9 x 2000, interleaved)")
