#!/usr/bin/env python3
"""Kernel launches of one encoder training step, counted on the CPU (no GPU needed).

The step of bench/gpu_train_bench.py (DeBERTa-v3-base's encoder: hidden 768, 12 heads,
FFN 3072, 256 buckets, share_att_key, c2p|p2c; random weights; training mode with hidden
and attention dropout 0.1; autocast over fp32 weights; forward on random hidden states
with a full mask, loss = mean of squared outputs, backward; grads set to None) is run
once to warm up and once under a TorchDispatchMode that counts the aten ops that launch
a kernel on a GPU (views, allocations and metadata ops do not).

CPU stand-ins for what the GPU does, so that the count is the GPU's:
* autocast bf16 on the CPU for fp16 on the GPU (the same ops are cast, the same casts
  cached);
* dropout: on CUDA F.dropout is one native_dropout launch (and one
  native_dropout_backward); on the CPU it decomposes into bernoulli_ / div_ / mul, so
  F.dropout is routed to torch.native_dropout while counting (every side alike);
* dattn::fwd / dattn::bwd count as one op each (on the GPU the forward is 1 kernel plus
  a prologue, the backward di + kv1 + kv0 + reduces: `--dattn-kernels F,B` weighs them);
  the CPU-only draw of dattn's dropout seed (torch.randint: host-side on CUDA) is not
  counted.

Sides: transformers' unpatched encoder, dattn with the lean projections (hf.py's
default) and dattn calling the nn.Linear modules one by one (DATTN_HF_LEAN=0, the former
formulation). Per layer = count(n + 1 layers) - count(n layers); per step = the
12-layer count.

    python3 bench/count_ops.py [--layers 12] [--B 1] [--L 32] [--list SIDE] [--json PATH]
                               [--host-time]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

_ROOT = Path(__file__).resolve().parents[1]
try:
    import dattn  # noqa: F401
except ImportError:
    sys.path.insert(0, str(_ROOT / "python"))
    import dattn  # noqa: F401

from dattn import hf, testing  # noqa: E402

# aten ops that launch nothing on a GPU: views, allocations, metadata.
NO_LAUNCH = frozenset({
    "view", "_unsafe_view", "t", "transpose", "permute", "expand", "slice", "select",
    "unsqueeze", "squeeze", "alias", "detach", "as_strided", "reshape", "split", "unbind",
    "resolve_conj", "resolve_neg", "empty", "empty_like", "empty_strided", "new_empty",
    "_reshape_alias", "lift_fresh", "_to_copy_noop",
})
# Host-side on CUDA (the dropout seed of dattn's CPU backend).
HOST_ONLY = frozenset({"randint"})

SIDES = ("transformers", "dattn", "dattn-old")


class Counter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        ns = func.namespace
        full = name if ns == "aten" else f"{ns}.{name}"
        if name not in NO_LAUNCH and name not in HOST_ONLY:
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            d = "" if first is None else \
                f"{str(first.dtype).replace('torch.', '')}{list(first.shape)}"
            self.ops.append((full, d))
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def gpu_like_dropout():
    """F.dropout as CUDA runs it in training (one native_dropout launch)."""
    orig = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if training and 0.0 < p < 1.0 and input.numel() > 0 and not inplace:
            return torch.native_dropout(input, p, True)[0]
        return orig(input, p, training, inplace)

    F.dropout = dropout
    try:
        yield
    finally:
        F.dropout = orig


def make_encoder(side, layers, dropout=0.1):
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Encoder

    torch.manual_seed(0)
    cfg = testing.v3_base(layers=layers, dropout=dropout, attention_dropout=dropout)
    enc = DebertaV2Encoder(cfg).train()
    if side != "transformers":
        hf.patch(enc)
    return enc


def count_step(side, layers, B, L, dtype=torch.bfloat16):
    enc = make_encoder(side, layers)
    x = torch.randn(B, L, enc.layer[0].attention.self.query_proj.in_features)
    mask = torch.ones(B, L, dtype=torch.long)
    params = list(enc.parameters())

    def step():
        with torch.autocast("cpu", dtype=dtype):
            h = x * 1.0  # a non-leaf input, as the embeddings' output is
            out = enc(h, mask, output_hidden_states=False, return_dict=True).last_hidden_state
            loss = out.float().pow(2).mean()
        loss.backward()
        for p in params:
            p.grad = None

    old = hf.LEAN_PROJECTIONS
    hf.LEAN_PROJECTIONS = side != "dattn-old"
    try:
        with gpu_like_dropout():
            step()
            c = Counter()
            with c:
                step()
        path = hf.last_path if side != "transformers" else "transformers"
    finally:
        hf.LEAN_PROJECTIONS = old
    return c.ops, path


def host_time(sides, reps=10, steps=10):
    """CPU time per training step of a tiny encoder (12 layers, hidden 32, 2 heads, B1
    L4, bf16 autocast, dropout 0.1), sides interleaved, min over reps: the host cost of
    each formulation where compute is small (a proxy for the Python + dispatch part of a
    GPU step's host time; CPU bf16 GEMMs are not free, so it over-weights GEMMs)."""
    import time
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Encoder

    cfg = testing.config("v3", hidden=32, heads=2, layers=12, buckets=16, dropout=0.1)
    torch.manual_seed(0)
    encs = {}
    for side in sides:
        e = DebertaV2Encoder(cfg).train()
        if side != "transformers":
            hf.patch(e)
        encs[side] = e
    x = torch.randn(1, 4, 32)
    mask = torch.ones(1, 4, dtype=torch.long)

    def step(e):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = e(x * 1.0, mask).last_hidden_state
            loss = out.float().pow(2).mean()
        loss.backward()
        for p in e.parameters():
            p.grad = None

    res = {s: [] for s in sides}
    old, threads = hf.LEAN_PROJECTIONS, torch.get_num_threads()
    torch.set_num_threads(1)  # no intra-op thread pool overhead per op
    try:
        for _ in range(reps):
            for s, e in encs.items():
                hf.LEAN_PROJECTIONS = s != "dattn-old"
                step(e)
                t = time.process_time()
                for _ in range(steps):
                    step(e)
                res[s].append((time.process_time() - t) / steps * 1e3)
    finally:
        hf.LEAN_PROJECTIONS = old
        torch.set_num_threads(threads)
    return {s: min(v) for s, v in res.items()}


def totals(ops, dattn_kernels):
    n = len(ops)
    fwd_k, bwd_k = dattn_kernels
    gpu = n + sum((fwd_k - 1) if o == "dattn.fwd" else (bwd_k - 1) if o == "dattn.bwd" else 0
                  for o, _ in ops)
    return n, gpu


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--L", type=int, default=32)
    ap.add_argument("--sides", default=",".join(SIDES))
    ap.add_argument("--dattn-kernels", default="2,5",
                    help="GPU kernels per dattn::fwd, dattn::bwd call (H200 fp16: 2,5)")
    ap.add_argument("--list", default=None, help="print every counted op of the 1-layer "
                    "step of SIDE")
    ap.add_argument("--json", default=None)
    ap.add_argument("--host-time", action="store_true",
                    help="also the CPU time per step of a tiny encoder per side")
    a = ap.parse_args(argv)
    dk = tuple(int(v) for v in a.dattn_kernels.split(","))
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    res = {}
    for side in a.sides.split(","):
        ops_n, path = count_step(side, a.layers, a.B, a.L)
        ops_1, _ = count_step(side, 1, a.B, a.L)
        ops_2, _ = count_step(side, 2, a.B, a.L)
        step_n, step_gpu = totals(ops_n, dk)
        l1, l1g = totals(ops_1, dk)
        l2, l2g = totals(ops_2, dk)
        c1 = collections.Counter(o for o, _ in ops_1)
        c2 = collections.Counter(o for o, _ in ops_2)
        per_layer_ops = {k: c2[k] - c1[k] for k in sorted(set(c1) | set(c2)) if c2[k] != c1[k]}
        res[side] = dict(path=path, step_ops=step_n, step_gpu_launches=step_gpu,
                         layer_ops=l2 - l1, layer_gpu_launches=l2g - l1g,
                         per_layer=per_layer_ops)
        print(f"{side:13s} ({path}): {a.layers} layers: {step_n} ops per step "
              f"({step_gpu} GPU launches with dattn fwd/bwd = {dk[0]}/{dk[1]} kernels); "
              f"per layer {l2 - l1} ops ({l2g - l1g} launches)", flush=True)
        print("    per layer: " + ", ".join(f"{k} {v}" for k, v in
                                             sorted(per_layer_ops.items(), key=lambda kv: -kv[1])))
        if a.list == side:
            for o, d in ops_1:
                print(f"      {o:36s} {d}")
    if a.host_time:
        ht = host_time(a.sides.split(","))
        for side, ms in ht.items():
            res[side]["tiny_host_ms"] = ms
        print("tiny-encoder CPU ms per step (min): " +
              ", ".join(f"{k} {v:.2f}" for k, v in ht.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(layers=a.layers, B=a.B, L=a.L, dattn_kernels=dk, sides=res), f,
                      indent=1)


if __name__ == "__main__":
    main()
