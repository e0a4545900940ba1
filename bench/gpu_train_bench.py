#!/usr/bin/env python3
"""Encoder training step, dattn vs transformers (issue 5 targets), on the GPU.

DeBERTa-v3-base's encoder (12 layers, hidden 768, 12 heads of 64, FFN 3072,
position_buckets 256, share_att_key, c2p + p2c, LayerNorm'd rel embeddings), random
weights, in training mode with its dropouts on (hidden and attention 0.1, as fine-tuning
runs). One step = forward of DebertaV2Encoder on random hidden states [B, L, 768] with a
full attention mask, a scalar loss (mean of the squared outputs), backward to every
parameter (no optimizer). Precision: fp16 autocast over fp32 weights -- how DeBERTa is
fine-tuned in practice (AMP keeps fp32 master weights and gradients; a .half() model is
not how anyone trains); every side runs the same autocast. --half switches to a .half()
model instead.

Shapes and targets (issue 5): B=8 L=512: dattn step time <= 0.6x transformers';
B=4 L=2048: <= 0.3x, and peak memory (torch.cuda.max_memory_allocated during a step,
weights and gradients included) <= 0.5x. The targets are eager vs eager.

Sides, per case:
  transformers          transformers' own eager encoder
  dattn                 dattn.patch(encoder), eager
  sdpa-floor            the same encoder with every DisentangledSelfAttention replaced by
                        plain torch SDPA on its Q/K/V (no position terms, attention dropout
                        as the layer's; dattn.bench.sdpa_floor): what the step costs
                        without DeBERTa's position terms. dattn / floor tells how much of
                        the step is attention (1.0 = dattn's attention costs what flash's
                        does; the rest of the step is identical).
  dattn+compile         torch.compile(encoder) (inductor, mode "default", dynamic=False,
  transformers+compile  fullgraph not required) of the patched / plain encoder, the same
                        step function (autocast outside, backward through AOTAutograd).
                        Compile and warm-up are excluded from the timing (warm-up steps
                        until two consecutive steps agree within 10%, at most 6); the
                        seconds they took are reported as compile_s. Only the cases of
                        --compile-cases (default: the first case, B=8 L=512, where host
                        cost matters most; "all" adds B=4 L=2048: a second compile per
                        side). A side whose compile fails records the error and the
                        bench goes on. Ratios: dattn+compile / transformers+compile, and
                        dattn+compile / transformers eager (what a user adopting both
                        sees).

GPU-busy profile: after timing, one more warm step of every side runs under
torch.profiler (CPU + CUDA activities). Reported: the step's wall time (host clock,
start to device sync; the profiler's own host overhead included), host_ms (start until the
step function returned, i.e. everything was enqueued), the sum of device-activity time
(kernels, memcpy, memset), busy = the union of their intervals (overlap counted once),
busy_fraction = busy / wall and busy / the unprofiled median step (the better estimate:
device work hardly changes under the profiler, host work does), the number of kernels and
of launch calls, the dattn calls seen (dattn::fwd / dattn::bwd ops, or the eager
autograd.Function: once per layer proves no fallback, and under compile that the compiled
graph kept them), and the top 10 kernels by total time (--top N: N of them). If busy /
median is well under ~0.7 the step is host-bound (launch and Python cost): compile / CUDA
graphs should then show a large gain. A profiler failure is recorded in the side's JSON and
does not fail the bench.

Time-bounded: every eager side first times one step, then repeats for about
--case-budget seconds (at least 1, at most --reps steps); the median is reported (all
eager sides and profiles: ~20 s on the H200). Then the eager sides are timed again
interleaved (one step of each per round, the order rotating; about --case-budget seconds,
3 to --reps rounds): the time ratio and the floor ratios are taken from these medians,
since the host's speed drifts during a run and the step is host-bound at B8 L512; the block
ratio is kept as block_time_ratio, the peak memory comes from the block runs. Compile sides start only while the run
stays under --time-budget (default 160 s) given an estimate of their cost
(--compile-estimate, 75 s per compiled case, for the first side; the first side's
measured cost for the second); a skipped side says why. The JSON is rewritten after every
side, so a run cut by a time limit keeps what it measured.

Why compile is on by default for one case only: an inductor compile of the 12-layer
encoder's forward + backward (the layers unrolled into one graph; identical layers share
their Triton kernels) takes roughly 40-90 s on a fresh machine (cold caches), once per side
and shape. Two sides x one shape plus the eager part fits ~150 s; two shapes would not.
dynamic=False: each shape gets its own static compile (a dynamic-shape graph could serve
both, but its kernels are not the ones a fixed-shape fine-tune runs).

Usage: python3 bench/gpu_train_bench.py [--json PATH] [--quick] [--half] [--strict]
       [--no-compile | --compile-cases first|all|none|BxL,...] [--compile-mode M]
       [--no-floor] [--no-profile] [--time-budget S]
Testing on the CPU (no targets; bf16 autocast): --device cpu --cases 2x64 --layers 2
(--compile-backend aot_eager: the compile sides without inductor's C++ compile; --tiny:
hidden 64, 2 heads, 16 buckets)
Exit 0 unless something failed to run (--strict: also when a target is missed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import dattn  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))
    import dattn  # noqa: F401

import torch

from dattn import hf, testing
from dattn.bench import sdpa_floor

CASES = [  # (B, L, time target, memory target or None)
    (8, 512, 0.6, None),
    (4, 2048, 0.3, 0.5),
]
EAGER_SIDES = ("transformers", "dattn", "sdpa-floor")
COMPILE_SIDES = ("dattn+compile", "transformers+compile")  # dattn's first: the one that matters
COMPILE = dict(backend="inductor", mode="default", dynamic=False, fullgraph=False)


# ---- device helpers -------------------------------------------------------------------


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def amp_dtype(dev):
    # fp16 autocast on the GPU (the setting); bf16 on the CPU (validation runs)
    return torch.float16 if dev.type == "cuda" else torch.bfloat16


def step_fn(enc, params, x, mask, amp, dev):
    dt = amp_dtype(dev)

    def step():
        with torch.autocast(dev.type, dtype=dt, enabled=amp):
            out = enc(x, mask, output_hidden_states=False, return_dict=True).last_hidden_state
            loss = out.float().pow(2).mean()
        loss.backward()
        for p in params:
            p.grad = None
        return loss.detach()
    return step


def timed_call(step, dev):
    """(step wall ms, host ms until step() returned). CUDA: events for the wall time."""
    if dev.type == "cuda":
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        s.record()
        step()
        e.record()
        t1 = time.perf_counter()
        torch.cuda.synchronize(dev)
        return s.elapsed_time(e), (t1 - t0) * 1e3
    t0 = time.perf_counter()
    step()
    t1 = time.perf_counter()
    return (t1 - t0) * 1e3, (t1 - t0) * 1e3


def measure(step, budget_s, max_reps, dev, warm=True):
    sync(dev)
    if warm:
        step()  # warm-up (library load, probes, allocator)
        sync(dev)
    cuda = dev.type == "cuda"
    if cuda:
        base = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
    t, h = timed_call(step, dev)
    times, hosts = [t], [h]
    peak = torch.cuda.max_memory_allocated(dev) if cuda else None
    reps = int(min(max_reps - 1, max(0, budget_s * 1e3 / times[0] - 1)))
    for _ in range(reps):
        t, h = timed_call(step, dev)
        times.append(t)
        hosts.append(h)
    r = dict(median_ms=statistics.median(times), min_ms=min(times), n=len(times),
             host_ms=statistics.median(hosts))
    if cuda:
        r.update(peak_bytes=peak, peak_over_base_bytes=peak - base, base_bytes=base)
    return r


def measure_interleaved(enc, steps, budget_s, max_rounds, dev):
    """Round-robin timing of the eager sides: one step of each side per round (the side's
    context entered around its step; the order rotates every round), about budget_s
    seconds (at least 3 rounds, at most max_rounds). The host's speed drifts while a run
    goes on (transformers' median moved 46 -> 81 ms between two calls on the same device
    work, and by ~15 % within one), so sides timed one after the other in blocks see
    different hosts; interleaved, every side sees the same drift. {side: {median_ms,
    min_ms, n}}."""
    sides = list(steps)
    times = {s: [] for s in sides}
    t_end = time.perf_counter() + budget_s
    rounds = 0
    while rounds < max(3, max_rounds) and (rounds < 3 or time.perf_counter() < t_end):
        k = rounds % len(sides)
        for side in sides[k:] + sides[:k]:
            with side_context(enc, side):
                sync(dev)
                t, _ = timed_call(steps[side], dev)
            times[side].append(t)
        rounds += 1
    return {s: dict(median_ms=statistics.median(v), min_ms=min(v), n=len(v))
            for s, v in times.items()}


def warm_compiled(step, dev, max_steps=6, tol=0.10):
    """Runs the compiled step until two consecutive steps agree within tol (compile of
    forward and backward, recompiles, autotuning all happen here). Returns (compile
    seconds = warm-up time minus what as many steady steps take, warm-up steps)."""
    sync(dev)
    t0 = time.perf_counter()
    times = []
    for _ in range(max_steps):
        ts = time.perf_counter()
        step()
        sync(dev)
        times.append(time.perf_counter() - ts)
        if len(times) >= 3 and abs(times[-1] - times[-2]) <= tol * min(times[-1], times[-2]):
            break
    total = time.perf_counter() - t0
    steady = min(times[-2:])
    return total - steady * len(times), len(times)


# ---- GPU-busy profile -----------------------------------------------------------------


def err(e, n=300):
    """An exception as one short line for the JSON and the log."""
    return f"{type(e).__name__}: {' '.join(str(e).split())[:n]}"


def interval_union_ns(iv):
    """Total length of the union of [start, end) intervals (overlaps counted once)."""
    tot, cur_s, cur_e = 0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        tot += cur_e - cur_s
    return tot


# Host-side profiler events of one dattn attention call, per direction: the custom ops
# (torch.compile, modes, subclasses) or an eager autograd.Function (dattn.ops
# _EagerAttention, or the patched layer's _proj._LayerAttention, whose backward may call
# the op: max, not sum).
DATTN_OP_NAMES = {"fwd": ("dattn::fwd", "_EagerAttention", "_LayerAttention"),
                  "bwd": ("dattn::bwd", "_EagerAttentionBackward", "_LayerAttentionBackward")}


def summarize_events(events, device_kind, wall_ms, host_ms, median_ms=None, top=10):
    """events: (name, on_device, start_ns, dur_ns). device_kind "cuda": the device events
    are kernels and memcpy/memset; "cpu" (validation runs): the aten ops on the CPU stand
    in for kernels (nested, so their sum exceeds the union)."""
    dev = [(n, s, d) for n, on, s, d in events if on]
    if device_kind != "cuda":
        dev = [(n, s, d) for n, on, s, d in events if n.startswith("aten::")]
    kernels = [e for e in dev if not e[0].startswith(("Memcpy", "Memset"))]
    busy_ns = interval_union_ns([(s, s + d) for _, s, d in dev])
    span_ns = (max(s + d for _, s, d in dev) - min(s for _, s, d in dev)) if dev else 0
    by = defaultdict(lambda: [0, 0])
    for n, _, d in kernels:
        by[n][0] += 1
        by[n][1] += d
    ranked = sorted(by.items(), key=lambda kv: -kv[1][1])[:top]
    host_names = [n for n, on, _, _ in events if not on]
    r = dict(
        source="CUDA device activity (kernels, memcpy, memset)" if device_kind == "cuda"
        else "CPU aten ops standing in for kernels (validation only; nested ops overlap)",
        wall_ms=wall_ms, host_ms=host_ms,
        device_sum_ms=sum(d for _, _, d in dev) / 1e6,
        kernel_sum_ms=sum(d for _, _, d in kernels) / 1e6,
        busy_ms=busy_ns / 1e6, span_ms=span_ns / 1e6,
        busy_fraction=busy_ns / 1e6 / wall_ms if wall_ms > 0 else None,
        n_kernels=len(kernels), n_memops=len(dev) - len(kernels),
        n_launch_calls=sum(1 for n in host_names if "LaunchKernel" in n or n == "cudaGraphLaunch"),
        dattn_ops={k: max(sum(1 for h in host_names if h == n) for n in names)
                   for k, names in DATTN_OP_NAMES.items()},
        top=[dict(name=n[:100], count=c, total_us=round(t / 1e3, 1)) for n, (c, t) in ranked])
    if median_ms:
        r["busy_fraction_of_median"] = r["busy_ms"] / median_ms
    return r


def profiler_events(prof):
    """(name, on_device, start_ns, dur_ns) of every event. The device timeline's mirrors of
    record_function ranges (gpu_user_annotation: span from their first to their last kernel,
    gaps included) are dropped: they are not device work."""
    out = []
    for e in prof.profiler.kineto_results.events():
        on = e.device_type() != torch.autograd.DeviceType.CPU
        if on and e.is_user_annotation():
            continue
        out.append((e.name(), on, e.start_ns(), e.duration_ns()))
    return out


@contextlib.contextmanager
def quiet_profile(dev):
    """torch.profiler over CPU (+ CUDA) activity, its "Profiler clears events at the end of
    each cycle" warning silenced."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=acts) as prof:
            yield prof


def profile_step(step, dev, median_ms, top=10):
    """One warm step under torch.profiler; a summary dict (its top kernels by total time),
    or {"error": ...}."""
    try:
        sync(dev)
        with quiet_profile(dev) as prof:
            t0 = time.perf_counter()
            step()
            t1 = time.perf_counter()
            sync(dev)
            t2 = time.perf_counter()
        return summarize_events(profiler_events(prof), dev.type, (t2 - t0) * 1e3,
                                (t1 - t0) * 1e3, median_ms, top)
    except Exception as e:  # the profile is extra information: never fail the bench on it
        return dict(error=err(e))


def dattn_ran(prof, layers):
    """True when the profiled step ran dattn::fwd and dattn::bwd once per layer (no
    fallback to transformers' attention); None without a profile."""
    ops = prof.get("dattn_ops")
    return None if ops is None else (ops["fwd"] == layers and ops["bwd"] == layers)


def profiler_warmup(dev):
    """The first profiler session pays CUPTI/kineto start-up: spend it on a trivial op."""
    try:
        with quiet_profile(dev):
            torch.ones(16, device=dev).sum()
            sync(dev)
    except Exception:
        pass


def dynamo_counts():
    from torch._dynamo.utils import counters

    gb = counters.get("graph_break", {})
    return dict(unique_graphs=counters.get("stats", {}).get("unique_graphs", 0),
                graph_breaks=sum(gb.values()),
                graph_break_reasons=[str(k)[:160] for k, _ in sorted(gb.items(), key=lambda kv: -kv[1])[:3]])


# ---- reporting ------------------------------------------------------------------------


def fmt_side(B, L, side, r, dev):
    if "median_ms" not in r:
        return f"  B={B} L={L} {side}: {r.get('error') or r.get('skipped')}"
    s = (f"  B={B} L={L} {side:12s}: {r['median_ms']:9.2f} ms (n={r['n']}, "
         f"min {r['min_ms']:.2f}, host {r['host_ms']:.2f})")
    if dev.type == "cuda":
        s += (f", peak {r['peak_bytes'] / 2**30:.2f} GiB "
              f"(+{r['peak_over_base_bytes'] / 2**30:.2f} over weights/inputs)")
    if "path" in r:
        s += f" path {r['path']}"
    if "compile_s" in r:
        s += f", compile {r['compile_s']:.1f}s ({r['warmup_steps']} warm-up steps)"
    return s


def fmt_profile(B, L, side, p):
    if "error" in p:
        return f"  B={B} L={L} {side:12s}  profile failed: {p['error']}"
    frac = p.get("busy_fraction_of_median")
    top = p["top"][0] if p["top"] else None
    return (f"  B={B} L={L} {side:12s}  busy {p['busy_ms']:.2f} ms of {p['wall_ms']:.2f} wall "
            f"({100 * p['busy_fraction']:.0f}%"
            + (f", {100 * frac:.0f}% of the median" if frac is not None else "")
            + f"), host {p['host_ms']:.2f}, kernels {p['n_kernels']} (sum {p['kernel_sum_ms']:.2f} ms), "
            f"launches {p['n_launch_calls']}, dattn ops {p['dattn_ops']['fwd']}/{p['dattn_ops']['bwd']}"
            + (f"; top {top['name'][:40]} x{top['count']} {top['total_us'] / 1e3:.2f} ms" if top else ""))


@contextlib.contextmanager
def side_context(enc, side):
    """The encoder as the eager side runs it: plain, dattn.patch'ed, or the SDPA floor."""
    if side == "dattn":
        dattn.patch(enc)
        try:
            yield
        finally:
            dattn.unpatch(enc)
    elif side == "sdpa-floor":
        with sdpa_floor(padded=False):  # full masks: no mask to SDPA
            yield
    else:
        yield


def parse_cases(spec):
    known = {(B, L): (t, m) for B, L, t, m in CASES}
    out = []
    for tok in spec.split(","):
        B, L = (int(v) for v in tok.lower().split("x"))
        out.append((B, L) + known.get((B, L), (None, None)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None, help="default $OUT/train_bench.json when $OUT is set")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--half", action="store_true", help=".half() model instead of fp16 autocast")
    ap.add_argument("--no-dropout", action="store_true")
    ap.add_argument("--case-budget", type=float, default=None, help="seconds per (case, side)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile sides")
    ap.add_argument("--compile-cases", default="first",
                    help="cases with compile sides: first (default), all, none, or BxL,...")
    ap.add_argument("--compile-mode", default=COMPILE["mode"],
                    help="torch.compile mode (default: default; reduce-overhead captures CUDA "
                    "graphs, which dattn's dropout RNG does not support)")
    ap.add_argument("--no-floor", action="store_true", help="skip the SDPA-floor side")
    ap.add_argument("--no-profile", action="store_true", help="skip the GPU-busy profiles")
    ap.add_argument("--top", type=int, default=10,
                    help="kernels listed per profile, by total time (a large N lists every kernel "
                         "of the step: where the launches of a host-bound step come from)")
    ap.add_argument("--time-budget", type=float, default=160.0,
                    help="seconds: no compile side starts that would end past it")
    ap.add_argument("--compile-estimate", type=float, default=75.0,
                    help="seconds a compiled case is assumed to take before one was measured")
    # validation runs of every code path on a machine without a GPU
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    ap.add_argument("--cases", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--layers", type=int, default=12, help=argparse.SUPPRESS)
    ap.add_argument("--compile-backend", default=COMPILE["backend"], help=argparse.SUPPRESS)
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # hidden 64, 2 heads
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("gpu_train_bench: no CUDA device")
        return 77
    cases = parse_cases(args.cases) if args.cases else CASES
    if args.no_compile or args.compile_cases == "none":
        compile_cases = []
    elif args.compile_cases == "first":
        compile_cases = [cases[0][:2]]
    elif args.compile_cases == "all":
        compile_cases = [c[:2] for c in cases]
    else:
        compile_cases = [c[:2] for c in parse_cases(args.compile_cases)]
    COMPILE["mode"] = args.compile_mode
    COMPILE["backend"] = args.compile_backend  # aot_eager: the CPU smoke test (no C++ compile)
    budget = args.case_budget or (3.0 if args.quick else 6.0)
    torch.backends.cuda.matmul.allow_tf32 = False
    drop = 0.0 if args.no_dropout else 0.1
    from transformers import DebertaV2Model

    torch.manual_seed(0)
    if args.tiny:  # the CPU smoke test: the v3 layout at hidden 64, 2 heads, 16 buckets
        cfg = testing.config("v3", layers=args.layers, dropout=drop, attention_dropout=drop)
    else:
        cfg = testing.v3_base(layers=args.layers, dropout=drop, attention_dropout=drop)
    enc = DebertaV2Model(cfg).encoder.to(dev).train()
    if args.half:
        enc = enc.half()
    params = list(enc.parameters())
    amp = not args.half
    wdtype = torch.float16 if args.half else torch.float32
    dev_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    prec = ("half model" if args.half else
            f"{'fp16' if amp_dtype(dev) == torch.float16 else 'bf16'} autocast, fp32 weights")
    t_start = time.perf_counter()
    print(f"gpu_train_bench: {'tiny v3' if args.tiny else 'v3-base'} encoder ({args.layers} layers), "
          f"{prec}, dropout {drop}, "
          f"{dev_name}", flush=True)
    if not args.no_profile:
        profiler_warmup(dev)
    g = torch.Generator(device=dev).manual_seed(1)
    inputs = {}
    results = []
    path = args.json or (os.path.join(os.environ["OUT"], "train_bench.json") if os.environ.get("OUT") else None)
    res = dict(what="v3-base encoder training step (fwd+bwd, scalar loss), dattn vs transformers",
               device=dev_name, torch=torch.__version__, precision=prec, layers=args.layers,
               hidden=cfg.hidden_size, heads=cfg.num_attention_heads,
               dropout=drop, memory="torch.cuda.max_memory_allocated during one step (weights, "
               "inputs and gradients included); *_over_base: minus what was allocated before",
               sides=list(EAGER_SIDES) + [s for s in COMPILE_SIDES if compile_cases],
               compile=dict(COMPILE, cases=[f"{B}x{L}" for B, L in compile_cases],
                            timing="compile and warm-up excluded; compile_s = warm-up time "
                            "minus as many steady steps"),
               profile=None if args.no_profile else
               "one warm step per side under torch.profiler: busy = union of device-activity "
               "intervals; busy_fraction = busy / profiled wall; busy_fraction_of_median = "
               "busy / unprofiled median step (< ~0.7: host-bound)",
               cases=results, time_budget_s=args.time_budget)

    def dump():
        res["seconds"] = time.perf_counter() - t_start
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w") as f:
                json.dump(res, f, indent=1)

    # ---- eager sides (the targets) ----
    for B, L, t_target, m_target in cases:
        x = torch.randn(B, L, cfg.hidden_size, device=dev, dtype=wdtype, generator=g)
        mask = torch.ones(B, L, dtype=torch.long, device=dev)
        inputs[(B, L)] = (x, mask)
        row = dict(B=B, L=L, target_time_ratio=t_target, target_mem_ratio=m_target)
        results.append(row)
        for side in EAGER_SIDES:
            if side == "sdpa-floor" and args.no_floor:
                continue
            step = step_fn(enc, params, x, mask, amp, dev)
            try:
                with side_context(enc, side):
                    r = measure(step, budget, args.reps, dev)
                    if side == "dattn":
                        r["path"] = hf.last_path
                    if not args.no_profile:
                        r["profile"] = profile_step(step, dev, r["median_ms"], args.top)
                        if side == "dattn":
                            r["dattn_ran"] = dattn_ran(r["profile"], args.layers)
            except torch.OutOfMemoryError as e:
                r = dict(error="out of memory: " + err(e, 200))
            except Exception as e:
                if side != "sdpa-floor":  # transformers and dattn must run
                    raise
                r = dict(error=err(e))
            finally:
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
            row[side] = r
            print(fmt_side(B, L, side, r, dev), flush=True)
            if "profile" in r:
                print(fmt_profile(B, L, side, r["profile"]), flush=True)
            dump()
        ran = {side: step_fn(enc, params, x, mask, amp, dev) for side in EAGER_SIDES
               if "median_ms" in row.get(side, {})}
        if "transformers" in ran and "dattn" in ran:
            try:
                row["interleaved"] = measure_interleaved(enc, ran, budget, args.reps, dev)
            finally:
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
            print(f"  B={B} L={L} interleaved ({row['interleaved']['dattn']['n']} rounds): "
                  + ", ".join(f"{side} {r['median_ms']:.2f} ms" for side, r in row["interleaved"].items()),
                  flush=True)
        # the verdicts use the interleaved medians (same host for every side), the block
        # medians are kept next to them (block_time_ratio)
        t, d, f = row["transformers"], row["dattn"], row.get("sdpa-floor", {})
        if "median_ms" in t and "median_ms" in d:
            row["block_time_ratio"] = d["median_ms"] / t["median_ms"]
        il = row.get("interleaved")
        if il:
            t, d = il["transformers"], il["dattn"]
            f = il.get("sdpa-floor", {})
        if "median_ms" in t and "median_ms" in d:
            row["time_ratio"] = d["median_ms"] / t["median_ms"]
            row["time_ok"] = None if t_target is None else row["time_ratio"] <= t_target
            if dev.type == "cuda":
                tb, db = row["transformers"], row["dattn"]  # (memory: the block runs)
                row["mem_ratio"] = db["peak_bytes"] / tb["peak_bytes"]
                row["mem_over_base_ratio"] = db["peak_over_base_bytes"] / max(1, tb["peak_over_base_bytes"])
                row["mem_ok"] = None if m_target is None else row["mem_ratio"] <= m_target
            else:
                row["mem_ratio"] = row["mem_ok"] = None
            print(f"  B={B} L={L}: time ratio {row['time_ratio']:.3f}"
                  + (f" (interleaved; blocks {row['block_time_ratio']:.3f})" if il else "")
                  + ("" if t_target is None else
                     f" (target <= {t_target}) {'met' if row['time_ok'] else 'MISSED'}")
                  + ("" if row["mem_ratio"] is None else f"; peak memory ratio {row['mem_ratio']:.3f}")
                  + ("" if m_target is None or row["mem_ok"] is None else
                     f" (target <= {m_target}) {'met' if row['mem_ok'] else 'MISSED'}"), flush=True)
        if "median_ms" in f and "median_ms" in d:
            row["dattn_over_floor"] = d["median_ms"] / f["median_ms"]
            row["transformers_over_floor"] = t["median_ms"] / f["median_ms"] if "median_ms" in t else None
            print(f"  B={B} L={L}: vs SDPA floor: dattn {row['dattn_over_floor']:.3f}x"
                  + (f", transformers {row['transformers_over_floor']:.3f}x"
                     if row["transformers_over_floor"] else ""), flush=True)
        dump()

    # ---- compiled sides: one torch.compile per side, reused across its cases (one static
    # compile per shape: dynamic=False recompiles on a new shape instead of generalising) ----
    rows = {(r["B"], r["L"]): r for r in results}
    side_cost = None
    for side in COMPILE_SIDES if compile_cases else ():
        todo = [c for c in compile_cases if c in rows]
        elapsed = time.perf_counter() - t_start
        est = side_cost if side_cost is not None else args.compile_estimate * len(todo)
        if elapsed + est > args.time_budget:
            why = (f"time budget: {elapsed:.0f}s spent + ~{est:.0f}s estimated for this side "
                   f"> --time-budget {args.time_budget:.0f}s")
            for c in todo:
                rows[c][side] = dict(skipped=why)
                print(f"  B={c[0]} L={c[1]} {side}: skipped ({why})", flush=True)
            dump()
            continue
        t_side = time.perf_counter()
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()  # graphs / breaks of this side only
        failed = None
        try:
            if side.startswith("dattn"):
                dattn.patch(enc)
            kw = dict(mode=COMPILE["mode"]) if COMPILE["backend"] == "inductor" else {}
            cenc = torch.compile(enc, backend=COMPILE["backend"], dynamic=COMPILE["dynamic"],
                                 fullgraph=COMPILE["fullgraph"], **kw)
            for B, L in todo:
                row = rows[(B, L)]
                if failed is not None:
                    row[side] = dict(error=f"not run: {failed}")
                    continue
                x, mask = inputs[(B, L)]
                step = step_fn(cenc, params, x, mask, amp, dev)
                try:
                    c_s, n_warm = warm_compiled(step, dev)
                    r = measure(step, budget, args.reps, dev, warm=False)
                    r.update(compile_s=c_s, warmup_steps=n_warm, dynamo=dynamo_counts())
                    if not args.no_profile:
                        r["profile"] = profile_step(step, dev, r["median_ms"], args.top)
                        if side.startswith("dattn"):
                            r["dattn_ran"] = dattn_ran(r["profile"], args.layers)
                except torch.OutOfMemoryError as e:
                    r = dict(error="out of memory: " + err(e, 200))
                except Exception as e:
                    r = dict(error=err(e))
                    failed = f"compile failed on B={B} L={L}"
                row[side] = r
                print(fmt_side(B, L, side, r, dev), flush=True)
                if "profile" in r:
                    print(fmt_profile(B, L, side, r["profile"]), flush=True)
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
                dump()
        except Exception as e:  # patch or torch.compile itself
            for B, L in todo:
                if side not in rows[(B, L)]:
                    rows[(B, L)][side] = dict(error=err(e))
                    print(fmt_side(B, L, side, rows[(B, L)][side], dev), flush=True)
            dump()
        finally:
            if side.startswith("dattn"):
                dattn.unpatch(enc)
            torch._dynamo.reset()
        side_cost = time.perf_counter() - t_side
    for B, L in compile_cases:
        row = rows.get((B, L))
        if row is None:
            continue
        dc, tc, te = (row.get(s, {}).get("median_ms")
                      for s in ("dattn+compile", "transformers+compile", "transformers"))
        de = row.get("dattn", {}).get("median_ms")
        row["compile_ratio"] = dc / tc if dc and tc else None
        row["dattn_compile_vs_transformers_eager"] = dc / te if dc and te else None
        row["dattn_compile_speedup"] = de / dc if dc and de else None
        row["transformers_compile_speedup"] = te / tc if tc and te else None
        f2 = lambda v, u="": "n/a" if v is None else f"{v:.3f}{u}"  # noqa: E731
        print(f"  B={B} L={L}: compile: dattn+compile / transformers+compile {f2(row['compile_ratio'])}, "
              f"/ transformers eager {f2(row['dattn_compile_vs_transformers_eager'])}; "
              f"compile speedup dattn {f2(row['dattn_compile_speedup'], 'x')}, "
              f"transformers {f2(row['transformers_compile_speedup'], 'x')}", flush=True)

    if not args.no_profile:
        for row in results:
            parts = []
            for side in res["sides"]:
                p = row.get(side, {}).get("profile") or {}
                if p.get("busy_fraction_of_median") is not None:
                    parts.append(f"{side} {100 * p['busy_fraction_of_median']:.0f}%")
            if parts:
                print(f"  B={row['B']} L={row['L']}: device busy / median step: " + ", ".join(parts),
                      flush=True)
    ran = all("time_ratio" in r for r in results)
    met = ran and all(r["time_ok"] is not False and r["mem_ok"] is not False for r in results)
    res.update(all_ran=ran, targets_met=met)
    dump()
    has_targets = any(r["target_time_ratio"] is not None for r in results)
    verdict = ("met" if met else "NOT met") if has_targets else "none for these cases"
    print(f"gpu_train_bench: targets {verdict} ({res['seconds']:.0f}s)")
    if not ran:
        return 1
    return 1 if (args.strict and not met) else 0


if __name__ == "__main__":
    sys.exit(main())
