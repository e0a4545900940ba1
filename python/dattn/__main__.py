"""Command line: ``python -m dattn`` (installed as ``dattn``).

  demo      a deberta-v3-base-shaped model (random weights) on the best device: parity
            and speed of dattn (padded and packed) against transformers, as a table
  bench     the encoder benchmark (v3-base shape, L 64..8192, B 1/16, fp16/bf16/fp32,
            padded and packed): transformers, the SDPA floor, dattn and the peers
            disentangled-flash / FlashDeBERTa when installed; JSON, tables, PNG plots
  mnli      MNLI-shaped end-to-end run (deberta-v2-xlarge architecture, 9,815 examples of
            MNLI-like lengths, B=16): total time and prediction agreement; JSON
  check     the parity suite (every config kind, padded and packed, forward and
            gradients) on this machine's device
  hub-repo  writes the local `kernels` layer repository (see dattn.hub)
  info      library, build and device support
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time


_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


# ---- helpers ------------------------------------------------------------------------


def _torch():
    import torch

    return torch


def best_device() -> str:
    torch = _torch()
    from . import _lib

    if torch.cuda.is_available() and _lib.device_supported(_lib.DEVICE_CUDA, -1)[0]:
        return "cuda"
    return "cpu"


def _progress(total: int, desc: str, quiet: bool = False):
    """tqdm when available (transformers depends on it), else a plain counter."""
    try:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, file=sys.stderr, disable=quiet, leave=False)
    except ImportError:  # pragma: no cover
        class _Bar:
            n = 0

            def update(self, k=1):
                self.n += k
                if not quiet:
                    print(f"\r{desc}: {self.n}/{total}", end="", file=sys.stderr, flush=True)

            def set_postfix_str(self, s):
                pass

            def close(self):
                if not quiet:
                    print(file=sys.stderr)

        return _Bar()


def _sync(device):
    torch = _torch()
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _timed(fn, device, iters):
    """Median wall time (seconds) of fn() over iters runs."""
    times = []
    for _ in range(iters):
        _sync(device)
        t = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]


def _table(rows, headers):
    cols = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(str(h).ljust(w) for h, w in zip(headers, cols))
    out = [line, "  ".join("-" * w for w in cols)]
    for r in rows:
        out.append("  ".join(str(v).ljust(w) for v, w in zip(r, cols)))
    return "\n".join(out)


def _fmt(x, spec=".3g"):
    return "-" if x is None else format(x, spec)


def _grad_err(g, gr):
    """Largest per-tensor relative gradient difference (scale floored at 1e-3 of the
    model's largest gradient, as in the test suite)."""
    if not gr:
        return None
    top = max(v.abs().max().item() for v in gr.values())
    worst = 0.0
    for n, ref in gr.items():
        scale = max(ref.abs().max().item(), 1e-3 * top, 1e-30)
        worst = max(worst, (g[n].float() - ref.float()).abs().max().item() / scale)
    return worst


class _Runner:
    """Runs one model through transformers and through dattn in a given mode."""

    def __init__(self, model, ids, mask, device):
        self.m, self.ids, self.mask, self.device = model, ids, mask, device
        torch = _torch()
        self.weight = torch.randn(*ids.shape, model.config.hidden_size, device=device)

    def _set(self, mode):
        from . import hf

        hf.unpatch(self.m)
        if mode != "transformers":
            hf.patch(self.m, mode=mode)

    def forward(self, mode):
        torch = _torch()
        self._set(mode)
        self.m.eval()
        with torch.no_grad():
            return self.m(self.ids, attention_mask=self.mask).last_hidden_state

    def train_step(self, mode):
        self._set(mode)
        self.m.train()
        self.m.zero_grad(set_to_none=True)
        out = self.m(self.ids, attention_mask=self.mask).last_hidden_state
        w = self.weight.to(out) * self.mask[..., None].to(out)
        (out * w).sum().backward()
        return {n: p.grad for n, p in self.m.named_parameters() if p.grad is not None}


# ---- demo ---------------------------------------------------------------------------


def cmd_demo(args) -> int:
    torch = _torch()
    from transformers import DebertaV2Model

    from . import _lib, hf, testing

    device = args.device or best_device()
    on_gpu = device.startswith("cuda")
    layers = args.layers or (12 if on_gpu else 2)
    B = args.batch or (16 if on_gpu else 4)
    L = args.seqlen or (512 if on_gpu else 128)
    iters = args.iters or (10 if on_gpu else 2)
    dtype_name = args.dtype or ("bf16" if on_gpu else "fp32")
    dtype = getattr(torch, _DTYPES[dtype_name])
    torch.manual_seed(args.seed)

    print(f"dattn demo: deberta-v3-base-shaped encoder (hidden 768, 12 heads x 64, FFN 3072, "
          f"{layers} layers, random weights), batch {B}, padded length {L}, {dtype_name}, "
          f"device {device} ({_device_name(device)}), seed {args.seed}")
    print(f"library: {_lib.build_info()}")
    steps = 2 + 3 * (1 + iters) * (2 if args.train else 1)
    bar = _progress(steps, "demo", args.quiet)
    cfg = testing.v3_base(layers=layers)
    model = DebertaV2Model(cfg).to(device)
    gen = torch.Generator().manual_seed(args.seed)
    lengths = testing.random_lengths(B, L, gen, min_len=max(1, L // 4))
    ids = torch.randint(1, cfg.vocab_size, (B, L), generator=gen).to(device)
    mask = testing.lengths_mask(lengths, L, "right", device)
    valid = mask.bool()
    pad_frac = 1 - sum(lengths) / (B * L)
    ref64 = None
    if dtype != torch.float32:
        model.double()
        with torch.no_grad():
            ref64 = model(ids, attention_mask=mask).last_hidden_state
    model.to(dtype)
    bar.update(1)
    run = _Runner(model, ids, mask, device)
    modes = ["transformers", "padded", "packed"]
    res = {m: {} for m in modes}
    for mode in modes:
        bar.set_postfix_str(f"{mode} forward")
        res[mode]["out"] = run.forward(mode)
        res[mode]["path"] = hf.last_path if mode != "transformers" else "transformers"
        bar.update(1)
        res[mode]["fwd"] = _timed(lambda: (run.forward(mode), bar.update(1)), device, iters)
    if args.train:
        for mode in modes:
            bar.set_postfix_str(f"{mode} train step")
            g = run.train_step(mode)
            res[mode]["grads"] = {n: v.detach().clone() for n, v in g.items()}
            bar.update(1)
            res[mode]["train"] = _timed(lambda: (run.train_step(mode), bar.update(1)), device, iters)
    hf.unpatch(model)
    bar.update(1)
    bar.close()

    ref = res["transformers"]["out"]
    rows, ok = [], True
    for mode in modes:
        r = res[mode]
        out = r["out"]
        if mode == "transformers":
            err = None
        elif ref64 is None:
            err = (out.float() - ref.float())[valid].abs().max().item()
        else:
            err = (out.double() - ref64)[valid].abs().max().item()
        gerr = _grad_err(r["grads"], res["transformers"]["grads"]) \
            if args.train and mode != "transformers" else None
        if mode != "transformers":
            if ref64 is None:
                good = err <= 1e-5 and (gerr is None or gerr <= 1e-4)
            else:
                e_hf = (ref.double() - ref64)[valid].abs().max().item()
                floor = torch.finfo(dtype).eps * ref64[valid].abs().max().item()
                good = err <= 2 * e_hf + floor
            ok &= good
            ran = r["path"]
        else:
            good, ran = None, "eager"
        speed = res["transformers"]["fwd"] / r["fwd"]
        row = [mode, ran, f"{r['fwd'] * 1e3:.1f}", f"{speed:.2f}x"]
        if args.train:
            row += [f"{r['train'] * 1e3:.1f}", f"{res['transformers']['train'] / r['train']:.2f}x"]
        row += [_fmt(err), _fmt(gerr) if args.train else None,
                "" if good is None else ("PASS" if good else "FAIL")]
        rows.append([v for v in row if v is not None])
    headers = ["path", "ran", "fwd ms", "fwd speed-up"]
    if args.train:
        headers += ["train ms", "train speed-up"]
    headers += ["max|dout| valid" if ref64 is None else "max|out-fp64| valid"]
    if args.train:
        headers += ["max rel dgrad"]
    headers += ["parity"]
    print(f"padding: {pad_frac:.0%} of the batch; timings are medians of {iters} runs")
    print(_table(rows, headers))
    if ref64 is not None:
        e_hf = (ref.double() - ref64)[valid].abs().max().item()
        print(f"(transformers' own {dtype_name} error vs fp64: {e_hf:.3g}; the rule: dattn "
              f"within 2x of it plus a rounding floor)")
    print("parity: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


def _device_name(device):
    torch = _torch()
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return platform.processor() or platform.machine()


# ---- bench / mnli (python/dattn/bench.py, python/dattn/mnli.py) ------------------------


def cmd_bench(args) -> int:
    from . import bench

    return bench.cmd_bench(args)


def cmd_mnli(args) -> int:
    from . import mnli

    return mnli.cmd_mnli(args)


# ---- check --------------------------------------------------------------------------


def cmd_check(args) -> int:
    torch = _torch()
    from transformers import DebertaV2Model

    from . import _lib, hf, testing

    device = args.device or best_device()
    torch.manual_seed(args.seed)
    if device.startswith("cuda"):
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    kinds = args.kinds.split(",") if args.kinds else list(testing.KINDS)
    dtypes = args.dtypes.split(",") if args.dtypes else ["fp32", "bf16", "fp16"]
    print(f"dattn check on {device} ({_device_name(device)}), seed {args.seed}")
    print(f"library: {_lib.build_info()} ({_lib.library_path()})")
    cases = [(k, m, d) for k in kinds for m in ("padded", "packed") for d in dtypes]
    bar = _progress(len(cases), "check", args.quiet)
    rows, ok = [], True
    gen = torch.Generator().manual_seed(args.seed)
    for kind, mode, dname in cases:
        bar.set_postfix_str(f"{kind} {mode} {dname}")
        cfg = testing.config(kind)
        model = DebertaV2Model(cfg).to(device)
        B, L = 4, args.seqlen
        lengths = testing.random_lengths(B, L, gen)
        ids = torch.randint(1, cfg.vocab_size, (B, L), generator=gen).to(device)
        mask = testing.lengths_mask(lengths, L, "right", device)
        valid = mask.bool()
        run = _Runner(model, ids, mask, device)
        row = [kind, mode, dname]
        if dname == "fp32":
            ref = run.forward("transformers")
            gref = {n: g.clone() for n, g in run.train_step("transformers").items()}
            out = run.forward(mode)
            path = hf.last_path
            g = run.train_step(mode)
            err = (out - ref)[valid].abs().max().item()
            gerr = _grad_err(g, gref)
            good = err <= 1e-5 and gerr <= 1e-4
            row += [path, _fmt(err), "<= 1e-05", _fmt(gerr), "<= 1e-04"]
        else:
            dtype = getattr(torch, _DTYPES[dname])
            model.double()
            ref64 = run.forward("transformers")
            model.to(dtype)
            ref = run.forward("transformers")
            out = run.forward(mode)
            path = hf.last_path
            e_hf = (ref.double() - ref64)[valid].abs().max().item()
            err = (out.double() - ref64)[valid].abs().max().item()
            bound = 2 * e_hf + torch.finfo(dtype).eps * ref64[valid].abs().max().item()
            good = err <= bound
            row += [path, _fmt(err), f"<= {bound:.3g}", "-", "-"]
        hf.unpatch(model)
        ran_dattn = path in ("padded", "packed")
        if not ran_dattn and not args.allow_fallback:
            good = False
        ok &= good
        rows.append(row + ["PASS" if good else "FAIL"])
        bar.update(1)
    bar.close()
    print(_table(rows, ["config", "mode", "dtype", "ran", "max|dout|", "bound",
                        "max rel dgrad", "bound", "result"]))
    n_bad = sum(r[-1] == "FAIL" for r in rows)
    print(f"{len(rows) - n_bad} passed, {n_bad} failed")
    return 0 if ok else 1


# ---- hub-repo / info ----------------------------------------------------------------


def cmd_hub_repo(args) -> int:
    from . import hub

    path = hub.build_repository(args.path)
    print(f"wrote the layer repository at {path}")
    print("use it with: kernels.use_kernel_mapping(dattn.hub.kernel_mapping(path))")
    return 0


def cmd_info(args) -> int:
    torch = _torch()
    from . import __version__, _lib

    print(f"dattn {__version__}")
    print(f"library: {_lib.library_path()}")
    print(f"build:   {_lib.build_info()}")
    print(f"cpu:     supported")
    ok, why = _lib.device_supported(_lib.DEVICE_CUDA, -1)
    seen = torch.cuda.is_available()
    print(f"cuda:    {'supported' if ok else 'not supported: ' + why}"
          f" (torch sees {'a GPU' if seen else 'no GPU'})")
    print(f"best device: {best_device()}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="dattn", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--device", help="cpu, cuda, cuda:N (default: the best available)")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("demo", help="parity and speed of a deberta-v3-base-shaped model")
    common(p)
    p.add_argument("--layers", type=int, help="encoder layers (default: 12 on GPU, 2 on CPU)")
    p.add_argument("--batch", type=int, help="batch size (default: 16 on GPU, 4 on CPU)")
    p.add_argument("--seqlen", type=int, help="padded length (default: 512 on GPU, 128 on CPU)")
    p.add_argument("--dtype", choices=list(_DTYPES), help="default: bf16 on GPU, fp32 on CPU")
    p.add_argument("--iters", type=int, help="timed runs per path (default: 10 GPU, 2 CPU)")
    p.add_argument("--no-train", dest="train", action="store_false",
                   help="forward only (no training step)")
    p.set_defaults(fn=cmd_demo)

    p = sub.add_parser("bench", help="encoder benchmark: transformers, SDPA floor, dattn, "
                       "peers; JSON and PNG under --out")
    common(p)
    from . import bench as _bench

    _bench.add_arguments(p)
    p.set_defaults(fn=cmd_bench)

    p = sub.add_parser("mnli", help="MNLI-shaped end-to-end run (deberta-v2-xlarge, 9,815 "
                       "examples): time and prediction agreement; JSON under --out")
    common(p)
    from . import mnli as _mnli

    _mnli.add_arguments(p)
    p.set_defaults(fn=cmd_mnli)

    p = sub.add_parser("check", help="parity suite on this machine's device")
    common(p)
    p.add_argument("--kinds", help=f"comma-separated subset of {','.join(_kinds())}")
    p.add_argument("--dtypes", help="comma-separated subset of fp32,bf16,fp16")
    p.add_argument("--seqlen", type=int, default=48)
    p.add_argument("--allow-fallback", action="store_true",
                   help="do not fail cases that ran transformers' forward")
    p.set_defaults(fn=cmd_check)

    p = sub.add_parser("hub-repo", help="write the local kernels layer repository")
    p.add_argument("path")
    p.set_defaults(fn=cmd_hub_repo)

    p = sub.add_parser("info", help="library and device support")
    p.set_defaults(fn=cmd_info)

    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args.fn(args)


def _kinds():
    from .testing import KINDS

    return KINDS


if __name__ == "__main__":
    sys.exit(main())
