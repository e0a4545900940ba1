"""A layer's q / k / v projections and its position projections in one autograd node.

What this replaces (hf.py ``_self_attention``): ``query_proj(h)``, ``key_proj(h)``,
``value_proj(h)`` and the position projections of the (dropped-out) rel embeddings,
``key_proj(rel)`` / ``query_proj(rel)`` (share_att_key) or ``pos_key_proj(rel)`` /
``pos_query_proj(rel)``, each an ``nn.Linear`` call under autocast. In a training step
autograd then launches, per layer: a cast of h per projection (h is the fp32 output of
a LayerNorm), a cast of rel per position projection, and in the backward a cast of every
fp16 input gradient back to fp32 followed by fp32 adds, fp16 adds summing the two uses of
each shared weight and bias, and one fp32 cast per weight and bias gradient.

``project`` computes the same forward with the same ops (h and rel cast once each, then
the very addmm calls F.linear makes: bitwise equal outputs), and its backward forms:

* dW = dY_c^T h (mm) and, for a weight that also projects rel, += dY_p^T rel (addmm_,
  one rounding of the sum instead of two), written into one buffer holding every weight
  and bias gradient of the layer, cast to the parameters' dtype by one launch;
* db = dY_c.sum(0) (+= dY_p^T 1 by addmv_);
* dh = sum_j dY_j W_j: the products into one [n, N, hidden] buffer and one reduce that
  sums them in the dtype of h (fp32 under autocast: the sum autograd forms, in fp32);
  d(rel) likewise.

Same function, same dtype for every product; gradients differ from autograd's only by
where fp rounding happens (tests/python/test_proj.py pins them against transformers in
fp64 / fp32). hf.py uses it in eager mode only (torch.compile fuses the plain graph
itself), for plain nn.Linear projections without hooks.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn


class Plan:
    """Which linear layers a layer's projections use (static per layer).

    mods: the distinct nn.Linear modules (q, k, v first); pk / pq: index into mods of
    the module projecting rel for that term (None: the term is off)."""

    __slots__ = ("mods", "pk", "pq")

    def __init__(self, mods, pk, pq):
        self.mods, self.pk, self.pq = mods, pk, pq


def plan_for(att, c2p: bool, p2c: bool, relative: bool) -> Optional[Plan]:
    """The Plan of DisentangledSelfAttention ``att``, or None if a projection is not a
    plain nn.Linear with a bias and no hooks (a LoRA wrapper, a quantised layer, ...):
    the caller then calls the modules as before."""
    mods = [att.query_proj, att.key_proj, att.value_proj]
    pk = pq = None
    if relative:
        if att.share_att_key:
            pk = 1 if c2p else None
            pq = 0 if p2c else None
        else:
            if c2p:
                mods.append(att.pos_key_proj)
                pk = len(mods) - 1
            if p2c:
                mods.append(att.pos_query_proj)
                pq = len(mods) - 1
    for m in mods:
        if (type(m) is not nn.Linear or m.bias is None or m._forward_hooks
                or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks):
            return None
    return Plan(tuple(mods), pk, pq)


def _compute_dtype(dev_type: str, dtype: torch.dtype) -> torch.dtype:
    if torch.is_autocast_enabled(dev_type):
        return torch.get_autocast_dtype(dev_type)
    return dtype


def usable(plan: Optional[Plan], h: torch.Tensor, rel: Optional[torch.Tensor]) -> bool:
    """Whether ``project`` computes what the modules would: plain tensors of one floating
    dtype, which autocast (if on) would cast (fp32), on h's device."""
    if plan is None or type(h) is not torch.Tensor or h.dim() < 2:
        return False
    dt, dev = h.dtype, h.device
    if not dt.is_floating_point:
        return False
    if torch.is_autocast_enabled(dev.type) and dt != torch.float32:
        return False  # autocast would cast bf16 / fp16 too, and leave fp64 alone
    if rel is not None and (type(rel) is not torch.Tensor or rel.dtype != dt
                            or rel.device != dev):
        return False
    for m in plan.mods:
        for p in (m.weight, m.bias):
            if type(p.data) is not torch.Tensor or p.dtype != dt or p.device != dev:
                return False
    return True


def compute_dtype(h: torch.Tensor) -> torch.dtype:
    return _compute_dtype(h.device.type, h.dtype)


def _forward(plan, c, h2, rel_c, params):
    """(hc, weights in c, outputs q, k, v[, pk][, pq]) as F.linear under autocast."""
    hc = h2 if h2.dtype == c else h2.to(c)
    wc = [p if p.dtype == c else p.to(c) for p in params]
    outs = [torch.addmm(wc[2 * j + 1], hc, wc[2 * j].t()) for j in range(3)]
    for i in (plan.pk, plan.pq):
        if i is not None:
            outs.append(torch.addmm(wc[2 * i + 1], rel_c, wc[2 * i].t()))
    return hc, wc, outs


def _sum_products(terms, rows, cols, c, out_dtype):
    """sum_j a_j @ b_j (a_j [rows, k], b_j [k, cols], dtype c) in out_dtype. In one dtype
    the GEMMs accumulate (mm, addmm_); otherwise every product is rounded to c (as
    autograd's GEMMs are) into one buffer and a single reduce sums them in out_dtype (the
    fp32 sum autograd forms after casting each gradient back)."""
    if len(terms) == 1:
        r = torch.mm(*terms[0])
        return r if out_dtype == c else r.to(out_dtype)
    if out_dtype == c:
        r = torch.mm(*terms[0])
        for a, b in terms[1:]:
            r.addmm_(a, b)
        return r
    buf = torch.empty(len(terms), rows, cols, dtype=c, device=terms[0][0].device)
    for j, (a, b) in enumerate(terms):
        torch.mm(a, b, out=buf[j])
    return buf.sum(0, dtype=out_dtype)


class _Project(torch.autograd.Function):
    @staticmethod
    def forward(ctx, plan, c, h, rel, rel_c, ones, *params):
        hid = h.shape[-1]
        h2 = h.reshape(-1, hid)
        hc, wc, outs = _forward(plan, c, h2, rel_c, params)
        ctx.plan, ctx.c = plan, c
        ctx.h_shape, ctx.h_dtype = h.shape, h.dtype
        ctx.rel_dtype = rel.dtype if rel is not None else None
        ctx.p_dtype = params[0].dtype
        ctx.save_for_backward(hc, rel_c, ones, *wc)
        ctx.set_materialize_grads(False)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        plan, c = ctx.plan, ctx.c
        hc, rel_c, ones, *wc = ctx.saved_tensors
        n = len(plan.mods)
        N, hid = hc.shape
        gc = [g.reshape(N, -1) if g is not None else None for g in grads[:3]]
        gp = [None] * n  # the rel-side gradient of each module
        k = 3
        for i in (plan.pk, plan.pq):
            if i is not None:
                g = grads[k]
                k += 1
                gp[i] = g
        need = ctx.needs_input_grad
        dh = drel = None
        if need[2]:
            terms = [(g, wc[2 * j]) for j, g in enumerate(gc) if g is not None]
            if terms:
                dh = _sum_products(terms, N, hid, c, ctx.h_dtype).view(ctx.h_shape)
        if need[3]:
            terms = [(gp[i], wc[2 * i]) for i in range(n) if gp[i] is not None]
            if terms:
                drel = _sum_products(terms, rel_c.shape[0], hid, c, ctx.rel_dtype)
        dparams = [None] * (2 * n)
        if any(need[6:]):
            sizes = [w.numel() + w.shape[0] for w in wc[0::2]]
            buf = torch.empty(sum(sizes), dtype=c, device=hc.device)
            spans = []
            off = 0
            for i in range(n):
                w = wc[2 * i]
                o, d_in = w.shape
                g_c = gc[i] if i < 3 else None
                g_p = gp[i]
                if g_c is None and g_p is None:
                    spans.append(None)
                    off += sizes[i]
                    continue
                dw = buf[off:off + o * d_in].view(o, d_in)
                db = buf[off + o * d_in:off + sizes[i]]
                if g_c is not None:
                    torch.mm(g_c.t(), hc, out=dw)
                    torch.sum(g_c, 0, out=db)
                    if g_p is not None:
                        dw.addmm_(g_p.t(), rel_c)
                        db.addmv_(g_p.t(), ones)
                else:
                    torch.mm(g_p.t(), rel_c, out=dw)
                    torch.sum(g_p, 0, out=db)
                spans.append((off, o, d_in))
                off += sizes[i]
            if ctx.p_dtype != c:
                buf = buf.to(ctx.p_dtype)
            for i, s in enumerate(spans):
                if s is None:
                    continue
                off, o, d_in = s
                if need[6 + 2 * i]:
                    dparams[2 * i] = buf[off:off + o * d_in].view(o, d_in)
                if need[7 + 2 * i]:
                    dparams[2 * i + 1] = buf[off + o * d_in:off + o * d_in + o]
        return (None, None, dh, drel, None, None, *dparams)


def project(plan: Plan, h: torch.Tensor, rel: Optional[torch.Tensor],
            rel_c: Optional[torch.Tensor], ones: Optional[torch.Tensor]):
    """(q, k, v, pk, pq) as [N, out] / [2S, out] tensors (pk / pq None when off), where
    N = h.numel() / hidden. rel: the [2S, hidden] position embeddings after pos_dropout
    (gradient flows to it); rel_c: rel detached and cast to the compute dtype (may be
    shared by layers that see the same rel); ones: [2S] ones in the compute dtype (bias
    gradients of the position projections; only read in the backward)."""
    c = compute_dtype(h)
    params = [t for m in plan.mods for t in (m.weight, m.bias)]
    if torch.is_grad_enabled() and (h.requires_grad or (rel is not None and rel.requires_grad)
                                    or any(p.requires_grad for p in params)):
        outs = _Project.apply(plan, c, h, rel, rel_c, ones, *params)
    else:
        outs = _forward(plan, c, h.reshape(-1, h.shape[-1]), rel_c, params)[2]
    q, k, v = outs[:3]
    rest = list(outs[3:])
    pk = rest.pop(0) if plan.pk is not None else None
    pq = rest.pop(0) if plan.pq is not None else None
    return q, k, v, pk, pq
