"""What a training step of the dattn encoder launches, op by op (CPU, no GPU needed).

A TorchDispatchMode records every aten op (and the ops inside dattn::fwd / dattn::bwd)
of one training step -- forward and backward, bf16 autocast on the CPU standing in for
fp16 autocast on the GPU, hidden and attention dropout on -- and a TorchFunctionMode
records host reads (tolist / item / bool / nonzero). Running the same encoder with n and
n + 1 layers and subtracting gives what one layer costs; the n-layer count minus n layers
gives the per-step part. test_op_budget.py pins the result; as a script this prints the
audit table of NOTES.md ("Training-step op audit"):

    python tests/python/op_audit.py [--hidden 768 --heads 12 --buckets 256 --B 2 --L 128]
                                    [--hf] [--packed] [--list]

Bytes are what an op's tensors hold (inputs read + outputs written, views 0), the
quantity an elementwise kernel moves through memory.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

try:
    import dattn  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    import dattn  # noqa: F401

from dattn import hf, ops, testing

# Ops that only make views or metadata (no kernel on a GPU).
VIEWS = frozenset({
    "view", "_unsafe_view", "t", "transpose", "permute", "expand", "slice", "select",
    "unsqueeze", "squeeze", "alias", "detach", "as_strided", "reshape", "split", "unbind",
    "resolve_conj", "resolve_neg", "empty", "empty_like", "empty_strided", "new_empty",
})
# Ops the audit is about: copies, casts, fills, index building, host reads.
OVERHEAD = frozenset({
    "clone", "copy_", "_to_copy", "contiguous", "zeros", "zeros_like", "new_zeros", "zero_",
    "fill_", "full", "ones", "ones_like", "cat", "stack", "nonzero", "_local_scalar_dense",
    "index_select", "index_copy", "gather", "scatter", "repeat_interleave", "arange",
    "cumsum",
})
HOST_READS = ("tolist", "item", "__bool__", "nonzero", "__int__", "__float__")


def _nbytes(t) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def _desc(a) -> str:
    if isinstance(a, torch.Tensor):
        s = f"{str(a.dtype).replace('torch.', '')}{list(a.shape)}"
        return s if a.is_contiguous() else s + f"s{list(a.stride())}"
    return ""


class Recorder(TorchDispatchMode):
    """Records (op name, first tensor argument's description, bytes) for every aten op;
    the bodies of dattn::fwd / dattn::bwd are recorded too (they run inside the mode)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        ns = func.namespace
        if ns == "dattn" and name in ("fwd", "bwd"):
            self.ops.append(("dattn." + name, _desc(args[0]), 0))
            body = ops._fwd_impl if name == "fwd" else ops._bwd_impl
            with self:
                return body(*args, **kwargs)
        out = func(*args, **kwargs)
        full = name if ns == "aten" else f"{ns}.{name}"
        if name in VIEWS:
            nb = 0
        else:
            outs = out if isinstance(out, (tuple, list)) else (out,)
            flat = list(args) + [x for v in kwargs.values() for x in (v if isinstance(v, (list, tuple)) else (v,))]
            nb = sum(_nbytes(t) for t in flat) + sum(_nbytes(t) for t in outs)
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        self.ops.append((full, _desc(first) if first is not None else "", nb))
        return out


class HostReads(TorchFunctionMode):
    """Counts host reads of tensor values, except the [seed, offset] int64[2] CPU tensor
    of the dropout RNG (read on the host by design: on a GPU it never lives there)."""

    def __init__(self):
        super().__init__()
        self.reads = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_READS and args and isinstance(args[0], torch.Tensor):
            t = args[0]
            if not (t.dtype == torch.int64 and tuple(t.shape) == (2,)):
                self.reads.append((name, _desc(t)))
        return func(*args, **(kwargs or {}))


def encoder(layers, hidden=64, heads=2, buckets=16, dropout=0.1, use_hf=False, seed=0):
    from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2Encoder

    torch.manual_seed(seed)
    cfg = testing.config("v3", hidden=hidden, heads=heads, layers=layers,
                         intermediate=4 * hidden, max_position=2 * buckets, buckets=buckets,
                         dropout=dropout)
    enc = DebertaV2Encoder(cfg).train()
    if not use_hf:
        hf.patch(enc)
    return enc


def record_step(enc, B, L, packed=False, dtype=torch.bfloat16):
    """One training step (forward, scalar loss, backward) recorded after one warm-up."""
    hidden = enc.layer[0].attention.self.query_proj.in_features
    x = torch.randn(B, L, hidden, requires_grad=True)
    mask = torch.ones(B, L, dtype=torch.long)
    if packed:
        mask[1:, L // 2:] = 0

    def step():
        with torch.autocast("cpu", dtype=dtype):
            # a non-leaf input, as the embeddings' output is (autocast caches the casts
            # of leaf tensors only): layer 0 then costs what every other layer does
            h = x * 1.0
            out = enc(h, mask, output_hidden_states=False, return_dict=True).last_hidden_state
            loss = out.float().pow(2).mean()
        loss.backward()
        for p in enc.parameters():
            p.grad = None
        x.grad = None

    step()
    rec, reads = Recorder(), HostReads()
    with reads, rec:
        step()
    return rec.ops, reads.reads, hf.last_path


def summarise(records):
    """{op: (count, bytes)} of the kernel-launching ops (views dropped)."""
    agg = collections.defaultdict(lambda: [0, 0])
    for name, _, nb in records:
        if name.split(".")[-1] in VIEWS:
            continue
        agg[name][0] += 1
        agg[name][1] += nb
    return {k: tuple(v) for k, v in agg.items()}


def per_layer(n=1, **kw):
    """(per-layer {op: (count, bytes)}, per-step {op: (count, bytes)}, host reads per
    layer, host reads per step, path) from encoders of n and n + 1 layers."""
    B, L, packed = kw.pop("B", 2), kw.pop("L", 64), kw.pop("packed", False)
    a, ra, path = record_step(encoder(n, **kw), B, L, packed)
    b, rb, _ = record_step(encoder(n + 1, **kw), B, L, packed)
    sa, sb = summarise(a), summarise(b)
    layer = {}
    for k in set(sa) | set(sb):
        c = sb.get(k, (0, 0))[0] - sa.get(k, (0, 0))[0]
        nb = sb.get(k, (0, 0))[1] - sa.get(k, (0, 0))[1]
        if c:
            layer[k] = (c, nb)
    step = {}
    for k, (c, nb) in sa.items():
        lc, lb = layer.get(k, (0, 0))
        if c - n * lc:
            step[k] = (c - n * lc, nb - n * lb)
    return layer, step, len(rb) - len(ra), len(ra) - n * (len(rb) - len(ra)), path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--buckets", type=int, default=256)
    ap.add_argument("--B", type=int, default=2)
    ap.add_argument("--L", type=int, default=128)
    ap.add_argument("--hf", action="store_true", help="transformers' own encoder")
    ap.add_argument("--packed", action="store_true", help="pad half of rows 1.. (packed path)")
    ap.add_argument("--list", action="store_true", help="print every op of a 1-layer step")
    a = ap.parse_args(argv)
    kw = dict(hidden=a.hidden, heads=a.heads, buckets=a.buckets, use_hf=a.hf)
    if a.list:
        recs, reads, path = record_step(encoder(1, **kw), a.B, a.L, a.packed)
        for i, (name, d, nb) in enumerate(recs):
            print(f"{i:4d} {name:40s} {nb:>10d} {d}")
        print("host reads:", reads)
        return
    layer, step, rl, rs, path = per_layer(2, B=a.B, L=a.L, packed=a.packed, **kw)
    print(f"path {path}; per layer: {sum(c for c, _ in layer.values())} kernel ops, "
          f"{rl} host reads; per step: {sum(c for c, _ in step.values())} ops, {rs} host reads")
    for title, d in (("per layer", layer), ("per step (beyond the layers)", step)):
        print(f"\n{title}\n| op | count | MB | overhead class |\n| --- | ---: | ---: | --- |")
        for k, (c, nb) in sorted(d.items(), key=lambda kv: -kv[1][1]):
            tag = "yes" if k.split(".")[-1] in OVERHEAD else ""
            print(f"| {k} | {c} | {nb / 1e6:.2f} | {tag} |")


if __name__ == "__main__":
    main()
