"""A layer's q / k / v projections and its position projections in one autograd node.

What this replaces (hf.py ``_self_attention``): ``query_proj(h)``, ``key_proj(h)``,
``value_proj(h)`` and the position projections of the (dropped-out) rel embeddings,
``key_proj(rel)`` / ``query_proj(rel)`` (share_att_key) or ``pos_key_proj(rel)`` /
``pos_query_proj(rel)``, each an ``nn.Linear`` call under autocast. In a training step
autograd then launches, per layer: a cast of h per projection (h is the fp32 output of
a LayerNorm), a cast of rel per position projection, a cast per weight and bias, and in
the backward three GEMMs / a reduce per call, a cast of every fp16 input gradient back
to fp32 followed by fp32 adds, fp16 adds summing the two uses of each shared weight and
bias, and one fp32 cast per weight and bias gradient: 49 launches per layer
(share_att_key, c2p|p2c, autocast) for what this node does in 21 (bench/count_ops.py).

Forward (``_forward``): h cast once, rel cast once per distinct rel (hf.py), the layer's
weights and biases concatenated and cast by one launch each (the same conversion), then
the very F.linear calls the modules make: the outputs are bitwise equal.
Backward (``_Project``): see its docstring. Same function, every product in the dtype
autograd uses; sums of products accumulate inside GEMMs (one rounding instead of one per
term), so gradients differ from autograd's by rounding only (tests/python/test_proj.py
pins them against transformers and the module calls, SPEC's rule under autocast).
hf.py uses the node in eager mode only (torch.compile fuses the plain graph itself), for
plain nn.Linear projections of one shape, without hooks. In a training step it uses
``_LayerAttention`` instead: the same projections and dattn's attention in one node.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn.modules import module as _m

from . import ops

_PLAIN = (torch.Tensor, nn.Parameter)  # not a tensor subclass (DTensor, a quantised weight...)


class Plan:
    """A layer's projections (built per call: modules can be swapped or hooked anytime).

    mods: the distinct nn.Linear modules, in the order q, k, v, then (share_att_key off)
    pos_query_proj, pos_key_proj when their term is on; all of one shape [o, i].
    params: their (weight, bias) flattened. pk / pq: index into mods of the module that
    projects rel for that term (None: the term is off). The modules of the position
    terms are consecutive, query side first (share_att_key: q, k); p0 / npos: the first
    of them and their count."""

    __slots__ = ("mods", "params", "pk", "pq", "p0", "npos", "o", "i")

    def __init__(self, mods, params, pk, pq):
        self.mods, self.params, self.pk, self.pq = mods, params, pk, pq
        self.npos = (pk is not None) + (pq is not None)
        self.p0 = pq if pq is not None else pk
        self.o, self.i = params[0].shape


def plan_for(att, c2p: bool, p2c: bool, relative: bool) -> Optional[Plan]:
    """The Plan of DisentangledSelfAttention ``att``, or None if a projection is not a
    plain nn.Linear with a bias and no hooks (a LoRA wrapper, a quantised layer, ...) or
    the projections differ in shape: the caller then calls the modules as before."""
    mods = [att.query_proj, att.key_proj, att.value_proj]
    pk = pq = None
    if relative:
        if att.share_att_key:
            pk = 1 if c2p else None
            pq = 0 if p2c else None
        else:
            if p2c:
                mods.append(att.pos_query_proj)
                pq = len(mods) - 1
            if c2p:
                mods.append(att.pos_key_proj)
                pk = len(mods) - 1
    params = []
    shape = None
    for m in mods:
        if (type(m) is not nn.Linear or m._forward_hooks or m._forward_pre_hooks
                or m._backward_hooks or m._backward_pre_hooks):
            return None
        d = m._parameters
        w, b = d.get("weight"), d.get("bias")
        if b is None or w is None or w.dim() != 2:
            return None
        if shape is None:
            shape = w.shape
        elif w.shape != shape:
            return None
        params += (w, b)
    return Plan(mods, params, pk, pq)


def compute_dtype(h: torch.Tensor) -> torch.dtype:
    dev_type = h.device.type
    if torch.is_autocast_enabled(dev_type):
        return torch.get_autocast_dtype(dev_type)
    return h.dtype


def usable(plan: Optional[Plan], h: torch.Tensor, rel: Optional[torch.Tensor]) -> bool:
    """Whether ``project`` computes what the modules would: plain tensors of one floating
    dtype, which autocast (if on) would cast (fp32), on h's device, and no global module
    hooks (which the module calls would run)."""
    if plan is None or type(h) not in _PLAIN or h.dim() < 2:
        return False
    dt, dev = h.dtype, h.device
    if not dt.is_floating_point:
        return False
    if dt != torch.float32 and torch.is_autocast_enabled(dev.type):
        return False  # autocast would cast bf16 / fp16 too, and leave fp64 alone
    if rel is not None and (type(rel) not in _PLAIN or rel.dtype != dt or rel.device != dev):
        return False
    for p in plan.params:
        if type(p) not in _PLAIN or p.dtype != dt or p.device != dev:
            return False
    return not _global_hooks()


def _global_hooks() -> bool:
    return bool(_m._global_forward_hooks or _m._global_forward_pre_hooks
                or _m._global_backward_hooks or _m._global_backward_pre_hooks)


def _forward(plan, c, h2, rel_c, params):
    """(hc, wcat, outputs q, k, v[, pk][, pq]): the casts autocast makes (h once; every
    weight and bias once, as one concatenation of the flat fp32 parameters and one cast
    of it: the same conversion, so the same values) and the F.linear calls of the
    modules (an addmm each: the same bits). wcat: the weights in c, concatenated
    [n * o, i] (None when no cast was needed)."""
    hc = h2 if h2.dtype == c else h2.to(c)
    if params[0].dtype == c:
        W, B, wcat = params[0::2], params[1::2], None
    else:
        n, o, i = len(plan.mods), plan.o, plan.i
        flat = torch.cat([p.reshape(-1) for p in params[0::2]] + list(params[1::2])).to(c)
        wcat = flat.narrow(0, 0, n * o * i).view(n * o, i)
        W = wcat.view(n, o, i).unbind(0)
        B = flat.narrow(0, n * o * i, n * o).view(n, o).unbind(0)
    outs = [F.linear(hc, W[0], B[0]), F.linear(hc, W[1], B[1]), F.linear(hc, W[2], B[2])]
    if plan.pk is not None:
        outs.append(F.linear(rel_c, W[plan.pk], B[plan.pk]))
    if plan.pq is not None:
        outs.append(F.linear(rel_c, W[plan.pq], B[plan.pq]))
    return hc, wcat, outs


def _side_by_side(gs, rows, o) -> bool:
    """Whether gs (each [rows, o]) already lie side by side in one buffer as the column
    blocks of a dense [rows, len(gs) * o] matrix: what the eager attention backward writes
    for this node's outputs (ops._fused_qkv / _fused_pos)."""
    n, g0 = len(gs), gs[0]
    if rows < 2 or o < 2:
        return False
    p0, es, st = g0.data_ptr(), g0.element_size(), (n * o, 1)
    base = g0.untyped_storage().data_ptr()
    for j, g in enumerate(gs):
        if (g.dtype != g0.dtype or g.shape != (rows, o) or g.stride() != st
                or g.data_ptr() != p0 + j * o * es or g.untyped_storage().data_ptr() != base):
            return False
    return True


def _cat_cols(gs, rows, o, like):
    """[rows, len(gs) * o]: the gradients side by side (one launch; a missing one 0;
    none when they already are)."""
    gs = [g if g is not None else like.new_zeros(rows, o) for g in gs]
    if len(gs) == 1:
        return gs[0]
    if _side_by_side(gs, rows, o):
        return gs[0].as_strided((rows, len(gs) * o), (len(gs) * o, 1))
    return torch.stack(gs, dim=1).view(rows, len(gs) * o)


def _pos_cols(plan, dpk, dpq) -> list:
    """dpq, dpk in Gp's column order (query side first: the position modules' order from
    plan.p0), the absent terms left out."""
    return ([dpq] if plan.pq is not None else []) + ([dpk] if plan.pk is not None else [])


def _keep_meta(ctx, plan, c, h, rel, params):
    """What the backward (param_grads) needs besides the saved tensors."""
    ctx.plan, ctx.c = plan, c
    ctx.h_shape, ctx.h_dtype = h.shape, h.dtype
    ctx.rel_dtype = rel.dtype if rel is not None else None
    ctx.p_dtype = params[0].dtype


def _saved_weights(wcat, params):
    """The weights the backward multiplies by: the cast concatenation, or (no cast was
    needed) the modules' own weights."""
    return (wcat,) if wcat is not None else tuple(params[0::2])


def param_grads(ctx, hc, rel_c, ones, w, G, Gp, need_h, need_rel, need_params):
    """(dh, drel, the parameter gradients in params' order) from G = [dq | dk | dv]
    ([N, 3 o] or None) and Gp = [dpq | dpk] ([2S, npos o] or None); ctx: _keep_meta's
    fields; w: _saved_weights; need_params: a flag per parameter."""
    plan, c = ctx.plan, ctx.c
    wcat = w[0] if len(w) == 1 else torch.cat(w)
    n, o, i = len(plan.mods), plan.o, plan.i
    N = hc.shape[0]
    dh = drel = None
    if G is not None and need_h:
        dh = torch.mm(G, wcat if n == 3 else wcat.narrow(0, 0, 3 * o))
        if dh.dtype != ctx.h_dtype:
            dh = dh.to(ctx.h_dtype)
        dh = dh.view(ctx.h_shape)
    if Gp is not None:
        r0, r1 = plan.p0 * o, (plan.p0 + plan.npos) * o
        if need_rel:
            drel = torch.mm(Gp, wcat.narrow(0, r0, r1 - r0))
            if drel.dtype != ctx.rel_dtype:
                drel = drel.to(ctx.rel_dtype)
    if not any(need_params) or (G is None and Gp is None):
        return dh, drel, (None,) * (2 * n)
    buf = torch.empty(n * o * (i + 1), dtype=c, device=hc.device)
    dW = buf.narrow(0, 0, n * o * i).view(n * o, i)
    db = buf.narrow(0, n * o * i, n * o)
    if G is None:
        G = hc.new_zeros(N, 3 * o)
    if n == 3:
        torch.mm(G.t(), hc, out=dW)
        torch.sum(G, 0, out=db)
    else:
        torch.mm(G.t(), hc, out=dW.narrow(0, 0, 3 * o))
        torch.sum(G, 0, out=db.narrow(0, 0, 3 * o))
    have = n if Gp is not None else 3
    if Gp is not None:
        if plan.p0 < 3:  # rows shared with the content projections
            Gpt = Gp.t()
            dW.narrow(0, r0, r1 - r0).addmm_(Gpt, rel_c)
            db.narrow(0, r0, r1 - r0).addmv_(Gpt, ones)
        else:
            torch.mm(Gp.t(), rel_c, out=dW.narrow(0, r0, r1 - r0))
            torch.sum(Gp, 0, out=db.narrow(0, r0, r1 - r0))
    if ctx.p_dtype != c:
        buf = buf.to(ctx.p_dtype)
    ws = buf.narrow(0, 0, n * o * i).view(n, o, i).unbind(0)
    bs = buf.narrow(0, n * o * i, n * o).view(n, o).unbind(0)
    dparams = []
    for j in range(n):
        if j < have:
            dparams += (ws[j] if need_params[2 * j] else None,
                        bs[j] if need_params[2 * j + 1] else None)
        else:
            dparams += (None, None)
    return dh, drel, tuple(dparams)


class _Project(torch.autograd.Function):
    """Forward: _forward. Backward, with G = [dq | dk | dv] ([N, 3 o], one launch) and
    Gp = [dpq | dpk] ([2S, 2 o]) against the concatenated weights:
    dh = G Wcat[q, k, v] (one GEMM), d(rel) = Gp Wcat[pos] (one GEMM), dWcat[q, k, v] =
    G^T h (one GEMM) += Gp^T rel on the shared rows (addmm_; share_att_key off: its own
    rows), db = column sums (+= Gp^T 1 by addmv_), all parameter gradients in one buffer
    cast to the parameters' dtype by one launch (param_grads). Every product in the same
    dtype as autograd's; sums of products accumulate inside the GEMMs (one rounding)."""

    @staticmethod
    def forward(ctx, plan, c, h, rel, rel_c, ones, *params):
        hc, wcat, outs = _forward(plan, c, h.reshape(-1, h.shape[-1]), rel_c, params)
        _keep_meta(ctx, plan, c, h, rel, params)
        ctx.save_for_backward(hc, rel_c, ones, *_saved_weights(wcat, params))
        ctx.set_materialize_grads(False)
        return tuple(outs)

    @staticmethod
    @once_differentiable  # (dattn's attention has no double backward either)
    def backward(ctx, *grads):
        plan = ctx.plan
        hc, rel_c, ones, *w = ctx.saved_tensors
        o = plan.o
        G = Gp = None
        if grads[0] is not None or grads[1] is not None or grads[2] is not None:
            G = _cat_cols(grads[:3], hc.shape[0], o, hc)
        if plan.npos:  # (outputs q, k, v[, pk][, pq])
            gp = _pos_cols(plan, grads[3] if plan.pk is not None else None,
                           grads[-1] if plan.pq is not None else None)
            if any(g is not None for g in gp):
                Gp = _cat_cols(gp, rel_c.shape[0], o, rel_c)
        need = ctx.needs_input_grad
        dh, drel, dparams = param_grads(ctx, hc, rel_c, ones, w, G, Gp, need[2], need[3],
                                        need[6:])
        return (None, None, dh, drel, None, None, *dparams)


# Without functorch transforms the node is entered through its C apply (ops.c_apply:
# Function.apply's Python wrapper skipped), else through Function.apply.
_raw_apply = ops.c_apply(_Project)


def project(plan: Plan, h: torch.Tensor, rel: Optional[torch.Tensor],
            rel_c: Optional[torch.Tensor], ones: Optional[torch.Tensor]):
    """(q, k, v, pk, pq) as [N, out] / [2S, out] tensors (pk / pq None when off), where
    N = h.numel() / hidden. rel: the [2S, hidden] position embeddings after pos_dropout
    (gradient flows to it); rel_c: rel detached and cast to the compute dtype (may be
    shared by layers that see the same rel); ones: [2S] ones in the compute dtype (bias
    gradients of the position projections; only read in the backward)."""
    c = compute_dtype(h)
    params = plan.params
    if torch.is_grad_enabled() and (h.requires_grad or (rel is not None and rel.requires_grad)
                                    or any(p.requires_grad for p in params)):
        if not torch._C._are_functorch_transforms_active():
            outs = _raw_apply(plan, c, h, rel, rel_c, ones, *params)
        else:
            outs = _Project.apply(plan, c, h, rel, rel_c, ones, *params)
    else:
        outs = _forward(plan, c, h.reshape(-1, h.shape[-1]), rel_c, params)[2]
    pk = outs[3] if plan.pk is not None else None
    pq = outs[-1] if plan.pq is not None else None
    return outs[0], outs[1], outs[2], pk, pq


class _LayerAttention(torch.autograd.Function):
    """A layer's projections (as _Project) and its attention (as ops' eager autograd path)
    in one autograd node, for the eager training step: one Python node per layer instead
    of two, without the view / transpose nodes between them (q, k, v, pk, pq are views of
    the projections' outputs inside it), and the attention backward writes its gradients
    straight into the G = [dq | dk | dv] and Gp = [dpq | dpk] matrices that param_grads
    multiplies (no stack). The same bodies (_forward, ops._fwd_impl / _bwd_impl,
    param_grads): same outputs, bitwise; same gradients, bitwise (one G, one Gp, one
    layout). Saves what the two nodes saved."""

    @staticmethod
    def forward(ctx, plan, c, h, rel, rel_c, ones, shape, tail, *params):
        qshape, lead = shape
        hc, wcat, outs = _forward(plan, c, h.reshape(-1, h.shape[-1]), rel_c, params)
        H, D = qshape[-2], qshape[-1]
        q, k, v = (t.view(qshape) for t in outs[:3])
        pk = pq = None
        if plan.pk is not None:
            pk = outs[3].view(-1, H, D).transpose(0, 1)
        if plan.pq is not None:
            pq = outs[-1].view(-1, H, D).transpose(0, 1)
        mask, cu, rng, *cfg = tail
        out, lse = ops._fwd_impl(q, k, v, pk, pq, mask, cu, rng, *cfg)
        _keep_meta(ctx, plan, c, h, rel, params)
        ctx.cfg = cfg
        ctx.save_for_backward(hc, rel_c, ones, q, k, v, pk, pq, mask, cu, rng, out, lse,
                              *_saved_weights(wcat, params))
        ctx.set_materialize_grads(False)
        return out.view(*lead, H * D)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        plan = ctx.plan
        n = len(plan.mods)
        if dy is None:  # the output did not reach the loss
            return (None,) * (8 + 2 * n)
        hc, rel_c, ones, q, k, v, pk, pq, mask, cu, rng, out, lse, *w = ctx.saved_tensors
        o, N = plan.o, hc.shape[0]
        sh = q.shape
        H, D = sh[-2], sh[-1]
        dout = dy.reshape(sh)
        Gp = dpk = dpq = None
        if (type(dout) is torch.Tensor and ops._plain(q, k, v, pk, pq, out, lse)
                and not ops._modes_active()):
            G = hc.new_empty((N, 3 * o))
            dq, dk, dv = G.view(*sh[:-2], 3, H, D).unbind(-3)
            if plan.npos:
                Gp = hc.new_empty((rel_c.shape[0], plan.npos * o))
                cols = Gp.view(rel_c.shape[0], plan.npos, H, D)
                if pq is not None:  # (_pos_cols' order)
                    dpq = cols[:, 0].transpose(0, 1)
                if pk is not None:
                    dpk = cols[:, plan.npos - 1].transpose(0, 1)
            ops._bwd_impl(dout, q, k, v, pk, pq, mask, cu, rng, out, lse, *ctx.cfg,
                          absent_as_none=True, outs=(dq, dk, dv, dpk, dpq))
        else:  # a mode (e.g. the op audit's recorder) or a subclass: the op, then stacked
            dq, dk, dv, dpk, dpq = torch.ops.dattn.bwd(dout, q, k, v, pk, pq, mask, cu, rng,
                                                       out, lse, *ctx.cfg)
            G = _cat_cols([t.reshape(N, o) for t in (dq, dk, dv)], N, o, hc)
            if plan.npos:
                gp = _pos_cols(plan, dpk, dpq)
                S2 = rel_c.shape[0]
                Gp = _cat_cols([t.transpose(0, 1).reshape(S2, o) for t in gp], S2, o, rel_c)
        need = ctx.needs_input_grad
        dh, drel, dparams = param_grads(ctx, hc, rel_c, ones, w, G, Gp, need[2], need[3],
                                        need[8:])
        return (None, None, dh, drel, None, None, None, None, *dparams)


_raw_apply_layer = ops.c_apply(_LayerAttention)  # (layer_attention_applies rules out functorch)


def layer_attention_applies(plan: Plan, h: torch.Tensor, rel: Optional[torch.Tensor],
                            mask: Optional[torch.Tensor], cu: Optional[torch.Tensor]) -> bool:
    """Whether layer_attention takes this call: a gradient is needed (as for _Project) and
    the call would take ops' eager autograd path (plain mask / cu_seqlens, no mode, no
    functorch transform); otherwise the caller takes project() and ops.attention()."""
    if not (torch.is_grad_enabled() and (h.requires_grad or (rel is not None and rel.requires_grad)
                                         or any(p.requires_grad for p in plan.params))):
        return False
    return not ((mask is not None and type(mask) is not torch.Tensor)
                or (cu is not None and type(cu) is not torch.Tensor) or ops._modes_active()
                or torch._C._are_functorch_transforms_active())


def layer_attention(plan: Plan, h: torch.Tensor, rel: Optional[torch.Tensor],
                    rel_c: Optional[torch.Tensor], ones: Optional[torch.Tensor], qshape,
                    lead, tail) -> torch.Tensor:
    """The layer's attention output [*lead, H D] through _LayerAttention (where
    layer_attention_applies). qshape: q's shape as the op takes it ([B, L, H, D], or
    [T, H, D] packed); tail: ops.tail_args of the call."""
    return _raw_apply_layer(plan, compute_dtype(h), h, rel, rel_c, ones, (qshape, lead), tail,
                            *plan.params)
