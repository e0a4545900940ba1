#!/usr/bin/env python3
"""Encoder training step, dattn vs transformers (issue 5 targets), on the GPU.

DeBERTa-v3-base's encoder (12 layers, hidden 768, 12 heads of 64, FFN 3072,
position_buckets 256, share_att_key, c2p + p2c, LayerNorm'd rel embeddings), random
weights, in training mode with its dropouts on (hidden and attention 0.1, as fine-tuning
runs). One step = forward of DebertaV2Encoder on random hidden states [B, L, 768] with a
full attention mask, a scalar loss (mean of the squared outputs), backward to every
parameter (no optimizer). Precision: fp16 autocast over fp32 weights -- how DeBERTa is
fine-tuned in practice (AMP keeps fp32 master weights and gradients; a .half() model is
not how anyone trains); both sides run the same autocast. --half switches to a .half()
model instead.

Shapes and targets (issue 5): B=8 L=512: dattn step time <= 0.6x transformers';
B=4 L=2048: <= 0.3x, and peak memory (torch.cuda.max_memory_allocated during a step,
weights and gradients included) <= 0.5x.

Time-bounded: every case first times one step, then repeats for about --case-budget
seconds (at least 1, at most --reps steps); the median is reported. The whole run stays
under ~90 s even with the simple first CUDA backward.

Usage: python3 bench/gpu_train_bench.py [--json PATH] [--quick] [--half] [--strict]
Exit 0 unless something failed to run (--strict: also when a target is missed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import dattn  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))
    import dattn  # noqa: F401

import torch

from dattn import hf, testing

CASES = [  # (B, L, time target, memory target or None)
    (8, 512, 0.6, None),
    (4, 2048, 0.3, 0.5),
]


def step_fn(enc, x, mask, amp):
    def step():
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            out = enc(x, mask, output_hidden_states=False, return_dict=True).last_hidden_state
            loss = out.float().pow(2).mean()
        loss.backward()
        for p in enc.parameters():
            p.grad = None
        return loss.detach()
    return step


def measure(step, budget_s, max_reps):
    torch.cuda.synchronize()
    step()  # warm-up (library load, probes, allocator)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    step()
    e.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e)]
    peak = torch.cuda.max_memory_allocated()
    reps = int(min(max_reps - 1, max(0, budget_s * 1e3 / times[0] - 1)))
    for _ in range(reps):
        s.record()
        step()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return dict(median_ms=statistics.median(times), min_ms=min(times), n=len(times),
                peak_bytes=peak, peak_over_base_bytes=peak - base, base_bytes=base)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None, help="default $OUT/train_bench.json when $OUT is set")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--half", action="store_true", help=".half() model instead of fp16 autocast")
    ap.add_argument("--no-dropout", action="store_true")
    ap.add_argument("--case-budget", type=float, default=None, help="seconds per (case, side)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--strict", action="store_true")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_train_bench: no CUDA device")
        return 77
    budget = args.case_budget or (3.0 if args.quick else 6.0)
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    drop = 0.0 if args.no_dropout else 0.1
    from transformers import DebertaV2Model

    torch.manual_seed(0)
    cfg = testing.v3_base(layers=12, dropout=drop, attention_dropout=drop)
    enc = DebertaV2Model(cfg).encoder.to(dev).train()
    if args.half:
        enc = enc.half()
    amp = not args.half
    wdtype = torch.float16 if args.half else torch.float32
    results = []
    t_start = time.perf_counter()
    print(f"gpu_train_bench: v3-base encoder (12 layers), {'half model' if args.half else 'fp16 autocast'}, "
          f"dropout {drop}, {torch.cuda.get_device_name(dev)}", flush=True)
    for B, L, t_target, m_target in CASES:
        x = torch.randn(B, L, cfg.hidden_size, device=dev, dtype=wdtype)
        mask = torch.ones(B, L, dtype=torch.long, device=dev)
        row = dict(B=B, L=L, target_time_ratio=t_target, target_mem_ratio=m_target)
        for side in ("transformers", "dattn"):
            if side == "dattn":
                dattn.patch(enc)
            try:
                r = measure(step_fn(enc, x, mask, amp), budget, args.reps)
                if side == "dattn":
                    r["path"] = hf.last_path
            except torch.OutOfMemoryError as e:
                r = dict(error=f"out of memory: {str(e)[:200]}")
            finally:
                if side == "dattn":
                    dattn.unpatch(enc)
                torch.cuda.empty_cache()
            row[side] = r
            if "median_ms" in r:
                print(f"  B={B} L={L} {side:12s}: {r['median_ms']:9.2f} ms (n={r['n']}, "
                      f"min {r['min_ms']:.2f}), peak {r['peak_bytes'] / 2**30:.2f} GiB "
                      f"(+{r['peak_over_base_bytes'] / 2**30:.2f} over weights/inputs)"
                      + (f" path {r.get('path')}" if side == "dattn" else ""), flush=True)
            else:
                print(f"  B={B} L={L} {side}: {r['error']}", flush=True)
        t, d = row["transformers"], row["dattn"]
        if "median_ms" in t and "median_ms" in d:
            row["time_ratio"] = d["median_ms"] / t["median_ms"]
            row["mem_ratio"] = d["peak_bytes"] / t["peak_bytes"]
            row["mem_over_base_ratio"] = d["peak_over_base_bytes"] / max(1, t["peak_over_base_bytes"])
            row["time_ok"] = row["time_ratio"] <= t_target
            row["mem_ok"] = None if m_target is None else row["mem_ratio"] <= m_target
            print(f"  B={B} L={L}: time ratio {row['time_ratio']:.3f} (target <= {t_target}) "
                  f"{'met' if row['time_ok'] else 'MISSED'}; peak memory ratio {row['mem_ratio']:.3f}"
                  + ("" if m_target is None else
                     f" (target <= {m_target}) {'met' if row['mem_ok'] else 'MISSED'}"), flush=True)
        results.append(row)
    ran = all("time_ratio" in r for r in results)
    met = ran and all(r["time_ok"] and r["mem_ok"] is not False for r in results)
    res = dict(what="v3-base encoder training step (fwd+bwd, scalar loss), dattn vs transformers",
               device=torch.cuda.get_device_name(dev), torch=torch.__version__,
               precision="half model" if args.half else "fp16 autocast, fp32 weights",
               dropout=drop, memory="torch.cuda.max_memory_allocated during one step (weights, "
               "inputs and gradients included); *_over_base: minus what was allocated before",
               cases=results, all_ran=ran, targets_met=met,
               seconds=time.perf_counter() - t_start)
    path = args.json or (os.path.join(os.environ["OUT"], "train_bench.json") if os.environ.get("OUT") else None)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
    print(f"gpu_train_bench: targets {'met' if met else 'NOT met'} ({res['seconds']:.0f}s)")
    if not ran:
        return 1
    return 1 if (args.strict and not met) else 0


if __name__ == "__main__":
    sys.exit(main())
