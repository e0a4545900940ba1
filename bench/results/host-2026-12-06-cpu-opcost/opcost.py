"""Host time of one no-grad dattn forward on the CPU backend with the library's C call replaced
by a no-op (B1 L8 H1 D64 S256): the body called directly, through the torch.library custom op
(what a torch.compile'd graph calls), through the same schema registered with a plain
Library.impl, and through the custom op with a plain CPU kernel overriding its backend wrapper.
Run from the repository root (best of 5 x 5000 calls each):

    DATTN_LIBRARY=build/libdattn.so PYTHONPATH=python python3 bench/results/host-2026-12-06-cpu-opcost/opcost.py
"""
import time

import torch

from dattn import _lib, ops

torch.manual_seed(0)
B, L, H, D, S = 1, 8, 1, 64, 256
q, k, v = (torch.randn(B, L, H, D) for _ in range(3))
pk, pq = (torch.randn(H, 2 * S, D) for _ in range(2))
_lib.fwd = lambda p: None
args = (q, k, v, pk, pq, None, None, None, L, 256, 512, 0, 0.0)


def per(fn, n=5000):
    for _ in range(300):
        fn()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    return best


with torch.no_grad():
    print("ops._fwd_impl direct                          %5.1f us" % per(lambda: ops._fwd_impl(*args)))
    print("torch.ops.dattn.fwd.default (custom_op)       %5.1f us" % per(lambda: torch.ops.dattn.fwd.default(*args)))
    raw = torch.library.Library("dattn_opcost", "DEF")
    raw.define("fwd(Tensor q, Tensor k, Tensor v, Tensor? pk, Tensor? pq, Tensor? mask, "
               "Tensor? cu_seqlens, Tensor? rng, int max_seqlen, int position_buckets, "
               "int max_relative_positions, int padded_rows, float dropout_p) -> (Tensor, Tensor)")
    raw.impl("fwd", ops._fwd_impl, "CPU")
    print("same schema, plain Library.impl on CPU        %5.1f us" % per(lambda: torch.ops.dattn_opcost.fwd.default(*args)))
    over = torch.library.Library("dattn", "IMPL")
    over.impl("fwd", ops._fwd_impl, "CPU")
    print("custom_op + plain CPU kernel over its wrapper %5.1f us" % per(lambda: torch.ops.dattn.fwd.default(*args)))
print("torch", torch.__version__)
