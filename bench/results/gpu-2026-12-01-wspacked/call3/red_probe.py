# one shape's fwd+bwd, three times (the reduce kernels under ncu): fp16 H12 D64 v3, padded
import sys, torch
sys.path.insert(0, "python")
from dattn import ops
B, L = int(sys.argv[1]), int(sys.argv[2])
H, D, S = 12, 64, 256
g = torch.Generator(device="cuda").manual_seed(5)
q, k, v = (torch.randn(B, L, H, D, device="cuda", dtype=torch.float16, generator=g).requires_grad_() for _ in range(3))
pk, pq = (torch.randn(H, 2 * S, D, device="cuda", dtype=torch.float16, generator=g).requires_grad_() for _ in range(2))
dout = torch.randn(B, L, H, D, device="cuda", dtype=torch.float16, generator=g)
for _ in range(3):
    out = ops.attention(q, k, v, pk, pq)
    torch.autograd.grad(out, (q, k, v, pk, pq), dout)
torch.cuda.synchronize()
