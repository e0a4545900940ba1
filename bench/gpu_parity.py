#!/usr/bin/env python3
"""SPEC's acceptance rule on the GPU, forward only: for every config kind of
dattn.testing, every dtype and padded / packed inputs, the error of the dattn-patched
encoder against a float64 reference (the same model in float64, transformers' eager
path) is at most 2x the error of transformers' own eager path in that dtype, plus a
rounding floor. Models are small (D = 64, 2 layers, random weights, eval, no grad) so
that the CUDA forward runs (the CUDA backward is the training issue's).
"tf32": the fp32 model with PyTorch's TF32 switch on (torch.backends.cuda.matmul.allow_tf32)
for both runs: transformers' matmuls and projections in TF32, dattn's attention on its TF32
kernel (the Python layer follows the switch) -- the same rule, TF32 against TF32.

usage: python3 bench/gpu_parity.py [--json out.json]
"""
import argparse
import copy
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("DATTN_LIBRARY", os.path.join(ROOT, "build", "libdattn.so"))

import dattn  # noqa: E402
from dattn import hf, testing  # noqa: E402
from transformers import DebertaV2Model  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true", help="short sequences (a CPU dry run)")
    args = ap.parse_args()
    dev = args.device
    rows = []
    bad = 0
    for kind in testing.KINDS:
        cfg = testing.config(kind, hidden=768, heads=12, layers=2, max_position=2048,
                             buckets=256, max_relative=512)
        torch.manual_seed(0)
        m64 = DebertaV2Model(cfg).to(dev).double().eval()
        shapes = ((300, [300, 181, 57], "padded"), (700, [700, 413, 96], "packed"),
                  (1100, [1100, 1100], "padded"))
        if args.small:
            shapes = ((40, [40, 23, 7], "padded"), (33, [33, 20, 5], "packed"))
        for L, lens, mode in shapes:
            B = len(lens)
            ids = torch.randint(0, cfg.vocab_size, (B, L), device=dev)
            mask = testing.lengths_mask(lens, L, "right", device=dev)
            with torch.no_grad():
                ref = m64(input_ids=ids, attention_mask=mask).last_hidden_state
            valid = mask.bool()
            for dt in (torch.float16, torch.bfloat16, torch.float32, "tf32"):
                tf32 = dt == "tf32"
                m = copy.deepcopy(m64).to(torch.float32 if tf32 else dt)
                torch.backends.cuda.matmul.allow_tf32 = tf32
                try:
                    with torch.no_grad():
                        eager = m(input_ids=ids, attention_mask=mask).last_hidden_state.double()
                        dattn.patch(m, mode=mode)
                        ours = m(input_ids=ids, attention_mask=mask).last_hidden_state.double()
                        path = hf.last_path
                        dattn.unpatch(m)
                finally:
                    torch.backends.cuda.matmul.allow_tf32 = False
                e_eager = (eager - ref)[valid].abs().max().item()
                e_ours = (ours - ref)[valid].abs().max().item()
                floor = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 1e-5,
                         "tf32": 1e-3}[dt] * ref[valid].abs().max().item()
                ok = path == mode and e_ours <= 2 * e_eager + floor and bool(torch.isfinite(ours[valid]).all())
                bad += not ok
                rows.append(dict(kind=kind, L=L, lens=lens, mode=mode, dtype="tf32" if tf32 else str(dt).split(".")[-1],
                                 path=path, err_dattn=e_ours, err_eager=e_eager, floor=floor,
                                 ratio=e_ours / e_eager if e_eager else None, ok=ok))
                print("%-8s L=%-5d %-6s %-8s path=%-7s dattn %.3e eager %.3e ratio %5.2f %s" % (
                    kind, L, mode, rows[-1]["dtype"], path, e_ours, e_eager,
                    rows[-1]["ratio"] or float("nan"), "ok" if ok else "FAIL"), flush=True)
                del m
        del m64
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, failed=bad), f, indent=1)
    print("%d passed, %d failed" % (len(rows) - bad, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
