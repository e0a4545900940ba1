"""One walk over a 12-layer encoder's modules for the probes (hf._probe_keys, through
_probe_reason without precomputed keys), tiny v3 config, on the CPU. Run from the
repository root:

    DATTN_LIBRARY=build/libdattn.so PYTHONPATH=python python3 bench/results/host-2026-12-04-cpu-python/probe_walk.py
"""
import time

import torch
from transformers import DebertaV2Model

from dattn import hf, testing

cfg = testing.config("v3", layers=12, dropout=0.1, attention_dropout=0.1)
enc = DebertaV2Model(cfg).encoder.train()
x = torch.randn(2, 16, cfg.hidden_size, requires_grad=True)
for packed in (False, True):
    hf._probe_reason(enc, x, packed)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(2000):
            hf._probe_reason(enc, x, packed)
        best = min(best, (time.perf_counter() - t) / 2000 * 1e6)
    print(f"packed={packed}: {best:.1f} us a walk + probe (best of 5 x 2000)")
