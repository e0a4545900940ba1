#!/usr/bin/env python3
"""DDP check (issue 5): dattn under torch.distributed DistributedDataParallel.

Spawns --nproc processes (default 2; backend nccl, one GPU each, or gloo on the CPU for
CI). Each builds the same random-weight classifier (DeBERTa-v3-small encoder shape by
default, fp32, no TF32; --tiny: 2 layers of hidden 64), patched with dattn.patch.

1. Gradient check, dropout off (every nn.Dropout set to p = 0 for this step): one
   forward/backward of a global batch of --global-batch sequences split evenly over the
   ranks under DDP (mean loss per rank; DDP averages the gradients), against the same
   model without DDP on rank 0's device computing the mean loss of the whole global batch.
   For every parameter: rel = ||g_ddp - g_single||_2 / ||g_single||_2 (Frobenius norm
   over the parameter's elements; a parameter whose reference gradient is exactly zero
   compares ||g_ddp||_2 with 0). Pass: max over parameters of rel <= --tol (1e-5).
2. Training, dropout on (hidden and attention 0.1): --steps (20) DDP steps with AdamW on
   one fixed global batch; pass when the mean loss of the last 3 steps is below 0.8x that
   of the first 3, and the ranks hold bitwise identical parameters at the end.

NCCL's NVLink multicast is kept off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1: set here and inherited by the workers).

Usage:  python3 scripts/ddp_check.py [--backend nccl|gloo] [--tiny] [--json PATH]
JSON (default $OUT/ddp_check.json when $OUT is set): per-parameter worst errors, norms,
loss curve, wall time, devices, pass/fail. Exit 1 on failure.
"""

from __future__ import annotations

import argparse
import json
import os
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _set_dropout(model, p):
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = p


def _worker(rank, world, args, port, result_path):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.backend == "nccl":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
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

    from dattn import hf

    cfg = fe.make_config(args)
    torch.manual_seed(args.init_seed)
    model = DebertaV2ForSequenceClassification(cfg)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    model = model.to(device).train()
    dattn.patch(model)
    ddp = DDP(model, device_ids=[rank] if device.type == "cuda" else None)

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
    out = ddp(input_ids=x, attention_mask=m, labels=y)
    out.loss.backward()
    path_ddp = hf.last_path
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    report = None
    if rank == 0:
        ref = DebertaV2ForSequenceClassification(cfg)
        ref.load_state_dict(state)
        ref = ref.to(device).train()
        _set_dropout(ref, 0.0)
        dattn.patch(ref)
        rout = ref(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device))
        rout.loss.backward()
        per_param = []
        worst = 0.0
        missing = []
        for n, p in ref.named_parameters():
            if p.grad is None:
                if n in grads:
                    missing.append(n)
                continue
            if n not in grads:
                missing.append(n)
                continue
            g_ref = p.grad.detach().double()
            g = grads[n].double()
            nr = g_ref.norm().item()
            diff = (g - g_ref).norm().item()
            rel = diff / nr if nr > 0 else diff
            worst = max(worst, rel)
            per_param.append((rel, n, nr))
        per_param.sort(reverse=True)
        report = dict(
            n_params=len(per_param), missing=missing, max_rel=worst,
            worst=[dict(name=n, rel=r, ref_norm=nr) for r, n, nr in per_param[:10]],
            norm="per parameter: ||g_ddp - g_single||_2 / ||g_single||_2 (Frobenius)",
            loss_single=rout.loss.item(), path_single=hf.last_path, path_ddp=path_ddp)
        del ref
    t_grad = time.perf_counter() - t0

    # 2. DDP training with dropout on, one fixed global batch
    _set_dropout(model, args.dropout)
    ddp.zero_grad(set_to_none=True)
    opt = torch.optim.AdamW(ddp.parameters(), lr=args.lr, weight_decay=0.01)
    torch.manual_seed(args.train_seed + rank)  # different dropout masks per rank, as usual
    losses = []
    t1 = time.perf_counter()
    for _ in range(args.steps):
        out = ddp(input_ids=x, attention_mask=m, labels=y)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        opt.step()
        lo = out.loss.detach().clone()
        dist.all_reduce(lo)  # the global batch's mean loss
        losses.append(lo / world)
    losses = [float(v) for v in torch.stack(losses).cpu()]
    if device.type == "cuda":
        torch.cuda.synchronize()
    t_train = time.perf_counter() - t1
    path_train = hf.last_path
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
        gates = dict(
            grads_match=report["max_rel"] <= args.tol and not report["missing"],
            loss_decreased=last < 0.8 * first,
            ranks_in_sync=in_sync,
            dattn_ran=all(not str(p).startswith("fallback") and p is not None
                          for p in (report["path_single"], report["path_ddp"], path_train)),
        )
        res = dict(
            what="DDP with dattn: gradients vs single device, then DDP training",
            backend=args.backend, world_size=world,
            devices=[torch.cuda.get_device_name(i) for i in range(world)] if device.type == "cuda" else ["cpu"] * world,
            torch=torch.__version__,
            env={k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                "NVSHMEM_DISABLE_NVLS")},
            config=dict(layers=cfg.num_hidden_layers, hidden=cfg.hidden_size,
                        heads=cfg.num_attention_heads, vocab=cfg.vocab_size, tiny=args.tiny),
            dtype="fp32 (no TF32)", global_batch=G, per_rank_batch=per, length=args.length,
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
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--global-batch", type=int, default=None, help="default 16 (tiny: 4)")
    ap.add_argument("--length", type=int, default=None, help="default 128 (tiny: 24)")
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=None, help="default 1e-4 (tiny: 1e-3)")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--label-noise", type=float, default=0.0)
    ap.add_argument("--fillers", type=int, default=8)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--init-seed", type=int, default=1)
    ap.add_argument("--data-seed", type=int, default=2)
    ap.add_argument("--train-seed", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.backend is None:
        args.backend = "nccl" if torch.cuda.device_count() >= args.nproc else "gloo"
    if args.backend == "nccl" and torch.cuda.device_count() < args.nproc:
        print(f"ddp_check: nccl needs {args.nproc} GPUs, {torch.cuda.device_count()} visible")
        return 2
    args.global_batch = args.global_batch or (4 if args.tiny else 16)
    args.length = args.length or (24 if args.tiny else 128)
    args.lr = args.lr or (1e-3 if args.tiny else 1e-4)
    path = args.json or (os.path.join(os.environ["OUT"], "ddp_check.json")
                         if os.environ.get("OUT") else "ddp_check.json")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if os.path.exists(path):
        os.remove(path)
    print(f"ddp_check: {args.nproc} ranks, backend {args.backend}, "
          f"{'tiny' if args.tiny else 'v3-small-shaped'} fp32, global batch {args.global_batch}, "
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
    print("ddp_check: gates " + ", ".join(f"{k}={'ok' if v else 'FAIL'}" for k, v in res["gates"].items()))
    print(f"ddp_check: {'PASS' if res['ok'] else 'FAIL'} in {res['wall_s']:.1f}s -> {path}", flush=True)
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
