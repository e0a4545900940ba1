#!/usr/bin/env python3
"""Error statistics of the CPU fp32 backward against transformers' autograd over many
seeds (the shape of tests/python/test_train.py::test_gradients_vs_transformers_autograd:
B 2, L 160 with one sequence of 111, H 2, D 64, S 64, M 256, c2p|p2c). Per seed and
gradient (q, k, v, pk, pq): dattn's and transformers' fp32 error against float64, as the
max abs error and as the Frobenius error relative to the reference's norm. Prints and
writes (--json) the ratio statistics that NOTES.md "CPU score accuracy" quotes.

usage: PYTHONPATH=python python3 bench/cpu_grad_error_stats.py [--seeds 300] [--json F]
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402

from dattn import ops, testing  # noqa: E402
from test_ops import reference  # noqa: E402
import test_train  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=300)
    ap.add_argument("--first", type=int, default=1000)
    ap.add_argument("--json")
    a = ap.parse_args()
    B, L, H, D, S, M = 2, 160, 2, 64, 64, 256
    mask = testing.lengths_mask([L, 111], L)
    eps, eps32 = (torch.finfo(torch.float32).eps,) * 2
    rows = []
    t0 = time.time()
    for s in range(a.first, a.first + a.seeds):
        torch.manual_seed(s)
        x64 = [torch.randn(B, L, H, D, dtype=torch.float64) for _ in range(3)]
        t64 = [0.5 * torch.randn(H, 2 * S, D, dtype=torch.float64) for _ in range(2)]
        g = torch.randn(B, L, H, D, dtype=torch.float64)
        ref = [t.clone().requires_grad_() for t in x64 + t64]
        (reference(*ref, mask, S, M) * g).sum().backward()
        low = [t.float() for t in x64 + t64]
        _, g_hf = test_train._hf_attention_grads(*low, mask, S, M, g)
        leaves = [t.clone().requires_grad_() for t in low]
        ops.attention(*leaves, mask=mask.to(torch.uint8), position_buckets=S,
                      max_relative_positions=M).backward(g.float())
        r = dict(seed=s)
        for i, name in enumerate("q k v pk pq".split()):
            rg, d_, t_ = ref[i].grad, leaves[i].grad.double(), g_hf[i].double()
            n = rg.norm().item()
            r[f"d{name}_frob_ratio"] = (d_ - rg).norm().item() / (t_ - rg).norm().item()
            r[f"d{name}_maxabs_ratio"] = (d_ - rg).abs().max().item() / (t_ - rg).abs().max().item()
            r[f"d{name}_frob_dattn"] = (d_ - rg).norm().item() / n
            fl = (4 * eps + 16 * eps32) * rg.abs().max().item()
            r[f"d{name}_maxabs_ok"] = (d_ - rg).abs().max().item() <= 2 * (t_ - rg).abs().max().item() + fl
            r[f"d{name}_frob_ok"] = r[f"d{name}_frob_dattn"] <= 2 * (t_ - rg).norm().item() / n + eps
        rows.append(r)
    fr = [r[f"d{n}_frob_ratio"] for r in rows for n in "qkv"]
    mx = [r[f"d{n}_maxabs_ratio"] for r in rows for n in "qkv"]
    frt = [r[f"d{n}_frob_ratio"] for r in rows for n in ("pk", "pq")]
    fails = sum(not all(r[f"d{n}_{k}_ok"] for n in ("q", "k", "v", "pk", "pq") for k in ("frob",))
                or not all(r[f"d{n}_maxabs_ok"] for n in "qkv") for r in rows)
    summary = dict(
        what="CPU fp32 backward vs transformers autograd (fp32), errors against float64; ratio = dattn / transformers",
        command="PYTHONPATH=python python3 bench/cpu_grad_error_stats.py " + " ".join(sys.argv[1:]),
        date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), torch=torch.__version__,
        seeds=[a.first, a.first + a.seeds - 1],
        qkv_frob_ratio=dict(mean=statistics.mean(fr), stdev=statistics.pstdev(fr), max=max(fr)),
        qkv_maxabs_ratio=dict(mean=statistics.mean(mx), max=max(mx),
                              over_2=sum(x > 2 for x in mx)),
        tables_frob_ratio=dict(mean=statistics.mean(frt), max=max(frt)),
        seeds_failing_the_test_rule=fails, seconds=time.time() - t0)
    print(json.dumps(summary, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(dict(summary=summary, rows=rows), indent=1))


if __name__ == "__main__":
    main()
