# torch SDPA forward (flash and cuDNN backends) at the op-level shapes, fp16 H12 D64, cudaEvent medians
import sys, torch
from torch.nn.attention import sdpa_kernel, SDPBackend
H, D = 12, 64
for B, L in [(32, 512), (8, 2048), (2, 8192)]:
    q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.float16) for _ in range(3))
    for name, be in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]:
        with sdpa_kernel(be):
            for _ in range(5): torch.nn.functional.scaled_dot_product_attention(q, k, v)
            ts = []
            for _ in range(7):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(20): torch.nn.functional.scaled_dot_product_attention(q, k, v)
                e1.record(); torch.cuda.synchronize()
                ts.append(e0.elapsed_time(e1) / 20)
            ts.sort()
            t = ts[len(ts) // 2]
            print(f"sdpa {name} B{B} L{L}: {t:.4f} ms, {4*B*H*L*L*D/t/1e9:.1f} TFLOP/s")
