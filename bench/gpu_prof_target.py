"""ncu target for scripts/gpu_prof.sh: after a warm-up, one profiled call each of the dattn
forward, the dattn forward+backward and SDPA flash's forward (+backward unless --no-bwd) on
the op-level shapes of the issue-4 benchmark (fp16, H 12, D 64, S 256, c2p|p2c, log buckets);
--nopos adds dattn without position terms (the attention core, comparable with flash);
--satmost adds dattn with position_buckets 8, max_relative_positions 16 (gpu_bwd_bench's
"satmost" diagnostic: every key tile off the diagonal saturated). Only the region between
cudaProfilerStart / Stop is profiled (ncu --profile-from-start off).

    python3 bench/gpu_prof_target.py [--shapes 32x512,2x8192] [--no-bwd] [--no-flash] [--nopos]
                                     [--satmost]
"""
import argparse
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, "python")
from dattn import ops  # noqa: E402

H, D, S = 12, 64, 256


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="32x512,2x8192", help="comma-separated BxL")
    ap.add_argument("--no-bwd", action="store_true", help="forward only")
    ap.add_argument("--no-flash", action="store_true", help="skip SDPA flash")
    ap.add_argument("--nopos", action="store_true",
                    help="also profile dattn without position terms (the attention core alone)")
    ap.add_argument("--satmost", action="store_true",
                    help="also profile dattn with 8 buckets, M 16 (almost every tile saturated)")
    a = ap.parse_args()
    flash = torch.nn.attention.SDPBackend.FLASH_ATTENTION
    for shape in a.shapes.split(","):
        B, L = (int(x) for x in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(B * L)
        q, k, v = (torch.randn(B, L, H, D, device="cuda", dtype=torch.float16, generator=g).requires_grad_()
                   for _ in range(3))
        pk, pq = (torch.randn(H, 2 * S, D, device="cuda", dtype=torch.float16, generator=g).requires_grad_()
                  for _ in range(2))
        dout = torch.randn(B, L, H, D, device="cuda", dtype=torch.float16, generator=g)
        pk8, pq8 = (t[:, :16].detach().contiguous().requires_grad_() for t in (pk, pq))
        qt, kt, vt = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
        dt = dout.transpose(1, 2).contiguous()

        def once():
            out = ops.attention(q, k, v, pk, pq)
            if not a.no_bwd:
                torch.autograd.grad(out, (q, k, v, pk, pq), dout)
            if a.nopos:
                out = ops.attention(q, k, v)
                if not a.no_bwd:
                    torch.autograd.grad(out, (q, k, v), dout)
            if a.satmost:
                out = ops.attention(q, k, v, pk8, pq8, position_buckets=8, max_relative_positions=16)
                if not a.no_bwd:
                    torch.autograd.grad(out, (q, k, v, pk8, pq8), dout)
            if not a.no_flash:
                with torch.nn.attention.sdpa_kernel(flash):
                    out = F.scaled_dot_product_attention(qt, kt, vt)
                    if not a.no_bwd:
                        torch.autograd.grad(out, (qt, kt, vt), dt)

        for _ in range(3):
            once()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        once()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        print("profiled", B, L, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
