"""A/B of the patched encoder's training step: hf.FUSED_LAYER on (a layer's projections and
attention in one autograd node, _proj._LayerAttention) against off (two nodes), steps
interleaved so both sides see the same host. The step is host-bound at small shapes, so
this measures the host time the fused node saves.

    PYTHONPATH=python DATTN_LIBRARY=build/libdattn.so python3 bench/host_step_ab.py \
        [--device cpu|cuda] [--tiny] [--B 2 --L 16] [--rounds 60] [--json OUT.json]

--tiny: the test config (hidden 64, 2 heads; the CPU default); otherwise v3-base's shape.
Autocast bf16 on the CPU, fp16 on CUDA; dropout 0.1 (hidden and attention), 12 layers.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

import dattn
from dattn import hf, testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_train_bench as tb  # noqa: E402  (the train bench's step and interleaved timing)


def _with_flag(step, fused):
    def run():
        hf.FUSED_LAYER = fused
        return step()
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--B", type=int, default=2)
    ap.add_argument("--L", type=int, default=16)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    from transformers import DebertaV2Model

    dev = torch.device(args.device)
    torch.manual_seed(0)
    kw = dict(layers=args.layers, dropout=0.1, attention_dropout=0.1)
    cfg = testing.config("v3", **kw) if args.tiny or dev.type == "cpu" else testing.v3_base(**kw)
    enc = DebertaV2Model(cfg).encoder.to(dev).train()
    x = torch.randn(args.B, args.L, cfg.hidden_size, device=dev)
    mask = torch.ones(args.B, args.L, dtype=torch.long, device=dev)
    dattn.patch(enc)
    step = tb.step_fn(enc, list(enc.parameters()), x, mask, True, dev)
    sides = {"fused": _with_flag(step, True), "two nodes": _with_flag(step, False)}
    old = hf.FUSED_LAYER
    try:
        for run in sides.values():
            for _ in range(3):
                run()
        t = tb.measure_interleaved(enc, sides, float("inf"), args.rounds, dev)
    finally:
        hf.FUSED_LAYER = old
    res = dict(what="patched encoder training step, hf.FUSED_LAYER on vs off, interleaved",
               device=torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
               torch=torch.__version__, threads=torch.get_num_threads(),
               date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               command=" ".join(sys.argv), hidden=cfg.hidden_size, heads=cfg.num_attention_heads,
               layers=args.layers, B=args.B, L=args.L, rounds=args.rounds,
               fused_median_ms=t["fused"]["median_ms"],
               two_nodes_median_ms=t["two nodes"]["median_ms"],
               fused_min_ms=t["fused"]["min_ms"], two_nodes_min_ms=t["two nodes"]["min_ms"])
    res["saved_per_layer_us"] = (res["two_nodes_median_ms"] - res["fused_median_ms"]) * 1e3 / args.layers
    print(f"fused {res['fused_median_ms']:.2f} ms (min {res['fused_min_ms']:.2f}), two nodes "
          f"{res['two_nodes_median_ms']:.2f} ms (min {res['two_nodes_min_ms']:.2f}): "
          f"{res['saved_per_layer_us']:.0f} us a layer ({args.layers} layers, B{args.B} L{args.L}, "
          f"hidden {cfg.hidden_size}, {res['device']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
