# ncu target: one profiled call each of the dattn forward (B32 L512, B2 L8192), the
# fwd+bwd (B32 L512, B2 L8192) and SDPA flash fwd (same shapes), after warm-up.
import sys, torch, torch.nn.functional as F
sys.path.insert(0, "python")
from dattn import ops
H, D, S = 12, 64, 256
prof = torch.cuda.profiler
for B, L in [(32, 512), (2, 8192)]:
    g = torch.Generator(device="cuda").manual_seed(B * L)
    q, k, v = (torch.randn(B, L, H, D, device="cuda", dtype=torch.float16, generator=g).requires_grad_() for _ in range(3))
    pk, pq = (torch.randn(H, 2 * S, D, device="cuda", dtype=torch.float16, generator=g).requires_grad_() for _ in range(2))
    dout = torch.randn(B, L, H, D, device="cuda", dtype=torch.float16, generator=g)
    qt, kt, vt = (t.detach().transpose(1, 2).contiguous() for t in (q, k, v))
    for _ in range(3):
        out = ops.attention(q, k, v, pk, pq)
        torch.autograd.grad(out, (q, k, v, pk, pq), dout)
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(qt, kt, vt)
    torch.cuda.synchronize()
    prof.start()
    out = ops.attention(q, k, v, pk, pq)
    torch.autograd.grad(out, (q, k, v, pk, pq), dout)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(qt, kt, vt)
    torch.cuda.synchronize()
    prof.stop()
    print("profiled", B, L, flush=True)
