"""transformers integration: a drop-in forward for ``DebertaV2Encoder``.

``patch(model)`` points the ``forward`` of every ``DebertaV2Encoder`` inside ``model`` at
``encoder_forward`` (an instance attribute: no weights are copied, moved or renamed, and
``state_dict`` is untouched); ``unpatch(model)`` removes it again. The hub layer
(``dattn.layers.DebertaV2Encoder``) runs the same ``encoder_forward``.

``encoder_forward`` mirrors transformers' encoder, layer by layer, calling the model's own
submodules (projections, LayerNorms, dropouts, FFN, conv) and replacing only the
disentangled attention by ``dattn.ops.attention``. In eager mode a layer's q / k / v and
position projections run as one autograd node (``_proj.py``: the modules' weights, the
same forward bits, ~29 fewer launches per layer in a training step), and when a gradient
is needed that node also runs the attention (``_proj._LayerAttention``: one autograd node
per layer, its attention gradients written where the projections' backward reads them);
hooked or wrapped projections are called as modules. Two layouts:

* padded: the batch as transformers hands it, every position (padded ones included)
  equal to transformers (the library's "hf" padded-row rule);
* packed: the valid tokens of every sequence gathered once at entry into [1, T, hidden]
  (indices computed on the device), every layer run on them only, attention in the
  varlen layout, the deberta-v2-xlarge conv layer applied per sequence, and the states
  scattered back at exit. Valid positions equal transformers; padded positions are 0.

mode "auto" (default) packs when the batch has padding, every row's tokens form one run
starting at position 0 (right padding) and no row is empty, so that every position a
head may read (valid tokens, the first token) equals transformers; otherwise padded.
mode "packed" packs whenever packing is exact (one contiguous run per row: right or left
padding, empty rows allowed); a mask with holes runs padded. Deciding costs one host
synchronisation at encoder entry (none per layer); under torch.compile the padded layout
is used, which needs none.

Cases dattn does not cover run transformers' own forward, with one log line per reason:
output_attentions, query_states (EMD), a custom relative_pos, a 3-D/4-D mask that is not
the outer product of a 2-D padding mask, an unsupported dtype/device/head size (as the
library reports it), attention dropout in training where dattn has no dropout
(``DROPOUT_DEVICES``), training where the backend has no backward.
"""

from __future__ import annotations

import functools
import logging
import os
import types
from typing import Optional

import torch
from torch import nn

from . import _lib, _proj, ops

logger = logging.getLogger("dattn")

MODES = ("auto", "padded", "packed")

# Device types on which dattn applies attention dropout itself in training. Elsewhere a
# training step with attention dropout > 0 runs transformers' forward. The CUDA kernels
# apply dattn.h's dropout mask in forward and backward (tests/test_cuda_bwd.c checks it
# against the CPU backend bit for bit).
DROPOUT_DEVICES = frozenset({"cpu", "cuda"})


def _hf_classes():
    from transformers.models.deberta_v2 import modeling_deberta_v2 as m

    return m


# ---- patch / unpatch ----------------------------------------------------------------


def _is_encoder(mod: nn.Module) -> bool:
    return isinstance(mod, _hf_classes().DebertaV2Encoder)


def patch(model: nn.Module, mode: str = "auto", cuda_graphs: bool = False) -> nn.Module:
    """Switches every DebertaV2Encoder inside ``model`` (the model itself may be one) to
    dattn, in place. Returns ``model``. Raises ValueError if there is none.

    ``cuda_graphs=True``: packed inference batches on a GPU (eval, no autograd) replay a
    CUDA graph of the encoder's layers instead of launching every kernel from Python. The
    packed token count is rounded up to a multiple of ``GRAPH_BUCKET`` (the extra tokens
    form one more sequence whose results are dropped), and one graph is captured per
    (batch, length, rounded token count, dtype), on first use. Graphs read the weights in
    place: after replacing a parameter tensor (not updating it in place) call
    ``dattn.unpatch`` and ``patch`` again. Every graph keeps its own memory pool (a few
    layers' activations for its token count) until ``unpatch``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    n = 0
    for mod in model.modules():
        if _is_encoder(mod):
            mod.forward = types.MethodType(encoder_forward, mod)
            mod._dattn_mode = mode
            mod._dattn_graphs = {} if cuda_graphs else None
            n += 1
    if n == 0:
        raise ValueError("dattn.patch: the model contains no DebertaV2Encoder")
    return model


def unpatch(model: nn.Module) -> nn.Module:
    """Restores transformers' forward on every encoder that patch() switched."""
    for mod in model.modules():
        if _is_encoder(mod) and is_patched(mod):
            del mod.forward
            mod.__dict__.pop("_dattn_mode", None)
            mod.__dict__.pop("_dattn_graphs", None)
    return model


def is_patched(mod: nn.Module) -> bool:
    fwd = mod.__dict__.get("forward")
    return getattr(fwd, "__func__", None) is encoder_forward


# ---- logging of fallbacks -----------------------------------------------------------

_logged: set = set()


@torch.compiler.assume_constant_result
def _log_fallback(reason: str) -> bool:
    """One log line per distinct reason for the life of the process."""
    if reason not in _logged:
        _logged.add(reason)
        logger.warning("dattn: using transformers' DebertaV2Encoder forward: %s", reason)
    return True


def _log_info(msg: str) -> None:
    if not torch.compiler.is_compiling() and msg not in _logged:
        _logged.add(msg)
        logger.info("dattn: %s", msg)


# ---- configuration of one encoder ---------------------------------------------------


def _bits(att) -> int:
    types_ = att.pos_att_type or []
    return (_lib.POS_C2P if "c2p" in types_ else 0) | (_lib.POS_P2C if "p2c" in types_ else 0)


def _effective_dtype(h: torch.Tensor) -> torch.dtype:
    dt = h.dtype
    dev = h.device.type
    if dt == torch.float32 and torch.is_autocast_enabled(dev):
        return torch.get_autocast_dtype(dev)
    return dt


def _fallback_reason(enc, hidden_states, attention_mask, output_attentions, query_states,
                     relative_pos, keys_out=None) -> Optional[str]:
    """Why this encoder call runs transformers' forward (None: dattn runs it). keys_out (a
    list): receives the call's _probe_keys when it got that far, for the packing decision's
    probe to reuse."""
    if output_attentions:
        return "output_attentions=True (dattn never forms the attention matrix)"
    if query_states is not None:
        return "query_states is set (EMD-style decoding)"
    if relative_pos is not None:
        return "a custom relative_pos was passed"
    if not isinstance(hidden_states, torch.Tensor) or hidden_states.dim() != 3:
        return "hidden_states is not a [batch, length, hidden] tensor"
    if not isinstance(attention_mask, torch.Tensor):
        return "attention_mask is not a tensor"
    B, L = hidden_states.shape[0], hidden_states.shape[1]
    if B == 0 or L == 0:
        return "empty batch"
    if len(enc.layer) == 0:
        return "the encoder has no layers"
    if attention_mask.dim() == 2:
        if tuple(attention_mask.shape) != (B, L):
            return "the 2-D attention_mask does not have the shape [batch, length]"
    elif attention_mask.dim() in (3, 4):
        if torch.compiler.is_compiling():
            return "3-D/4-D attention_mask under torch.compile (checking it needs the host)"
        if _mask_from_nd(attention_mask, B, L) is None:
            return "the 3-D/4-D attention_mask is not the outer product of a padding mask"
    else:
        return f"{attention_mask.dim()}-D attention_mask"
    keys = _probe_keys(enc, hidden_states)
    if keys_out is not None:
        keys_out.append(keys)
    return _probe_reason(enc, hidden_states, False, keys)


def _probe_keys(enc, hidden_states) -> tuple:
    """(reason, calls): why no layer layout would run in libdattn (None: they may), and the
    distinct attention calls of this encoder's layers as ops.probe arguments without the
    layout flag. Host-only: module attributes and tensor metadata. One walk over the layers
    serves both layouts' probes (_probe_reason)."""
    dev = hidden_states.device
    dtype = _effective_dtype(hidden_states)
    rel = getattr(enc, "relative_attention", False)
    need_grad = torch.is_grad_enabled() and (
        hidden_states.requires_grad or any(p.requires_grad for p in enc.parameters()))
    idx = dev.index if dev.index is not None else -1
    pb = int(enc.position_buckets) if rel else 256
    mr = int(enc.max_relative_positions) if rel else 512
    span = _att_span(enc) if rel else 0
    calls = {}
    for layer in enc.layer:
        att = layer.attention.self
        if getattr(att, "relative_attention", False) != rel:
            return "layers disagree with the encoder on relative_attention", ()
        bits = _bits(att) if rel else 0
        if rel:
            if (att.position_buckets != enc.position_buckets
                    or att.max_relative_positions != enc.max_relative_positions):
                return "layers disagree with the encoder on the relative position settings", ()
            if att.pos_ebd_size != span:
                return "att_span does not match the position settings", ()
            if enc.rel_embeddings.weight.shape[0] < 2 * att.pos_ebd_size:
                return "rel_embeddings has fewer than 2 * att_span rows", ()
        drop = att.dropout.p if att.dropout.training else 0.0
        if drop > 0.0 and dev.type not in DROPOUT_DEVICES:
            return f"attention dropout {drop} in training on {dev.type} (no dattn dropout there yet)", ()
        calls[(dev.type, idx, dtype, int(att.num_attention_heads), int(att.attention_head_size),
               bits, pb, mr, bool(need_grad), drop > 0.0)] = None
    return None, tuple(calls)


def _probe_reason(enc, hidden_states, packed: bool, keys=None) -> Optional[str]:
    """Why libdattn would not run this encoder's attention calls in the given layout
    (None: it would). keys: _probe_keys of this call, when already made."""
    reason, calls = keys if keys is not None else _probe_keys(enc, hidden_states)
    if reason is not None:
        return reason
    for a in calls:
        why = ops.probe(*a[:8], packed, *a[8:])
        if why is not None:
            return why
    return None


def _att_span(enc) -> int:
    """S as the library defines it (dattn_att_span), in Python so that it traces."""
    pb, mr = int(enc.position_buckets), int(enc.max_relative_positions)
    return pb if pb > 0 else mr


@torch.compiler.assume_constant_result
def _scale_ratio(head_dim: int, bits: int) -> float:
    return _lib.scale(head_dim, 0) / _lib.scale(head_dim, bits)


def _mask_from_nd(mask: torch.Tensor, B: int, L: int) -> Optional[torch.Tensor]:
    """For a 3-D [B, L, L] or 4-D [B, 1, L, L] mask: the 2-D padding mask m (as transformers
    derives it, m[j] = any_i mask[i, j]) if mask is m m^T, else None. Host sync."""
    m4 = mask if mask.dim() == 4 else mask.unsqueeze(1)
    if tuple(m4.shape) != (B, 1, L, L):
        return None
    nz = m4[:, 0] != 0
    m2 = nz.any(dim=-2)
    outer = m2[:, :, None] & m2[:, None, :]
    if not bool(torch.equal(outer, nz)):
        return None
    return m2


# ---- the forward --------------------------------------------------------------------

# What the last eager encoder call ran: "padded", "packed" or "fallback: <reason>" (for
# tests and the CLI; not updated under torch.compile).
last_path: Optional[str] = None


def _note(path: str) -> None:
    global last_path
    if not torch.compiler.is_compiling():
        last_path = path



def encoder_forward(self, hidden_states, attention_mask, output_hidden_states=True,
                    output_attentions=False, query_states=None, relative_pos=None,
                    return_dict=True):
    """DebertaV2Encoder.forward through dattn (same signature and outputs)."""
    keys = []
    reason = _fallback_reason(self, hidden_states, attention_mask, output_attentions,
                              query_states, relative_pos, keys)
    if reason is None:
        try:
            return _dattn_encoder(self, hidden_states, attention_mask, output_hidden_states,
                                  return_dict, keys[0])
        except _lib.DattnUnsupported as e:  # the library said no at run time (eager only)
            reason = f"libdattn: {e.message}"
    _log_fallback(reason)
    _note("fallback: " + reason)
    return type(self).forward(self, hidden_states, attention_mask, output_hidden_states,
                              output_attentions, query_states, relative_pos, return_dict)


class _Ctx:
    """What every attention call of one encoder pass shares."""

    __slots__ = ("mask", "cu_seqlens", "max_seqlen", "bucket", "max_rel", "rel_src",
                 "rel_c", "ones")

    def __init__(self, mask, cu_seqlens, max_seqlen, bucket, max_rel):
        self.mask = mask
        self.cu_seqlens = cu_seqlens
        self.max_seqlen = max_seqlen
        self.bucket = bucket
        self.max_rel = max_rel
        self.rel_src = self.rel_c = self.ones = None

    def rel_cast(self, rel: torch.Tensor, c: torch.dtype) -> torch.Tensor:
        """rel detached in the compute dtype. Layers whose pos_dropout is the identity
        (eval, p = 0) see the very same rel tensor: it is cast once per encoder pass."""
        if rel is not self.rel_src or self.rel_c.dtype != c:
            self.rel_src = rel
            self.rel_c = rel.detach() if rel.dtype == c else rel.detach().to(c)
        return self.rel_c

    def ones_like_rows(self, rel_c: torch.Tensor) -> torch.Tensor:
        """[2S] ones in the compute dtype (bias gradients of the position projections),
        made once per encoder pass."""
        o = self.ones
        if o is None or o.dtype != rel_c.dtype or o.shape[0] != rel_c.shape[0] \
                or o.device != rel_c.device:
            o = self.ones = torch.ones(rel_c.shape[0], dtype=rel_c.dtype, device=rel_c.device)
        return o


# The projections of a layer in one autograd node (_proj.py) in eager mode: fewer launches
# per training step, same function. DATTN_HF_LEAN=0 (or hf.LEAN_PROJECTIONS = False) calls
# the nn.Linear modules one by one instead (the A/B switch of bench/count_ops.py).
LEAN_PROJECTIONS = os.environ.get("DATTN_HF_LEAN", "1") != "0"
# In an eager training step, the lean projections and the attention in one autograd node
# (_proj._LayerAttention: one Python node per layer instead of two, no view nodes between
# them, the attention's gradients written where the projections' backward reads them).
# DATTN_HF_FUSED=0 (or hf.FUSED_LAYER = False) keeps two nodes (the A/B switch).
FUSED_LAYER = os.environ.get("DATTN_HF_FUSED", "1") != "0"


def _self_attention(att, h: torch.Tensor, rel_embeddings, ctx: _Ctx) -> torch.Tensor:
    """DisentangledSelfAttention.forward (query_states None, relative_pos built from the
    positions, no attention probabilities returned), with dattn doing the attention."""
    H = att.num_attention_heads
    D = att.attention_head_size
    lead = h.shape[:-1]
    bits = _bits(att)
    drop = att.dropout.p if att.dropout.training else 0.0
    rel = None
    if att.relative_attention:
        S = att.pos_ebd_size
        rel = att.pos_dropout(rel_embeddings)
        if rel.shape[0] != 2 * S:  # (a full slice would only make a new alias per layer)
            rel = rel[0:2 * S, :]
    plan = None
    if LEAN_PROJECTIONS and not torch.compiler.is_compiling():
        plan = _proj.plan_for(att, bool(bits & _lib.POS_C2P), bool(bits & _lib.POS_P2C),
                              rel is not None)
        if not _proj.usable(plan, h, rel):
            plan = None
    if plan is not None:
        rel_c = ones = None
        if rel is not None and (plan.pk is not None or plan.pq is not None):
            rel_c = ctx.rel_cast(rel, _proj.compute_dtype(h))
            if torch.is_grad_enabled():
                ones = ctx.ones_like_rows(rel_c)
        if (FUSED_LAYER and (rel is not None or not bits)
                and _proj.layer_attention_applies(plan, h, rel, ctx.mask, ctx.cu_seqlens)):
            qshape = (*lead[1:], H, D) if ctx.cu_seqlens is not None else (*lead, H, D)
            tail = ops.tail_args(h, qshape, ctx.mask, ctx.cu_seqlens, ctx.max_seqlen,
                                 ctx.bucket, ctx.max_rel, "hf", drop, None)
            return _proj.layer_attention(plan, h, rel, rel_c, ones, qshape, lead, tail)
        q, k, v, pk, pq = _proj.project(plan, h, rel, rel_c, ones)
        q, k, v = q.view(*lead, H, D), k.view(*lead, H, D), v.view(*lead, H, D)
    else:
        q = att.query_proj(h).view(*lead, H, D)
        k = att.key_proj(h).view(*lead, H, D)
        v = att.value_proj(h).view(*lead, H, D)
        pk = pq = None
        if rel is not None:
            if att.share_att_key:
                if bits & _lib.POS_C2P:
                    pk = att.key_proj(rel)
                if bits & _lib.POS_P2C:
                    pq = att.query_proj(rel)
            else:
                if bits & _lib.POS_C2P:
                    pk = att.pos_key_proj(rel)
                if bits & _lib.POS_P2C:
                    pq = att.pos_query_proj(rel)
    if rel is not None:
        S = att.pos_ebd_size
        if pk is not None:
            pk = pk.view(2 * S, H, D).transpose(0, 1)
        if pq is not None:
            pq = pq.view(2 * S, H, D).transpose(0, 1)
    elif bits:
        # transformers counts pos_att_type in the scale even without position terms:
        # scores = q.k / sqrt(D * (1 + #types)); the library's scale is sqrt(D) here.
        q = q * _scale_ratio(D, bits)
    if ctx.cu_seqlens is not None:  # [1, T, H, D] -> [T, H, D]
        # squeeze, not q[0]: the backward of a view is a view, that of an index a
        # zero-filled [1, T, H, D] buffer and a copy (per tensor per layer)
        q, k, v = q.squeeze(0), k.squeeze(0), v.squeeze(0)
    out = ops.attention(q, k, v, pk, pq, mask=ctx.mask, cu_seqlens=ctx.cu_seqlens,
                        max_seqlen=ctx.max_seqlen, position_buckets=ctx.bucket,
                        max_relative_positions=ctx.max_rel, dropout_p=drop)
    return out.reshape(*lead, H * D)


def _layer_body(layer, h, rel_embeddings=None, ctx=None):
    """DebertaV2Layer.forward with dattn attention."""
    att = layer.attention
    ctx_layer = _self_attention(att.self, h, rel_embeddings, ctx)
    attention_output = att.output(ctx_layer, h)
    intermediate = layer.intermediate(attention_output)
    return layer.output(intermediate, attention_output)


def _run_layer(layer, h, rel_embeddings, ctx):
    if getattr(layer, "gradient_checkpointing", False) and layer.training:
        # as GradientCheckpointingLayer.__call__: hidden states positional, rest bound
        fn = functools.partial(_layer_body, layer, rel_embeddings=rel_embeddings, ctx=ctx)
        return layer._gradient_checkpointing_func(fn, h)
    return _layer_body(layer, h, rel_embeddings, ctx)


def _output(last, all_hidden, return_dict):
    if not return_dict:
        return tuple(v for v in (last, all_hidden) if v is not None)
    from transformers.modeling_outputs import BaseModelOutput

    return BaseModelOutput(last_hidden_state=last, hidden_states=all_hidden, attentions=None)


def _position_settings(enc):
    if getattr(enc, "relative_attention", False):
        return int(enc.position_buckets), int(enc.max_relative_positions)
    return 256, 512  # unused (no position terms); any valid setting


def _dattn_encoder(enc, hidden_states, attention_mask, output_hidden_states, return_dict,
                   keys=None):
    B, L = hidden_states.shape[0], hidden_states.shape[1]
    if attention_mask.dim() == 2:
        input_mask = attention_mask
        kmask = attention_mask
    else:  # checked to be an outer product by _fallback_reason
        input_mask = attention_mask.sum(-2) > 0
        kmask = _mask_from_nd(attention_mask, B, L)
    bucket, max_rel = _position_settings(enc)
    mode = getattr(enc, "_dattn_mode", "auto")

    plan = None
    if mode != "padded" and attention_mask.dim() == 2 and not torch.compiler.is_compiling():
        plan = _packing_plan(enc, attention_mask, hidden_states, B, L, mode, keys)
    # no padding at all (the packing decision saw every row full): the layers get no mask,
    # so the kernels take their unmasked paths (no key-range / mean-of-V prologue, no mask
    # loads per tile, the backward's lean P / dS loop); same function, nothing is padded
    no_padding = plan is _NO_PADDING
    if no_padding:
        plan = None

    rel_embeddings = enc.get_rel_embedding()
    _note("padded" if plan is None else "packed")
    if plan is None:
        mask_u8 = None if no_padding else (kmask != 0).to(torch.uint8)
        ctx = _Ctx(mask_u8, None, L, bucket, max_rel)
        all_hidden = (hidden_states,) if output_hidden_states else None
        out = hidden_states
        for i, layer in enumerate(enc.layer):
            out = _run_layer(layer, out, rel_embeddings, ctx)
            if i == 0 and enc.conv is not None:
                out = enc.conv(hidden_states, out, input_mask)
            if output_hidden_states:
                all_hidden = all_hidden + (out,)
        return _output(out, all_hidden, return_dict)

    # packed
    hid = hidden_states.shape[-1]
    if _graphs_apply(enc, hidden_states):
        return _graphed_packed(enc, hidden_states, plan, output_hidden_states, return_dict,
                               bucket, max_rel)
    ctx = _Ctx(None, plan.cu_seqlens, plan.max_len, bucket, max_rel)
    x = hidden_states.reshape(B * L, hid).index_select(0, plan.src).unsqueeze(0)
    packed_hidden = []
    for i, layer in enumerate(enc.layer):
        x = _run_layer(layer, x, rel_embeddings, ctx)
        if i == 0 and enc.conv is not None:
            x = _packed_conv(enc.conv, hidden_states, x, plan)
        if output_hidden_states:
            packed_hidden.append(x[0])
    if not output_hidden_states:
        return _output(plan.repad(x), None, return_dict)
    # every layer's output re-padded by one scatter (DebertaV2Model always asks for the
    # hidden states: one launch instead of two per layer)
    padded = plan.repad_many(packed_hidden)
    all_hidden = (hidden_states,) + tuple(padded)
    return _output(all_hidden[-1], all_hidden, return_dict)


# ---- CUDA graphs (packed inference) ---------------------------------------------------

GRAPH_BUCKET = 64  # packed token counts are rounded up to a multiple of this


def _graphs_apply(enc, h: torch.Tensor) -> bool:
    return (getattr(enc, "_dattn_graphs", None) is not None and h.is_cuda
            and not enc.training and not torch.is_grad_enabled()
            and not torch.compiler.is_compiling())


class _LayerGraph:
    """A CUDA graph of layers [first, last) of an encoder on [1, Tb, hidden] packed
    tokens: static input x, static cu_seqlens (the batch's B sequences plus one filler
    sequence up to Tb), static outputs (one per layer)."""

    def __init__(self, enc, first, last, x, cu, max_seqlen, bucket, max_rel):
        self.x, self.cu = x, cu
        ctx = _Ctx(None, cu, max_seqlen, bucket, max_rel)

        def body():
            rel = enc.get_rel_embedding()
            h, outs = self.x, []
            for layer in enc.layer[first:last]:
                h = _layer_body(layer, h, rel, ctx)
                outs.append(h)
            return outs

        dev = x.device
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):  # warm-up: library handles, cuBLAS workspaces
            body()
        torch.cuda.current_stream(dev).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outs = body()


def _graphed_packed(enc, hidden_states, plan, output_hidden_states, return_dict, bucket,
                    max_rel):
    B, L, T = plan.B, plan.L, plan.T
    hid = hidden_states.shape[-1]
    Tb = -(-T // GRAPH_BUCKET) * GRAPH_BUCKET
    if Tb == T:
        Tb += GRAPH_BUCKET  # the filler sequence is never empty
    dev = hidden_states.device
    key = (B, L, Tb, hidden_states.dtype, dev.index, torch.is_autocast_enabled("cuda"),
           torch.get_autocast_dtype("cuda"), torch.is_inference_mode_enabled())
    graphs = enc._dattn_graphs.get(key)
    x0 = hidden_states.reshape(B * L, hid).index_select(0, plan.src)  # [T, hid]
    n = len(enc.layer)
    split = 1 if enc.conv is not None else n  # the conv (after layer 0) runs eagerly
    if graphs is None:
        cu = torch.empty(B + 2, dtype=torch.int32, device=dev)
        cu[B + 1] = Tb
        max_seqlen = max(L, GRAPH_BUCKET)
        graphs = []
        for first, last in ((0, split), (split, n)):
            if first == last:
                continue
            x = hidden_states.new_zeros(1, Tb, hid)  # filler rows stay zero
            cu[:B + 1].copy_(plan.cu_seqlens)
            x[0, :T].copy_(x0)
            graphs.append(_LayerGraph(enc, first, last, x, cu, max_seqlen, bucket, max_rel))
        enc._dattn_graphs[key] = graphs
    graphs[0].cu[:B + 1].copy_(plan.cu_seqlens)
    graphs[0].x[0, :T].copy_(x0)
    graphs[0].graph.replay()
    packed = [o[0, :T] for o in graphs[0].outs]
    if len(graphs) > 1:
        xc = _packed_conv(enc.conv, hidden_states, packed[-1].unsqueeze(0), plan)
        packed[-1] = xc[0]
        graphs[1].x[0, :T].copy_(xc[0])
        graphs[1].graph.replay()
        packed += [o[0, :T] for o in graphs[1].outs]
    if not output_hidden_states:
        return _output(plan.repad(packed[-1].unsqueeze(0)), None, return_dict)
    # repad_many writes fresh tensors: nothing returned aliases the graphs' buffers
    all_hidden = (hidden_states,) + tuple(plan.repad_many(packed))
    return _output(all_hidden[-1], all_hidden, return_dict)


# ---- packing ------------------------------------------------------------------------


class _Plan:
    """Index maps between the padded [B, L] batch and the packed [T] tokens."""

    def __init__(self, B, L, T, max_len, lengths, starts, cu_seqlens, seq, src):
        self.B, self.L, self.T, self.max_len = B, L, T, max_len
        self.lengths, self.starts = lengths, starts
        self.cu_seqlens = cu_seqlens  # int32 [B + 1], on the device
        self.seq = seq                # int64 [T]: sequence of each token
        self.src = src                # int64 [T]: flat index b * L + position

    def repad(self, x: torch.Tensor) -> torch.Tensor:
        """[1, T, hid] -> [B, L, hid] with zeros at padded positions."""
        hid = x.shape[-1]
        flat = x.new_zeros(self.B * self.L, hid).index_copy(0, self.src, x[0])
        return flat.view(self.B, self.L, hid)

    def repad_many(self, xs) -> list:
        """[T, hid] tensors -> [B, L, hid] each (views of one buffer), zeros at padded
        positions. Under autograd each one keeps its own gradient path."""
        if torch.is_grad_enabled() and any(x.requires_grad for x in xs):
            return [self.repad(x.unsqueeze(0)) for x in xs]
        n, hid = len(xs), xs[0].shape[-1]
        flat = xs[0].new_zeros(n, self.B * self.L, hid)
        flat.index_copy_(1, self.src, torch.stack(xs))
        return list(flat.view(n, self.B, self.L, hid).unbind(0))


def _conv_packable(enc) -> bool:
    if enc.conv is None:
        return True
    c = enc.conv.conv
    if not isinstance(c, nn.Conv1d):
        return False
    k = c.kernel_size[0]
    return (c.stride[0] == 1 and c.dilation[0] == 1 and c.padding_mode == "zeros"
            and isinstance(c.padding, tuple) and k % 2 == 1 and c.padding[0] == (k - 1) // 2)


_NO_PADDING = object()  # _packing_plan's answer when every row of the mask is full


def _packing_plan(enc, mask, hidden_states, B, L, mode, keys=None):
    """Decides padded vs packed and, for packed, builds the index maps on the device.
    One host synchronisation (a handful of scalars). Returns a _Plan (packed), None
    (padded with the mask) or _NO_PADDING (every row full: padded without a mask)."""
    if not _conv_packable(enc):
        _log_info("the conv layer is not a plain odd-kernel Conv1d: running padded")
        return None
    why = _probe_reason(enc, hidden_states, True, keys)
    if why is not None:
        _log_info(f"the packed layout is not available ({why}): running padded")
        return None
    dev = mask.device
    valid = mask != 0
    lengths = valid.sum(1)
    starts = valid.to(torch.int8).argmax(1)
    runs = valid[:, 0].to(torch.int64) + (valid[:, 1:] & ~valid[:, :-1]).sum(1)
    stats = torch.stack([
        lengths.sum(),
        lengths.max(),
        (runs <= 1).all().to(torch.int64),
        ((mask == 0) | (mask == 1)).all().to(torch.int64),
        (lengths == L).all().to(torch.int64),
        ((starts == 0) & (lengths > 0)).all().to(torch.int64),
    ]).tolist()  # the one synchronisation
    T, max_len, contiguous, binary, full, right = (int(s) for s in stats)
    if full:
        return _NO_PADDING  # no padding: packing gains nothing, and no mask is needed
    if not (contiguous and binary):
        if mode == "packed":
            _log_info("the padding mask has holes (or non-0/1 values): running padded")
        return None
    if mode == "auto" and not right:
        return None
    cu = torch.zeros(B + 1, dtype=torch.int32, device=dev)
    cu[1:] = torch.cumsum(lengths, 0).to(torch.int32)
    seq = torch.repeat_interleave(torch.arange(B, device=dev), lengths, output_size=T)
    tok = torch.arange(T, device=dev)
    src = seq * L + starts[seq] + (tok - cu.to(torch.int64)[seq])
    return _Plan(B, L, T, max(max_len, 1), lengths, starts, cu, seq, src)


def _packed_conv(conv, hidden_states, residual, plan: _Plan) -> torch.Tensor:
    """ConvLayer.forward on the packed tokens. Each sequence is convolved with its own
    context: the r = (k - 1) / 2 positions around its run in the padded input (zero
    outside [0, L)), exactly what transformers' masked convolution reads, so no two
    sequences mix and the valid outputs equal transformers'."""
    from transformers.activations import ACT2FN

    B, L, T = plan.B, plan.L, plan.T
    hid = hidden_states.shape[-1]
    cv = conv.conv
    r = (cv.kernel_size[0] - 1) // 2
    dev = hidden_states.device
    E = T + 2 * r * B
    ext_len = plan.lengths + 2 * r
    ext_cu = torch.zeros(B + 1, dtype=torch.int64, device=dev)
    ext_cu[1:] = torch.cumsum(ext_len, 0)
    eseq = torch.repeat_interleave(torch.arange(B, device=dev), ext_len, output_size=E)
    epos = torch.arange(E, device=dev) - ext_cu[eseq] + plan.starts[eseq] - r
    inside = (epos >= 0) & (epos < L)
    eidx = torch.where(inside, eseq * L + epos, torch.full_like(epos, B * L))
    table = torch.cat([hidden_states.reshape(B * L, hid), hidden_states.new_zeros(1, hid)])
    ext = table.index_select(0, eidx)                           # [E, hid]
    y = cv(ext.t().unsqueeze(0).contiguous()).permute(0, 2, 1)[0]  # [E, hid]
    tok = torch.arange(T, device=dev)
    out = y.index_select(0, tok + 2 * r * plan.seq + r)         # [T, hid]
    out = ACT2FN[conv.conv_act](conv.dropout(out))
    layer_norm_input = residual[0] + out
    output = conv.LayerNorm(layer_norm_input).to(layer_norm_input)
    return output.unsqueeze(0)
