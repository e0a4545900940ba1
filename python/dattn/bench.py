"""``python -m dattn bench``: the encoder benchmark protocol (issue 7).

What is measured
  The full encoder (embeddings + every layer; DebertaV2Model, no task head) of
  deberta-v3-base's shape (hidden 768, 12 heads of 64, FFN 3072, 12 layers, position
  buckets 256, max_relative_positions -1, share_att_key, c2p|p2c, vocabulary 128100 on
  the GPU), random weights (fixed seed), eval, no autograd (torch.inference_mode).
  Sweep: L in {64, ..., 8192}, B in {1, 16}, fp16 / bf16 / fp32, two layouts:

  padded  every row is L real tokens (attention_mask all ones): the plain [B, L] case.
  packed  variable-length rows, right padded to L: row b of B has
          round(L * (1 - 0.75 * b / (B - 1))) tokens (evenly spaced from L down to L/4;
          37.5% padding at B = 16, one full row so the padded length is L). Every
          implementation gets its best path for such a batch: dattn `mode="packed"`,
          disentangled-flash `forward_packed` (its own pack/unpack timed too), FlashDeBERTa
          its own choice (its varlen kernel from L = 1024 on), transformers and the SDPA
          floor the padded batch with its mask (they have no packed path).
          With B = 1 there is no padding, so packed == padded: B = 1 runs only "padded"
          and the tables show it once.

  Implementations, side by side on the same weights and inputs:
    transformers        transformers' own eager DebertaV2 encoder
    sdpa                the "SDPA floor": the same encoder with each DisentangledSelfAttention
                        replaced by plain torch SDPA on the same Q/K/V (no position terms,
                        key padding mask only when the batch has padding; attention
                        dropout in training): what the attention would cost without
                        DeBERTa's position terms (``sdpa_floor`` below)
    dattn               dattn.patch(model, mode="padded" | "packed")
    disentangled-flash  disentangled_flash.optimize_deberta(model, sequence_lengths=[L])
                        (its README's usage; Triton backend, heuristic/profile tuning as it
                        picks by itself), packed: encoder.forward_packed
    flashdeberta        FlashDeBERTa's FlashDisentangledSelfAttention in place of every
                        DisentangledSelfAttention (same weights; it subclasses it)
  A peer that cannot be imported or run is skipped with one line that says why.

Timing: one warm-up call (Triton JIT, allocator), more warm-up for short calls, then a probe
call decides the repetitions (about --target seconds per measurement, at least 3, at most
100); each repetition is timed by a pair of CUDA events (wall clock with a device sync on
the CPU); the median is reported, every repetition is kept in the JSON. Peak memory:
torch.cuda.max_memory_allocated() over one call after reset_peak_memory_stats() (weights,
inputs and the call's own memory), and the call's own part ("extra": peak minus what was
allocated before the call). Out of memory is recorded as "oom"; a longer L of the same
implementation/dtype/B/layout after an OOM, or after one call longer than --slow seconds,
is skipped and says so; the whole sweep stops starting new cases after --budget seconds.
"""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

IMPLS = ("transformers", "sdpa", "dattn", "disentangled-flash", "flashdeberta")
PEERS = {"disentangled-flash": "disentangled_flash", "flashdeberta": "flashdeberta"}
LAYOUTS = ("padded", "packed")
DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
FULL_LENGTHS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
QUICK_LENGTHS = (128, 512, 2048, 8192)


def packed_lengths(B: int, L: int) -> list[int]:
    """Token counts of the "packed" case: evenly spaced from L down to L/4 (row 0 full)."""
    if B == 1:
        return [L]
    return [max(1, int(round(L * (1 - 0.75 * b / (B - 1))))) for b in range(B)]


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


# ---- environment --------------------------------------------------------------------


def environment(device: str) -> dict:
    import torch

    from . import __version__, _lib

    env = {"python": platform.python_version(), "torch": torch.__version__,
           "dattn": __version__, "library": _lib.build_info(),
           "platform": platform.platform(), "device": device}
    try:
        import transformers

        env["transformers"] = transformers.__version__
    except ImportError:  # pragma: no cover
        env["transformers"] = None
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception:
        env["triton"] = None
    for name, mod in PEERS.items():
        env[name] = peer_version(mod)
    if device.startswith("cuda"):
        idx = torch.device(device).index or 0
        env["card"] = torch.cuda.get_device_name(idx)
        env["capability"] = ".".join(map(str, torch.cuda.get_device_capability(idx)))
        env["cuda"] = torch.version.cuda
        try:
            env["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[idx]
        except Exception:
            env["driver"] = None
    else:
        env["card"] = platform.processor() or platform.machine()
        env["driver"] = None
    # DATTN_GIT_COMMIT first: a copied tree (the GPU machine's) may carry a stale .git
    env["git"] = os.environ.get("DATTN_GIT_COMMIT") or None
    if env["git"] is None:
        try:
            root = Path(__file__).resolve().parents[2]
            env["git"] = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                                        capture_output=True, text=True, timeout=10).stdout.strip() or None
        except Exception:
            env["git"] = None
    return env


def peer_version(mod: str):
    try:
        from importlib import metadata

        return metadata.version({"disentangled_flash": "disentangled-flash"}.get(mod, mod))
    except Exception:
        return None


# ---- implementations ----------------------------------------------------------------
#
# Each adapter: check(device) -> None or the reason it cannot run here; enter(model, case)
# installs it on the model (same weights); fn() runs one forward and returns the hidden
# states; leave() restores transformers' own model exactly.


class Case:
    def __init__(self, B, L, dtype, layout, ids, mask, lengths):
        self.B, self.L, self.dtype, self.layout = B, L, dtype, layout
        self.ids, self.mask, self.lengths = ids, mask, lengths
        self.has_padding = sum(lengths) < B * L


class Transformers:
    name = "transformers"

    def check(self, device):
        return None

    def enter(self, model, case):
        self.m, self.c = model, case

    def fn(self):
        return self.m(self.c.ids, attention_mask=self.c.mask).last_hidden_state

    def leave(self):
        pass


def sdpa_floor_forward(padded: bool):
    """A DisentangledSelfAttention.forward that runs plain torch SDPA on the layer's own
    Q/K/V projections: no position terms, the key padding mask only when ``padded``
    (decided once per batch by the caller: no host sync inside), attention dropout (the
    module's rate) in training, as transformers' layer applies it to the probabilities.
    The "SDPA floor" of the encoder benchmarks (this module, bench/gpu_train_bench.py)."""
    import torch.nn.functional as F

    def sdpa_forward(att, hidden_states, attention_mask, output_attentions=False,
                     query_states=None, relative_pos=None, rel_embeddings=None):
        B, L, _ = hidden_states.shape
        H = att.num_attention_heads
        q = att.query_proj(hidden_states).view(B, L, H, -1).transpose(1, 2)
        k = att.key_proj(hidden_states).view(B, L, H, -1).transpose(1, 2)
        v = att.value_proj(hidden_states).view(B, L, H, -1).transpose(1, 2)
        m = None
        if padded and attention_mask is not None:
            # transformers hands [B, 1, L, L] = mask_i * mask_j; its row 0 is the key
            # mask (token 0 is real): [B, 1, 1, L]
            m = (attention_mask[:, :, :1, :] if attention_mask.dim() == 4
                 else attention_mask[:, None, None, :]).bool()
        drop = getattr(att.dropout, "p", getattr(att.dropout, "drop_prob", 0.0)) if att.training else 0.0
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=drop)
        return (o.transpose(1, 2).reshape(B, L, -1), None)

    return sdpa_forward


class sdpa_floor:
    """Context manager: every DisentangledSelfAttention (class-wide) runs
    ``sdpa_floor_forward(padded)`` inside the block; transformers' forward after it."""

    def __init__(self, padded: bool = False):
        self.padded = padded

    def __enter__(self):
        from transformers.models.deberta_v2 import modeling_deberta_v2 as mdv2

        self.cls = mdv2.DisentangledSelfAttention
        self.orig = self.cls.__dict__["forward"]
        self.cls.forward = sdpa_floor_forward(self.padded)
        return self

    def __exit__(self, *exc):
        self.cls.forward = self.orig
        return False


class SdpaFloor(Transformers):
    name = "sdpa"

    def enter(self, model, case):
        self.m, self.c = model, case
        self.ctx = sdpa_floor(padded=case.has_padding)
        self.ctx.__enter__()

    def leave(self):
        self.ctx.__exit__(None, None, None)


class Dattn(Transformers):
    name = "dattn"

    def check(self, device):
        from . import _lib

        if device.startswith("cuda"):
            ok, why = _lib.device_supported(_lib.DEVICE_CUDA, -1)
            return None if ok else f"libdattn cannot run on CUDA here: {why}"
        return None

    def enter(self, model, case):
        from . import hf

        self.m, self.c = model, case
        self.mode = "packed" if case.layout.startswith("packed") else "padded"
        # "packed-graphs": the packed path replaying CUDA graphs (inference on a GPU)
        hf.patch(model, mode=self.mode, cuda_graphs=case.layout == "packed-graphs")

    def path(self):
        from . import hf

        return hf.last_path

    def leave(self):
        from . import hf

        hf.unpatch(self.m)


class DisentangledFlash(Transformers):
    name = "disentangled-flash"
    backend = os.environ.get("DATTN_BENCH_DF_BACKEND", "triton")  # "torch": CPU self-test

    def check(self, device):
        try:
            import disentangled_flash  # noqa: F401
        except Exception as e:
            return f"import failed: {type(e).__name__}: {str(e)[:160]}"
        if self.backend == "triton" and not device.startswith("cuda"):
            return "its Triton backend needs a CUDA device"
        return None

    def enter(self, model, case):
        import disentangled_flash as df

        self.m, self.c = model, case
        self.enc = model.encoder
        self.selfs = [layer.attention.self for layer in model.encoder.layer]
        df.optimize_deberta(model, backend=self.backend, sequence_lengths=[case.L])
        if model.encoder is self.enc:
            self.leave()
            raise RuntimeError("optimize_deberta left the model unchanged (backend "
                               "unsupported here)")
        self.df = df
        self.packed = case.layout == "packed" and case.has_padding

    def fn(self):
        if not self.packed:
            return self.m(self.c.ids, attention_mask=self.c.mask).last_hidden_state
        m, c, df = self.m, self.c, self.df
        emb = m.embeddings(input_ids=c.ids, mask=c.mask)
        tokens, cu, info = df.pack_padded_with_info(emb, c.mask)
        out = m.encoder.forward_packed(tokens, cu, info.max_seqlen, packed_info=info,
                                       output_hidden_states=False).last_hidden_state
        return df.unpack_packed(out, cu, c.L, packed_info=info)[0]

    def leave(self):
        self.m.encoder = self.enc
        for layer, s in zip(self.enc.layer, self.selfs):
            layer.attention.self = s


class FlashDeberta(Transformers):
    name = "flashdeberta"

    def check(self, device):
        try:
            import flashdeberta  # noqa: F401
        except Exception as e:
            return f"import failed: {type(e).__name__}: {str(e)[:160]}"
        if not device.startswith("cuda"):
            return "its Triton kernels need a CUDA device"
        return None

    def enter(self, model, case):
        from flashdeberta.model import FlashDisentangledSelfAttention
        from transformers.models.deberta_v2 import modeling_deberta_v2 as mdv2

        self.m, self.c = model, case
        self.orig_cls = mdv2.DisentangledSelfAttention
        for layer in model.encoder.layer:
            layer.attention.self.__class__ = FlashDisentangledSelfAttention

    def leave(self):
        for layer in self.m.encoder.layer:
            layer.attention.self.__class__ = self.orig_cls


ADAPTERS = {"transformers": Transformers, "sdpa": SdpaFloor, "dattn": Dattn,
            "disentangled-flash": DisentangledFlash, "flashdeberta": FlashDeberta}


# ---- timing -------------------------------------------------------------------------


def _is_oom(e: BaseException) -> bool:
    import torch

    return isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower()


def measure(fn, device, target_s=0.25, min_reps=3, max_reps=100, reps=None):
    """(median seconds, every repetition's seconds, warm-up seconds): see the module doc."""
    import torch

    cuda = device.startswith("cuda")

    def sync():
        if cuda:
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    fn()
    sync()
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    fn()
    sync()
    probe = time.perf_counter() - t0
    extra, spent = 0, 0.0
    while probe < 0.02 and extra < 10 and spent < 0.1:  # short calls: warm up the clocks
        t0 = time.perf_counter()
        fn()
        sync()
        spent += time.perf_counter() - t0
        extra += 1
    n = reps or max(min_reps, min(max_reps, int(target_s / max(probe, 1e-6))))
    times = []
    if cuda:
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(n)]
        for a, b in ev:
            a.record()
            fn()
            b.record()
        torch.cuda.synchronize()
        times = [a.elapsed_time(b) / 1e3 for a, b in ev]
    else:
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    s = sorted(times)
    return s[len(s) // 2], times, warm


def peak_memory(fn, device):
    """(peak bytes, extra bytes) of one call on CUDA; (None, None) elsewhere."""
    import torch

    if not device.startswith("cuda"):
        return None, None
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del out
    return peak, peak - base


# ---- the sweep ----------------------------------------------------------------------


def build_model(layers, dtype, device, seed, vocab):
    import torch
    from transformers import DebertaV2Model

    from . import testing

    torch.manual_seed(seed)
    cfg = testing.v3_base(layers=layers, vocab=vocab)
    with torch.device(device):
        model = DebertaV2Model(cfg)
    return model.to(dtype=dtype).eval(), cfg


def make_case(B, L, dtype, layout, vocab, device, seed):
    import torch

    from . import testing

    g = torch.Generator().manual_seed(seed * 7919 + B * 131 + L)
    lengths = packed_lengths(B, L) if layout == "packed" else [L] * B
    ids = torch.randint(1, vocab, (B, L), generator=g)
    mask = testing.lengths_mask(lengths, L, "right")
    ids = ids * mask  # pad id 0 where padded, as a tokenizer would
    return Case(B, L, dtype, layout, ids.to(device), mask.to(device), lengths)


def run_sweep(args, log=print) -> dict:
    import torch

    device = args.device
    on_gpu = device.startswith("cuda")
    if on_gpu:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    adapters = {name: ADAPTERS[name]() for name in args.impls}
    skipped = {}
    for name, a in list(adapters.items()):
        why = a.check(device)
        if why is not None:
            skipped[name] = why
            log(f"skipping {name}: {why}")
            del adapters[name]
    res = {"meta": {"protocol": "dattn bench (issue 7)", "command": args.command,
                    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "env": environment(device), "layers": args.layers, "vocab": args.vocab,
                    "seed": args.seed, "lengths": args.lengths, "batches": args.batches,
                    "dtypes": args.dtypes, "layouts": args.layouts, "impls": args.impls,
                    "target_s": args.target, "budget_s": args.budget, "slow_s": args.slow,
                    "packed_rule": "row b of B: round(L*(1-0.75*b/(B-1))) tokens, right "
                                   "padded; B=1 runs only 'padded' (no padding possible)",
                    "skipped_impls": skipped},
           "runs": []}
    t_start = time.perf_counter()
    budget_hit = False
    for dname in args.dtypes:
        dtype = getattr(torch, DTYPES[dname])
        model, cfg = build_model(args.layers, dtype, device, args.seed, args.vocab)
        blocked = {}  # (impl, B, layout) -> reason larger L are skipped
        for B in args.batches:
            for layout in args.layouts:
                if layout == "packed" and B == 1:
                    continue
                for L in args.lengths:
                    case = make_case(B, L, dname, layout, args.vocab, device, args.seed)
                    for name, a in adapters.items():
                        row = {"impl": name, "dtype": dname, "B": B, "L": L, "layout": layout,
                               "tokens": int(sum(case.lengths)),
                               "padding": 1 - sum(case.lengths) / (B * L)}
                        key = (name, B, layout)
                        elapsed = time.perf_counter() - t_start
                        if args.budget and elapsed > args.budget:
                            if not budget_hit:
                                log(f"time budget of {args.budget:.0f}s spent: the remaining "
                                    "cases are recorded as skipped")
                                budget_hit = True
                            row.update(status="skipped", reason="time budget")
                        elif key in blocked:
                            row.update(status="skipped", reason=blocked[key])
                        else:
                            _run_one(a, model, case, row, args, device)
                            if row["status"] == "oom":
                                blocked[key] = f"OOM at L={L}"
                            elif row["status"] == "ok" and row["ms"] / 1e3 > args.slow:
                                blocked[key] = (f"L={L} took {row['ms'] / 1e3:.1f}s per call "
                                                f"(> --slow {args.slow}s)")
                        res["runs"].append(row)
                        log(_line(row))
                    del case
        del model
        gc.collect()
        if on_gpu:
            torch.cuda.empty_cache()
    res["meta"]["seconds"] = time.perf_counter() - t_start
    return res


def _run_one(a, model, case, row, args, device):
    import torch

    entered = False
    try:
        a.enter(model, case)
        entered = True

        def fn():
            with torch.inference_mode():
                return a.fn()

        med, times, warm = measure(fn, device, args.target, reps=args.reps)
        row.update(status="ok", ms=med * 1e3, reps=len(times),
                   times_ms=[round(t * 1e3, 4) for t in times], warmup_ms=warm * 1e3)
        if isinstance(a, Dattn):
            row["path"] = a.path()
            if not str(row["path"]).startswith(("padded", "packed")):
                row["status"] = "fallback"
        peak, extra = peak_memory(fn, device)
        if peak is not None:
            row["peak_mb"] = peak / 2**20
            row["extra_mb"] = extra / 2**20
    except Exception as e:  # OOM, or a peer that fails on this shape/dtype
        row.pop("ms", None)
        if _is_oom(e):
            row.update(status="oom")
        else:
            row.update(status="error", error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
                       if str(e) else type(e).__name__)
    finally:
        if entered:
            try:
                a.leave()
            except Exception as e:  # pragma: no cover
                row["leave_error"] = str(e)[:200]
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def _line(r):
    what = f"{r['dtype']} B={r['B']:<2} L={r['L']:<5} {r['layout']:<6} {r['impl']:<18}"
    if r["status"] == "ok":
        mem = f"  peak {r['peak_mb']:.0f} MB" if r.get("peak_mb") is not None else ""
        return f"{what} {r['ms']:10.3f} ms  ({r['reps']} reps){mem}"
    return f"{what} {r['status']}: {r.get('reason') or r.get('error') or r.get('path') or ''}"


# ---- tables and plots ---------------------------------------------------------------


def _cell(r):
    if r is None:
        return "-"
    if r["status"] == "ok":
        return f"{r['ms']:.2f}"
    if r["status"] == "oom":
        return "OOM"
    if r["status"] == "skipped" and str(r.get("reason", "")).startswith("OOM"):
        return "(OOM)"
    return {"skipped": "skip", "error": "err", "fallback": "fallback"}.get(r["status"], "?")


def groups(res):
    """(dtype, B, layout) in sweep order."""
    seen = []
    for r in res["runs"]:
        k = (r["dtype"], r["B"], r["layout"])
        if k not in seen:
            seen.append(k)
    return seen


def tables(res) -> str:
    from .__main__ import _table

    impls = [i for i in res["meta"]["impls"] if i not in res["meta"]["skipped_impls"]]
    runs = res["runs"]
    idx = {(r["dtype"], r["B"], r["layout"], r["L"], r["impl"]): r for r in runs}
    out = []
    for (d, B, lay) in groups(res):
        Ls = sorted({r["L"] for r in runs if (r["dtype"], r["B"], r["layout"]) == (d, B, lay)})
        rows = []
        for L in Ls:
            rows.append([L] + [_cell(idx.get((d, B, lay, L, i))) for i in impls] +
                        [_fmt_mb(idx.get((d, B, lay, L, i))) for i in impls])
        out.append(f"\n{d}, B={B}, {lay}: median ms per forward | peak MB")
        out.append(_table(rows, ["L"] + impls + [f"MB {i}" for i in impls]))
    out.append("\nGeometric mean over L of (other / dattn) forward time, on the L where both "
               "ran (>1: dattn faster); n = number of L")
    others = [i for i in impls if i != "dattn"]
    rows = []
    for (d, B, lay) in groups(res):
        row = [d, B, lay]
        for o in others:
            g, n = speedup(res, d, B, lay, o, "dattn")
            row.append("-" if g is None else f"{g:.2f}x (n={n})")
        rows.append(row)
    if "dattn" in impls:
        out.append(_table(rows, ["dtype", "B", "layout"] + [f"{o}/dattn" for o in others]))
    return "\n".join(out)


def _fmt_mb(r):
    if r is None or r.get("peak_mb") is None:
        return "-"
    return f"{r['peak_mb']:.0f}"


def speedup(res, d, B, lay, other, ref):
    idx = {(r["L"], r["impl"]): r for r in res["runs"]
           if (r["dtype"], r["B"], r["layout"]) == (d, B, lay) and r["status"] == "ok"}
    ratios = [idx[(L, other)]["ms"] / idx[(L, ref)]["ms"]
              for (L, i) in idx if i == ref and (L, other) in idx]
    return geomean(ratios), len(ratios)


def plot(res, out_dir: Path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    gs = groups(res)
    dtypes = list(dict.fromkeys(g[0] for g in gs))
    cols = list(dict.fromkeys((g[1], g[2]) for g in gs))
    impls = [i for i in res["meta"]["impls"] if i not in res["meta"]["skipped_impls"]]
    env = res["meta"]["env"]
    files = []
    for key, ylabel, fname in (("ms", "ms per forward (median)", "bench_latency.png"),
                               ("peak_mb", "peak memory, MB", "bench_memory.png")):
        if key == "peak_mb" and not any(r.get("peak_mb") for r in res["runs"]):
            continue
        fig, axes = plt.subplots(len(dtypes), len(cols), squeeze=False,
                                 figsize=(4.2 * len(cols), 3.4 * len(dtypes)))
        for i, d in enumerate(dtypes):
            for j, (B, lay) in enumerate(cols):
                ax = axes[i][j]
                for name in impls:
                    pts = sorted((r["L"], r[key]) for r in res["runs"]
                                 if (r["dtype"], r["B"], r["layout"], r["impl"]) == (d, B, lay, name)
                                 and r["status"] == "ok" and r.get(key) is not None)
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                                label=name)
                    oom = [r["L"] for r in res["runs"]
                           if (r["dtype"], r["B"], r["layout"], r["impl"]) == (d, B, lay, name)
                           and r["status"] == "oom"]
                    if oom and pts:
                        ax.plot(oom, [pts[-1][1]] * len(oom), marker="x", ls="", color="red")
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_title(f"{d}, B={B}, {lay}", fontsize=9)
                ax.set_xlabel("L")
                if j == 0:
                    ax.set_ylabel(ylabel)
                ax.grid(True, which="both", lw=0.3)
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"DeBERTa-v3-base encoder ({res['meta']['layers']} layers), "
                     f"{env.get('card')}; x = OOM", fontsize=10)
        fig.tight_layout()
        p = out_dir / fname
        fig.savefig(p, dpi=100)
        plt.close(fig)
        files.append(p)
    return files


# ---- the command --------------------------------------------------------------------


def _csv(s, conv=str):
    return [conv(x) for x in s.split(",") if x.strip()]


def add_arguments(p):
    p.add_argument("--out", default="bench/results/latest",
                   help="output directory (bench.json, bench_latency.png, bench_memory.png)")
    p.add_argument("--lengths", "--seqlens", dest="lengths",
                   help="comma-separated L (default 64..8192 on GPU, 64,128 on CPU)")
    p.add_argument("--batches", "--batch", dest="batches",
                   help="comma-separated B (default 1,16 on GPU, 1,2 on CPU)")
    p.add_argument("--dtypes", "--dtype", dest="dtypes",
                   help="comma-separated of fp16,bf16,fp32 (default all on GPU, fp32 on CPU)")
    p.add_argument("--layouts", help="comma-separated of padded,packed (default both)")
    p.add_argument("--impls", help=f"comma-separated of {','.join(IMPLS)} (default all)")
    p.add_argument("--layers", type=int, help="encoder layers (default 12 on GPU, 1 on CPU)")
    p.add_argument("--vocab", type=int, help="vocabulary (default 128100 on GPU, 1000 on CPU)")
    p.add_argument("--quick", action="store_true",
                   help="fp16 only, L in 128,512,2048,8192, shorter measurements")
    p.add_argument("--target", type=float, help="seconds of timed runs per measurement "
                   "(default 0.25; 0.1 with --quick)")
    p.add_argument("--reps", "--iters", dest="reps", type=int,
                   help="fixed number of timed runs (default: from --target)")
    p.add_argument("--budget", type=float, help="stop starting cases after this many "
                   "seconds (default: none, the whole sweep runs; scripts/gpu_bench7.sh passes "
                   "one that fits the device tool's 10-minute calls)")
    p.add_argument("--slow", type=float, default=3.0,
                   help="skip longer L of an implementation after a call slower than this (s)")


def cmd_bench(args) -> int:
    import torch

    from .__main__ import best_device

    device = args.device or best_device()
    on_gpu = device.startswith("cuda")
    args.device = device
    args.command = "python -m dattn " + " ".join(getattr(args, "argv", ["bench"]))
    if args.lengths:
        args.lengths = _csv(args.lengths, int)
    else:
        args.lengths = list(QUICK_LENGTHS if args.quick else FULL_LENGTHS) if on_gpu else [64, 128]
    args.batches = _csv(args.batches, int) if args.batches else ([1, 16] if on_gpu else [1, 2])
    if args.dtypes:
        args.dtypes = _csv(args.dtypes)
    else:
        args.dtypes = (["fp16"] if args.quick else ["fp16", "bf16", "fp32"]) if on_gpu else ["fp32"]
    args.layouts = _csv(args.layouts) if args.layouts else list(LAYOUTS)
    args.impls = _csv(args.impls) if args.impls else list(IMPLS)
    for what, got, allowed in (("dtypes", args.dtypes, DTYPES), ("layouts", args.layouts, LAYOUTS),
                               ("impls", args.impls, IMPLS)):
        bad = [x for x in got if x not in allowed]
        if bad:
            print(f"dattn bench: unknown {what} {bad}; one of {list(allowed)}", file=sys.stderr)
            return 2
    args.layers = args.layers or (12 if on_gpu else 1)
    args.vocab = args.vocab or (128100 if on_gpu else 1000)
    args.target = args.target or (0.1 if args.quick else 0.25)
    if args.budget is None:
        args.budget = 0  # no budget: a user's one command runs the whole protocol
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"dattn bench: DeBERTa-v3-base-shaped encoder, {args.layers} layers, device {device}, "
          f"dtypes {args.dtypes}, B {args.batches}, L {args.lengths}, layouts {args.layouts}",
          flush=True)
    log = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    res = run_sweep(args, log=lambda s: log(s) if not s.startswith("skipping") else print(s))
    path = out_dir / "bench.json"
    path.write_text(json.dumps(res, indent=1) + "\n")
    print(tables(res))
    print(f"\nwrote {path}")
    for p in plot(res, out_dir):
        print(f"wrote {p}")
    bad = [r for r in res["runs"] if r["impl"] == "dattn" and r["status"] in ("error", "fallback")]
    for r in bad:
        print(f"dattn did not run: {_line(r)}")
    print(f"sweep took {res['meta']['seconds']:.0f}s")
    del torch
    return 1 if bad else 0
