#!/usr/bin/env python3
"""DDP check (issue 5): dattn under torch.distributed DistributedDataParallel.

Spawns --nproc processes (default 2; backend nccl, one GPU each, or gloo on the CPU for
CI; --shared-gpu: gloo with every rank on cuda:0, which runs dattn's CUDA kernels under DDP
on a one-GPU machine; NCCL refuses two ranks on one GPU, so that is not the NCCL check).
Each builds the same random-weight classifier (DeBERTa-v3-small encoder shape by default,
fp32 weights, no TF32; --tiny: 2 layers of hidden 64), patched with dattn.patch.
--autocast none|bf16|fp16 (default none: fp32 throughout, today's check unchanged) runs
every model forward under torch.autocast(dtype) as mixed-precision training does; dattn
then computes in that dtype (q/k/v arrive as bf16/fp16), so on an H200 the tensor-core
backward (tc3f at D = 64; fp16/bf16, D 64/128, S <= 256) is what DDP trains with.

1. Gradient check, dropout off (every nn.Dropout set to p = 0 for this step): one
   forward/backward of a global batch of --global-batch sequences split evenly over the
   ranks under DDP (mean loss per rank; DDP averages the gradients), against the same
   model without DDP on rank 0's device computing the mean loss of the whole global batch.
   For every parameter: rel = ||g_ddp - g_single||_2 / ||g_single||_2 (Frobenius norm
   over the parameter's elements; a parameter whose reference gradient is exactly zero
   compares ||g_ddp||_2 with 0). Pass: max over parameters of rel <= --tol.
   --tol defaults per mode (TOL below):
     none 1e-5: fp32; only the summation order of the batch reductions differs.
     bf16 5e-2, fp16 1e-2: the attention itself is per-sample identical (the DDP side's
       upstream gradients are exactly 2x the single side's, a power of two), but under
       autocast every weight gradient is a GEMM over the batch's tokens whose result is
       rounded to bf16/fp16 (8 / 11 significant bits) before the fp32 .grad, and the
       single run sums 16 sequences where each rank sums 8 and the all-reduce adds the
       two; GEMMs of different M may also block differently (cuBLAS heuristics), which
       changes the activations' roundings, and these differences compound through the
       layers. Measured on CPU/gloo (oneDNN GEMMs), max rel over parameters: bf16 4.1e-3,
       6.8e-3, 4.0e-3 (tiny, three init/data seeds), 6.3e-3 (v3-small shape, G=16, L=128);
       fp16 4.7e-4, 1.0e-3, 4.6e-4 (tiny, loss scale 2^16; the full shape's fp16 GEMMs are
       too slow on this CPU). The defaults leave >= 7x (bf16) and >= 10x (fp16) margin for
       cuBLAS's different blockings and stay far below what a DDP bug produces: summed
       instead of averaged gradients give rel = 1, one rank's half batch instead of the
       whole one rel 0.61-1.34 over the parameters (tiny, CPU, fp32).
   fp16: both sides backpropagate loss * --loss-scale (default 2^16, GradScaler's initial
   scale; a power of two, so scaling and unscaling are exact), and the gradients are
   divided by it before comparing; a non-finite gradient fails the gate. A fixed scale
   rather than a GradScaler keeps both sides on the same scale with no skipped step. It
   must be large: the DDP side's per-sample upstream gradients are 2x the single side's,
   exact only for normal fp16 numbers, and small scales push the small ones into fp16's
   subnormal range where the two round differently (tiny: 3.2e-3 at 2^10, 7.9e-4 at
   2^12, 4.7e-4 at 2^16).
2. Training, dropout on (hidden and attention 0.1): --steps (40) DDP steps with AdamW on
   one fixed global batch (fp16: torch.amp.GradScaler, as users train; bf16: no scaler);
   pass when the mean loss of the last 3 steps is below 0.8x that of the first 3, and the
   ranks hold bitwise identical parameters at the end.

Gates: grads_match, loss_decreased, ranks_in_sync, dattn_ran (no encoder call fell back),
dattn_dtype (in every phase, the grad check's DDP and single runs and training, each
dattn forward and each dattn backward saw q in the expected dtype: fp32 /
bf16 / fp16), and on CUDA with autocast where the routing applies (sm_90, D in {64, 128},
S <= 256, S % 8 == 0; with dropout D = 64) fast_bwd: a profiled DDP training step on rank
0 ran the tensor-core backward kernels of that dtype (dattn_bwd_{ws,tc3*,sm80}_<dt>_*)
and none of the simple backward's (dattn_bwd_dq_* / dattn_bwd_dkdv_*).

NCCL's NVLink multicast is kept off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1: set here and inherited by the workers).

Usage:  python3 scripts/ddp_check.py [--backend nccl|gloo] [--autocast none|bf16|fp16]
                                     [--shared-gpu] [--tiny] [--json PATH]
JSON (default $OUT/ddp_check.json when $OUT is set): per-parameter worst errors, norms,
loss curve, dtypes seen by dattn, backward kernels (CUDA, autocast), wall time, devices,
pass/fail. Exit 1 on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import time
from pathlib import Path

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
               ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
try:
    import dattn  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))
    import dattn  # noqa: F401

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import finetune_e2e as fe  # noqa: E402  (model config and synthetic task)

AMP = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}
# default --tol per --autocast mode (module docstring: why, and what was measured)
TOL = {"none": 1e-5, "bf16": 5e-2, "fp16": 1e-2}
# the tensor-core backward's kernels (src/cuda/bwd_sm80_inst.cuh; the warp-specialized ones of
# src/cuda/bwd_ws_d64_sm90.cu, the sm_90 default at D 64, with their _mask / _drop / _packed
# suffixes) and the simple one's per-row kernels (src/cuda/bwd_simple.cu); dtype suffixes f16 / bf16
TC_BWD = re.compile(r"^dattn_bwd_(tc3[a-z]?|sm80|ws)_(f16|bf16)_d(\d+)_kv[01](_mask|_drop|_packed)*$")
SIMPLE_BWD = re.compile(r"^dattn_bwd_(dq|dkdv)_(f32|f16|bf16)$")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _set_dropout(model, p):
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = p


class _DtypeLog:
    """Wraps dattn.ops._fwd_impl and dattn.ops._bwd_impl (the forward and backward bodies
    of every path: the eager ones, the dattn::fwd / dattn::bwd ops and the patched
    layer's fused node) in this process, recording per phase the dtype of q each forward
    and backward call saw, with the head dim and the att span."""

    def __init__(self, ops):
        self.phase = None
        self.seen = {}
        fwd, bwd = ops._fwd_impl, ops._bwd_impl

        def fwd_impl(q, k, v, pk, pq, *a, **kw):
            self._add("fwd", q, pk if pk is not None else pq)
            return fwd(q, k, v, pk, pq, *a, **kw)

        def bwd_impl(dout, q, k, v, pk, pq, *a, **kw):
            self._add("bwd", q, pk if pk is not None else pq)
            return bwd(dout, q, k, v, pk, pq, *a, **kw)

        ops._fwd_impl, ops._bwd_impl = fwd_impl, bwd_impl

    def _add(self, kind, q, table):
        if self.phase is None:
            return
        span = int(table.shape[-2]) // 2 if table is not None else 0
        key = f"{str(q.dtype).replace('torch.', '')} D={int(q.shape[-1])} S={span}"
        d = self.seen.setdefault(self.phase, {"fwd": {}, "bwd": {}})[kind]
        d[key] = d.get(key, 0) + 1

    def dtypes(self, phase, kind):
        return sorted({k.split()[0] for k in self.seen.get(phase, {}).get(kind, {})})


def _fast_bwd_eligible(args, device, cfg):
    """None when launch.cu would route this model's backward calls under autocast to the
    tensor-core kernels, else why not."""
    if AMP[args.autocast] is None:
        return "no autocast (fp32 takes the simple backward)"
    if device.type != "cuda":
        return "not on CUDA"
    if torch.cuda.get_device_capability(device)[0] != 9:
        return "not sm_90 (the tensor-core backward is built for sm_90 only)"
    D = cfg.hidden_size // cfg.num_attention_heads
    S = cfg.position_buckets if cfg.position_buckets > 0 else cfg.max_relative_positions
    if D not in (64, 128):
        return f"head dim {D} not in {{64, 128}}"
    if S > 256 or S % 8:
        return f"att span {S} (needs S <= 256, S % 8 == 0)"
    if args.dropout > 0 and D != 64:
        return f"dropout {args.dropout} with head dim {D} (dropout: D = 64 only)"
    return None


def _worker(rank, world, args, port, result_path):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.backend == "nccl":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    elif args.shared_gpu:
        torch.set_num_threads(1)
        torch.cuda.set_device(0)
        device = torch.device("cuda", 0)
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
    dist.init_process_group(args.backend, rank=rank, world_size=world,
                            device_id=device if args.backend == "nccl" else None)
    try:
        _run(rank, world, args, device, result_path)
    finally:
        dist.destroy_process_group()


def _run(rank, world, args, device, result_path):
    from torch.nn.parallel import DistributedDataParallel as DDP
    from transformers import DebertaV2ForSequenceClassification

    from dattn import hf, ops

    amp = AMP[args.autocast]
    scale = args.loss_scale if amp is torch.float16 else 1.0
    log = _DtypeLog(ops)

    def fwd(m, **kw):
        with torch.autocast(device.type, dtype=amp or torch.bfloat16, enabled=amp is not None):
            return m(**kw)

    cfg = fe.make_config(args)
    torch.manual_seed(args.init_seed)
    model = DebertaV2ForSequenceClassification(cfg)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    model = model.to(device).train()
    dattn.patch(model)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    G = args.global_batch
    assert G % world == 0, "--global-batch must be a multiple of the number of ranks"
    per = G // world
    data_args = argparse.Namespace(**{**vars(args), "steps": 1, "batch": G})
    ids, mask, labels = (t[0] for t in fe.make_data(data_args))
    sl = slice(rank * per, (rank + 1) * per)
    x, m, y = (t[sl].to(device) for t in (ids, mask, labels))

    # 1. one step, dropout off: DDP gradients vs the single-device gradient of the batch
    _set_dropout(model, 0.0)
    t0 = time.perf_counter()
    log.phase = "grad_ddp"
    out = fwd(ddp, input_ids=x, attention_mask=m, labels=y)
    (out.loss * scale).backward()
    path_ddp = hf.last_path
    grads = {n: p.grad.detach().clone() / scale for n, p in model.named_parameters()
             if p.grad is not None}
    report = None
    if rank == 0:
        ref = DebertaV2ForSequenceClassification(cfg)
        ref.load_state_dict(state)
        ref = ref.to(device).train()
        _set_dropout(ref, 0.0)
        dattn.patch(ref)
        log.phase = "grad_single"
        rout = fwd(ref, input_ids=ids.to(device), attention_mask=mask.to(device),
                   labels=labels.to(device))
        (rout.loss * scale).backward()
        log.phase = None
        per_param = []
        worst = 0.0
        missing = []
        nonfinite = []
        for n, p in ref.named_parameters():
            if p.grad is None:
                if n in grads:
                    missing.append(n)
                continue
            if n not in grads:
                missing.append(n)
                continue
            g_ref = p.grad.detach().double() / scale
            g = grads[n].double()
            if not (torch.isfinite(g_ref).all() and torch.isfinite(g).all()):
                nonfinite.append(n)
                continue
            nr = g_ref.norm().item()
            diff = (g - g_ref).norm().item()
            rel = diff / nr if nr > 0 else diff
            worst = max(worst, rel)
            per_param.append((rel, n, nr))
        per_param.sort(reverse=True)
        report = dict(
            n_params=len(per_param), missing=missing, nonfinite=nonfinite, max_rel=worst,
            worst=[dict(name=n, rel=r, ref_norm=nr) for r, n, nr in per_param[:10]],
            norm="per parameter: ||g_ddp - g_single||_2 / ||g_single||_2 (Frobenius)",
            loss_single=rout.loss.item(), loss_ddp_rank0=out.loss.item(),
            loss_scale=scale, path_single=hf.last_path, path_ddp=path_ddp)
        del ref
    t_grad = time.perf_counter() - t0

    # 2. DDP training with dropout on, one fixed global batch
    _set_dropout(model, args.dropout)
    ddp.zero_grad(set_to_none=True)
    opt = torch.optim.AdamW(ddp.parameters(), lr=args.lr, weight_decay=0.01)
    # fp16: a GradScaler as users train (DDP has averaged the gradients before it looks
    # for infs, so every rank skips or steps alike); bf16 has fp32's range, no scaler
    scaler = torch.amp.GradScaler(device.type, enabled=amp is torch.float16)
    eligible = _fast_bwd_eligible(args, device, cfg)
    kernels = None
    torch.manual_seed(args.train_seed + rank)  # different dropout masks per rank, as usual
    losses = []
    log.phase = "train"
    t1 = time.perf_counter()
    for step in range(args.steps):
        prof = None
        if step == 0 and rank == 0 and device.type == "cuda" and amp is not None:
            # which backward kernels a DDP training step runs (kernel names only)
            from torch.profiler import ProfilerActivity, profile
            prof = profile(activities=[ProfilerActivity.CUDA])
            prof.__enter__()
        out = fwd(ddp, input_ids=x, attention_mask=m, labels=y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(out.loss).backward()
        scaler.step(opt)
        scaler.update()
        if prof is not None:
            torch.cuda.synchronize()
            prof.__exit__(None, None, None)
            kernels = {}
            for e in prof.events():
                if e.name.startswith("dattn_"):
                    kernels[e.name] = kernels.get(e.name, 0) + 1
        lo = out.loss.detach().clone()
        dist.all_reduce(lo)  # the global batch's mean loss
        losses.append(lo / world)
    losses = [float(v) for v in torch.stack(losses).cpu()]
    if device.type == "cuda":
        torch.cuda.synchronize()
    t_train = time.perf_counter() - t1
    path_train = hf.last_path
    log.phase = None
    # the ranks hold the same parameters (DDP keeps them in lockstep)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double()
    mine = torch.stack([flat.sum(), (flat * torch.arange(flat.numel(), device=flat.device,
                                                         dtype=flat.dtype).remainder(97)).sum()])
    allv = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(allv, mine)
    in_sync = all(torch.equal(allv[0], a) for a in allv)
    if rank == 0:
        k = min(3, len(losses))
        first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
        want = str(amp or torch.float32).replace("torch.", "")
        seen = {ph: {k: log.dtypes(ph, k) for k in ("fwd", "bwd")}
                for ph in ("grad_ddp", "grad_single", "train")}
        fast = dict(eligible=eligible is None, why_not=eligible, kernels=kernels)
        if kernels is not None:
            dt = {"float16": "f16", "bfloat16": "bf16"}[want]
            tc = [k for k in kernels if TC_BWD.match(k) and TC_BWD.match(k).group(2) == dt]
            simple = [k for k in kernels if SIMPLE_BWD.match(k)]
            fast.update(tensor_core=tc, simple=simple, ok=bool(tc) and not simple)
        gates = dict(
            grads_match=(report["max_rel"] <= args.tol and not report["missing"]
                         and not report["nonfinite"]),
            loss_decreased=last < 0.8 * first,
            ranks_in_sync=in_sync,
            dattn_ran=all(not str(p).startswith("fallback") and p is not None
                          for p in (report["path_single"], report["path_ddp"], path_train)),
            dattn_dtype=all(v == [want] for ph in seen.values() for v in ph.values()),
        )
        if eligible is None:
            gates["fast_bwd"] = bool(fast.get("ok"))
        res = dict(
            what="DDP with dattn: gradients vs single device, then DDP training",
            backend=args.backend, world_size=world,
            devices=([torch.cuda.get_device_name(device)] * world if args.shared_gpu else
                     [torch.cuda.get_device_name(i) for i in range(world)]) if device.type == "cuda" else ["cpu"] * world,
            shared_gpu=bool(args.shared_gpu),
            torch=torch.__version__,
            env={k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                "NVSHMEM_DISABLE_NVLS")},
            config=dict(layers=cfg.num_hidden_layers, hidden=cfg.hidden_size,
                        heads=cfg.num_attention_heads, vocab=cfg.vocab_size, tiny=args.tiny),
            dtype="fp32 (no TF32)" if amp is None else f"autocast {want} (fp32 weights, no TF32)",
            autocast=args.autocast, dattn_dtypes_seen=seen, dattn_calls=log.seen,
            fast_bwd=fast, global_batch=G, per_rank_batch=per, length=args.length,
            tol=args.tol, grad_check=report, train_steps=args.steps, train_lr=args.lr,
            train_dropout=args.dropout, losses=losses, loss_first=first, loss_last=last,
            dattn_path_train=path_train, seconds_grad_check=t_grad, seconds_train=t_train,
            gates=gates, ok=all(gates.values()))
        with open(result_path, "w") as f:
            json.dump(res, f, indent=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["nccl", "gloo"], default=None,
                    help="default: nccl when >= nproc GPUs are visible, else gloo")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--shared-gpu", action="store_true",
                    help="gloo with every rank on cuda:0: dattn's CUDA path under DDP on one GPU "
                    "(where no 2-GPU machine is lent; not the NCCL check)")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--autocast", choices=list(AMP), default="none",
                    help="torch.autocast dtype of the forwards (none: fp32, the default)")
    ap.add_argument("--loss-scale", type=float, default=2.0 ** 16,
                    help="fp16: the fixed loss scale of the gradient check (a power of two)")
    ap.add_argument("--global-batch", type=int, default=None, help="default 16 (tiny: 4)")
    ap.add_argument("--length", type=int, default=None, help="default 128 (tiny: 24)")
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=None, help="default 1e-4 (tiny: 1e-3)")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--label-noise", type=float, default=0.0)
    ap.add_argument("--fillers", type=int, default=8)
    ap.add_argument("--tol", type=float, default=None,
                    help="grad check tolerance; default per --autocast: " +
                    ", ".join(f"{k} {v:g}" for k, v in TOL.items()))
    ap.add_argument("--init-seed", type=int, default=1)
    ap.add_argument("--data-seed", type=int, default=2)
    ap.add_argument("--train-seed", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.backend is None:
        args.backend = "nccl" if torch.cuda.device_count() >= args.nproc and not args.shared_gpu else "gloo"
    if args.shared_gpu and args.backend == "nccl":
        print("ddp_check: --shared-gpu runs gloo (NCCL refuses two ranks on one GPU)")
        return 2
    if args.shared_gpu and not torch.cuda.is_available():
        print("ddp_check: --shared-gpu needs a CUDA device")
        return 2
    if args.backend == "nccl" and torch.cuda.device_count() < args.nproc:
        print(f"ddp_check: nccl needs {args.nproc} GPUs, {torch.cuda.device_count()} visible")
        return 2
    args.global_batch = args.global_batch or (4 if args.tiny else 16)
    args.length = args.length or (24 if args.tiny else 128)
    args.lr = args.lr or (1e-3 if args.tiny else 1e-4)
    args.tol = TOL[args.autocast] if args.tol is None else args.tol
    path = args.json or (os.path.join(os.environ["OUT"], "ddp_check.json")
                         if os.environ.get("OUT") else "ddp_check.json")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if os.path.exists(path):
        os.remove(path)
    print(f"ddp_check: {args.nproc} ranks, backend {args.backend}"
          f"{' (all on cuda:0)' if args.shared_gpu else ''}, "
          f"{'tiny' if args.tiny else 'v3-small-shaped'} "
          f"{'fp32' if args.autocast == 'none' else 'autocast ' + args.autocast}, global batch {args.global_batch}, "
          f"L={args.length}", flush=True)
    t0 = time.perf_counter()
    mp.spawn(_worker, args=(args.nproc, args, _free_port(), path), nprocs=args.nproc, join=True)
    res = json.load(open(path))
    res["wall_s"] = time.perf_counter() - t0
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    gc = res["grad_check"]
    print(f"ddp_check: gradients over {gc['n_params']} parameters: max rel "
          f"{gc['max_rel']:.3g} (tol {args.tol:g}; {gc['norm']}); worst {gc['worst'][0]['name']}")
    print(f"ddp_check: training losses {res['losses'][0]:.4f} -> {res['losses'][-1]:.4f} "
          f"(first/last 3: {res['loss_first']:.4f} / {res['loss_last']:.4f}); paths "
          f"{gc['path_single']}, {gc['path_ddp']}, {res['dattn_path_train']}")
    print("ddp_check: dattn saw " + "; ".join(
        f"{ph} fwd {','.join(v['fwd']) or '-'} bwd {','.join(v['bwd']) or '-'}"
        for ph, v in res["dattn_dtypes_seen"].items()))
    fb = res["fast_bwd"]
    if fb["kernels"] is not None:
        print(f"ddp_check: backward kernels of a profiled DDP step (rank 0): tensor-core "
              f"{fb['tensor_core'] or 'NONE'}, simple {fb['simple'] or 'none'}"
              + ("" if fb["eligible"] else f" (not gated: {fb['why_not']})"))
    elif res["autocast"] != "none":
        print(f"ddp_check: fast backward not gated: {fb['why_not']}")
    print("ddp_check: gates " + ", ".join(f"{k}={'ok' if v else 'FAIL'}" for k, v in res["gates"].items()))
    print(f"ddp_check: {'PASS' if res['ok'] else 'FAIL'} in {res['wall_s']:.1f}s -> {path}", flush=True)
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
