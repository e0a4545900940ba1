"""Host time per ops.attention call on the CPU backend at a tiny shape (B1 L8 H1 D64, S 256), where
the kernel itself is a few microseconds: no-grad forward and forward+backward through autograd,
averaged over many calls, and a cProfile of the no-grad forward (which Python functions take the
time). Run from the repository root:

    DATTN_LIBRARY=build/libdattn.so PYTHONPATH=python python3 bench/host_call_overhead.py
"""
import cProfile
import pstats
import time

import torch

from dattn import ops


def main():
    torch.manual_seed(0)
    B, L, H, D, S = 1, 8, 1, 64, 256
    q, k, v = (torch.randn(B, L, H, D) for _ in range(3))
    pk, pq = (torch.randn(H, 2 * S, D) for _ in range(2))
    with torch.no_grad():
        for _ in range(50):
            ops.attention(q, k, v, pk, pq)
        n = 2000
        t = time.perf_counter()
        for _ in range(n):
            ops.attention(q, k, v, pk, pq)
        print("no-grad fwd per call: %.1f us (B%d L%d H%d D%d, %d calls)" % ((time.perf_counter() - t) / n * 1e6, B, L, H, D, n))
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(500):
            ops.attention(q, k, v, pk, pq)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(12)
    leaves = [t.clone().requires_grad_() for t in (q, k, v, pk, pq)]
    dout = torch.randn_like(q)
    for _ in range(20):
        torch.autograd.grad(ops.attention(*leaves), leaves, dout)
    n = 500
    t = time.perf_counter()
    for _ in range(n):
        torch.autograd.grad(ops.attention(*leaves), leaves, dout)
    print("fwd+bwd per call: %.1f us (%d calls)" % ((time.perf_counter() - t) / n * 1e6, n))


if __name__ == "__main__":
    main()
