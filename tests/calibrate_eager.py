"""Measures the error of transformers' eager DisentangledSelfAttention against float64 in
the metric of the C tests' tolerance rule (documented at the top of tests/test_sweep.c):

    bound = eps(dtype) * (A |ref| + B mag) + F max(1, sqrt(L/512)) eps32 smag + tiny

(B: BO for out, BV for dv, BS for dq, dk, dpk, dpq)

It runs the real transformers module, with forward hooks that replace the outputs of
query/key/value/pos_key/pos_query projections by tensors drawn like the C tests draw
them (uniform, rounded to the dtype), computes float64 values and the magnitudes mag and
smag (as ref64.h defines them) from those tensors, and prints, per dtype and output, the
smallest over shapes of max(|eager - ref| / bound). The SPEC acceptance rule is "at most
2x the error of the eager path": a value >= 0.5 means the C bound is no looser than that.

    /work/venv/bin/python tests/calibrate_eager.py [--seed N] [--amp 2] [--A 1 ...]

Not part of `make test` (it needs torch + transformers); run it by hand when the
tolerances change. The numbers of the last run are quoted in tests/test_sweep.c.
"""
import argparse
import math

import numpy as np
import torch
from transformers import DebertaV2Config
from transformers.models.deberta_v2.modeling_deberta_v2 import (
    DisentangledSelfAttention, build_relative_position)

# The C tests' constants (tprob.h): bound = eps*(A|ref| + B*mag) + F*max(1,sqrt(L/512))*eps32*smag
TOL = {"A": 1.0, "BO": 0.25, "BV": 0.125, "BS": 0.5, "F": 4.0}
EPS = {torch.float32: 2.0**-23, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
TINY = {torch.float32: 2.0**-149, torch.float16: 2.0**-24, torch.bfloat16: 2.0**-133}


def make_mask(B, L, rng):
    m = np.ones((B, L), dtype=bool)
    for b in range(B):
        pat = b % 4
        n = int(rng.integers(1, L))
        if pat == 0:
            m[b, n:] = False            # right padding
        elif pat == 1:
            m[b, :L - n] = False        # left padding
        elif pat == 2:
            m[b] = rng.random(L) < 0.7  # holes
            m[b, rng.integers(L)] = True
    return m


def ref64(q, k, v, pk, pq, slot, mask, dout, c2p, p2c, scale):
    """q,k,v,dout [B,H,L,D]; pk,pq [H,2S,D]; slot [L,L]; mask [B,L] -> values + mags."""
    B, H, L, D = q.shape
    S2 = pk.shape[1] if pk is not None else pq.shape[1]
    out = np.zeros_like(q); mag = np.zeros_like(q); smag = np.zeros_like(q)
    g = {n: np.zeros_like(q) for n in ("dq", "dk", "dv")}
    gm = {n: np.zeros_like(q) for n in ("dq", "dk", "dv")}
    gs = {n: np.zeros_like(q) for n in ("dq", "dk", "dv")}
    for n in ("dpk", "dpq"):
        g[n] = np.zeros((H, S2, D)); gm[n] = np.zeros((H, S2, D)); gs[n] = np.zeros((H, S2, D))
    rows = np.repeat(np.arange(L)[:, None], L, 1)
    cols = np.repeat(np.arange(L)[None, :], L, 0)
    for b in range(B):
        valid = mask[b]
        for h in range(H):
            Q, K, V, dO = q[b, h], k[b, h], v[b, h], dout[b, h]
            s = Q @ K.T
            if c2p:
                s = s + (Q @ pk[h].T)[rows, slot]
            if p2c:
                s = s + (K @ pq[h].T)[cols, slot]
            s = s / scale
            sig = np.abs(Q) @ np.abs(K).T
            if c2p:
                sig = sig + (np.abs(Q) @ np.abs(pk[h]).T)[rows, slot]
            if p2c:
                sig = sig + (np.abs(K) @ np.abs(pq[h]).T)[cols, slot]
            sig = sig / scale
            s = np.where(valid[None, :], s, -np.inf)
            P = np.exp(s - s.max(1, keepdims=True))
            P = P / P.sum(1, keepdims=True)
            P[~valid, :] = 1.0 / L          # padded rows: uniform over all L keys
            E = 1.0 + sig + (P * sig).sum(1, keepdims=True)
            E[~valid, :] = 1.0
            out[b, h] = P @ V
            mag[b, h] = P @ np.abs(V)
            smag[b, h] = (P * E) @ np.abs(V)
            g["dv"][b, h] = P.T @ dO
            gm["dv"][b, h] = P.T @ np.abs(dO)
            gs["dv"][b, h] = (P * E).T @ np.abs(dO)
            dP = dO @ V.T
            dPm = np.abs(dO) @ np.abs(V).T
            Dv = (P * dP).sum(1, keepdims=True)
            Dm = (P * dPm).sum(1, keepdims=True)
            dS = P * (dP - Dv) / scale
            W = P * (dPm + Dm) / scale
            dS[~valid, :] = 0.0
            W[~valid, :] = 0.0
            Ws = W * E
            g["dq"][b, h] = dS @ K
            g["dk"][b, h] = dS.T @ Q
            gm["dq"][b, h] = W @ np.abs(K)
            gm["dk"][b, h] = W.T @ np.abs(Q)
            gs["dq"][b, h] = Ws @ np.abs(K)
            gs["dk"][b, h] = Ws.T @ np.abs(Q)

            def by_slot(M):
                A = np.zeros((L, S2)); C = np.zeros((L, S2))
                np.add.at(A, (rows, slot), M)   # A[i, t] = sum_j M[i, j] [slot = t]
                np.add.at(C, (cols, slot), M)   # C[j, t] = sum_i M[i, j] [slot = t]
                return A, C
            A, C = by_slot(dS)
            Am, Cm = by_slot(W)
            As, Cs = by_slot(Ws)
            if c2p:
                g["dq"][b, h] += A @ pk[h]
                gm["dq"][b, h] += Am @ np.abs(pk[h])
                gs["dq"][b, h] += As @ np.abs(pk[h])
                g["dpk"][h] += A.T @ Q
                gm["dpk"][h] += Am.T @ np.abs(Q)
                gs["dpk"][h] += As.T @ np.abs(Q)
            if p2c:
                g["dk"][b, h] += C @ pq[h]
                gm["dk"][b, h] += Cm @ np.abs(pq[h])
                gs["dk"][b, h] += Cs @ np.abs(pq[h])
                g["dpq"][h] += C.T @ K
                gm["dpq"][h] += Cm.T @ np.abs(K)
                gs["dpq"][h] += Cs.T @ np.abs(K)
    return out, mag, smag, g, gm, gs


def run(dtype, B, L, H, D, pb, M, pos, seed, amp):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    cfg = DebertaV2Config(hidden_size=H * D, num_attention_heads=H, relative_attention=True,
                          pos_att_type=list(pos), position_buckets=pb,
                          max_relative_positions=M, share_att_key=False,
                          attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0)
    att = DisentangledSelfAttention(cfg).to(dtype).eval()
    S = pb if pb > 0 else M
    # The same input distribution as the C tests (tprob.c): q, k, pk, pq uniform in
    # (-amp, amp), v in (-2, 2), dout in (-1, 1), all rounded to the dtype. Forward hooks
    # replace the projections' outputs by these tensors, so the eager path runs on
    # exactly them and their .grad are the eager gradients.
    def uni(shape, a):
        return ((torch.rand(shape, dtype=torch.float64) * 2 - 1) * a).to(dtype)
    given = {"q": uni((B, L, H * D), amp), "k": uni((B, L, H * D), amp),
             "v": uni((B, L, H * D), 2.0), "pk": uni((1, 2 * S, H * D), amp),
             "pq": uni((1, 2 * S, H * D), amp)}
    cap = {}

    def hook(name):
        def f(_mod, _inp, _out):
            t = given[name].clone().requires_grad_(True)
            cap[name] = t
            return t
        return f
    att.query_proj.register_forward_hook(hook("q"))
    att.key_proj.register_forward_hook(hook("k"))
    att.value_proj.register_forward_hook(hook("v"))
    if "c2p" in pos:
        att.pos_key_proj.register_forward_hook(hook("pk"))
    if "p2c" in pos:
        att.pos_query_proj.register_forward_hook(hook("pq"))
    x = torch.randn(B, L, H * D).to(dtype)
    rel = torch.randn(2 * S, H * D).to(dtype)
    mask = make_mask(B, L, rng)
    m = torch.tensor(mask)
    am = (m[:, None, :, None] & m[:, None, None, :]).to(torch.uint8)
    out, _ = att(x, am, rel_embeddings=rel)
    dout = uni(tuple(out.shape), 1.0)
    out.backward(dout)

    def heads(t):  # [B, L, H*D] -> [B, H, L, D] float64
        return t.detach().double().view(t.shape[0], t.shape[1], H, D).permute(0, 2, 1, 3).numpy()

    def pos_t(t):  # [1, 2S, H*D] -> [H, 2S, D]
        return t.detach().double()[0].view(2 * S, H, D).permute(1, 0, 2).numpy()
    q, k, v = heads(cap["q"]), heads(cap["k"]), heads(cap["v"])
    pk = pos_t(cap["pk"]) if "pk" in cap else None
    pq = pos_t(cap["pq"]) if "pq" in cap else None
    rp = build_relative_position(torch.zeros(1, L, 1), torch.zeros(1, L, 1), pb, M)[0]
    slot = torch.clamp(rp + S, 0, 2 * S - 1).numpy()
    f = 1 + ("c2p" in pos) + ("p2c" in pos)
    scale = float(torch.sqrt(torch.tensor(float(D)) * f))
    r_out, r_mag, r_smag, g, gm, gs = ref64(q, k, v, pk, pq, slot, mask, heads(dout), "c2p" in pos,
                                "p2c" in pos, scale)
    eps, tiny = EPS[dtype], TINY[dtype]

    floor = TOL["F"] * max(1.0, math.sqrt(L / 512.0)) * 2.0**-23

    def ratio(got, ref, mg, sm, kind):
        bnd = eps * (TOL["A"] * np.abs(ref) + TOL[kind] * mg) + floor * sm + tiny
        return float(np.max(np.abs(got - ref) / bnd))
    res = {"out": ratio(heads(out), r_out, r_mag, r_smag, "BO")}
    for n, t in (("dq", "q"), ("dk", "k"), ("dv", "v")):
        res[n] = ratio(heads(cap[t].grad), g[n], gm[n], gs[n], "BV" if n == "dv" else "BS")
    if pk is not None:
        res["dpk"] = ratio(pos_t(cap["pk"].grad), g["dpk"], gm["dpk"], gs["dpk"], "BS")
    if pq is not None:
        res["dpq"] = ratio(pos_t(cap["pq"].grad), g["dpq"], gm["dpq"], gs["dpq"], "BS")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--amp", type=float, default=2.0)
    for k in TOL:
        ap.add_argument("--" + k, type=float, default=TOL[k])
    a = ap.parse_args()
    for k in TOL:
        TOL[k] = getattr(a, k)
    torch.set_num_threads(1)
    worst = {}
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for (L, pos, pb, M) in ((64, ("c2p", "p2c"), 256, 512), (257, ("c2p", "p2c"), 256, 512),
                                (513, ("c2p", "p2c"), 256, 512), (200, ("c2p",), 32, 128),
                                (200, ("p2c",), -1, 64)):
            r = run(dtype, 2, L, 2, 64, pb, M, pos, a.seed + L, a.amp)
            print(f"{str(dtype):15s} L={L:4d} {'+'.join(pos):8s} " +
                  " ".join(f"{n}={x:7.3f}" for n, x in r.items()), flush=True)
            for n, x in r.items():
                key = (dtype, n)
                worst[key] = min(worst.get(key, math.inf), x)
    print("smallest eager max(err / bound) per dtype/output (the C bound is at most 2x the "
          "eager error, in this metric, when every value is >= 0.5):")
    for (dtype, n), x in sorted(worst.items(), key=lambda t: (str(t[0][0]), t[0][1])):
        print(f"  {str(dtype):15s} {n:4s} {x:8.3f}")


if __name__ == "__main__":
    main()
