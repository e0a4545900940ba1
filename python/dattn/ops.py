"""PyTorch custom ops over libdattn: ``dattn::fwd`` and ``dattn::bwd``.

Both are ``torch.library`` custom ops with fake (meta) implementations and a registered
autograd formula, so ``torch.compile(fullgraph=True)`` traces through them and autograd
uses the fused backward. The implementations only pack the call's ``dattn_params`` and
call the library: no host synchronisation (no ``.item()``, no device-to-host copy). On
CUDA the call goes on the current stream and the workspace comes from PyTorch's
allocator. Eager calls of ``attention()`` with plain tensors (no compile, no mode, no
tensor subclass) run the same bodies without the op's dispatch: directly when no
gradient is needed, through an equivalent ``torch.autograd.Function`` otherwise (the
op's dispatch and generated autograd wrapper cost more host time than the rest of the
call; bench/host_overhead.py).

Layouts (see include/dattn.h):
  padded  q, k, v: [B, L, H, D] (any strides, last dim contiguous), mask [B, L] (uint8 or
          bool, nonzero = token) or None; lse [B, H, L] float32
  packed  q, k, v: [T, H, D], cu_seqlens [B + 1] int32 on the same device, max_seqlen;
          lse [H, T] float32
  pk, pq  [H, 2S, D] or None (None switches the c2p / p2c term off)

Dropout (dropout_p > 0) draws its Philox key from ``rng``, an int64 CPU tensor
[seed, offset] that forward and backward share (the mask is regenerated, never stored).
``attention()`` takes it from PyTorch's generator of the tensors' device (``new_rng``):
on CUDA the seed of ``torch.cuda.default_generators[i]`` and its Philox offset, which it
advances by 4 as PyTorch's own random kernels do, so ``torch.manual_seed`` or
``torch.cuda.manual_seed`` make runs reproducible, activation checkpointing (which saves
and restores that generator's state) recomputes the same mask, and nothing waits on the
device; on the CPU two draws from the default CPU generator. Under torch.compile the draw
is the opaque op ``dattn::rng`` so that it runs at every call of the compiled code. (Under
CUDA graph capture the drawn offset would be frozen into the graph: not supported.)
"""

from __future__ import annotations

import functools
from typing import Optional

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from . import _lib

__all__ = ["attention", "new_rng", "probe", "dtype_code", "DattnError", "DattnUnsupported"]

DattnError = _lib.DattnError
DattnUnsupported = _lib.DattnUnsupported

_DTYPES = {torch.float32: _lib.F32, torch.float16: _lib.F16, torch.bfloat16: _lib.BF16}
_DEVICES = {"cpu": _lib.DEVICE_CPU, "cuda": _lib.DEVICE_CUDA}
_PADROWS = {"hf": _lib.PADROWS_HF, "zero": _lib.PADROWS_ZERO}


def dtype_code(dtype: torch.dtype) -> Optional[int]:
    return _DTYPES.get(dtype)


# ---- the call's dattn_params, as a byte image ---------------------------------------
#
# The bodies below run on every eager call, so their host time matters on a GPU (small
# batches are host-bound there; bench/host_overhead.py measures it). Instead of a ctypes
# Params filled field by field (~100 attribute writes), the values go through one
# struct.pack into the byte image of dattn_params (_lib.PARAMS_HEAD / PARAMS_TAIL, checked
# against the ctypes layout at import), which the library reads in place. The image is
# built from this call's tensors every time (only workspace sizes are cached, see _run),
# and the library validates every call as before.

_ABSENT = (0, 0, 0, 0, 0)  # (data, stride0..3) of an absent tensor: NULL
_NO_GRADS = _ABSENT * 6  # dout, dq, dk, dv, dpk, dpq of a forward call
_PAD = ((0, 0, 0, 0), (0, 0, 0), (0, 0), (0,), ())  # stride entries past the rank
_pack_head = _lib.PARAMS_HEAD.pack
_pack_tail = _lib.PARAMS_TAIL.pack
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_CONTIG = torch.contiguous_format


def _td(t: torch.Tensor, keep: list) -> tuple:
    """(data, stride0..3) of t's dattn_tensor. A last dimension with a stride other than
    1 is made contiguous first (the library wants it contiguous); the copy goes to
    `keep`, which the caller holds until the library call has returned."""
    st = t.stride()
    if st and st[-1] != 1 and t.shape[-1] > 1:
        t = t.contiguous()
        keep.append(t)
        st = t.stride()
    return (t.data_ptr(), *st, *_PAD[len(st)])


def _desc(t: torch.Tensor) -> tuple:
    """(data, stride0..3) of t's dattn_tensor as it is (outputs, lse, mask)."""
    st = t.stride()
    return (t.data_ptr(), *st, *_PAD[len(st)])


def _last_contig(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    if t is None:
        return None
    if t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
        return t.contiguous()
    return t


_fp32_precision = getattr(torch._C, "_get_fp32_precision_getter", None)  # torch >= 2.9


def cuda_fp32_math() -> int:
    """The fp32_math of an fp32 CUDA call made now: MATH_TF32 when PyTorch currently lets
    fp32 CUDA matmuls use TF32, else MATH_IEEE. PyTorch's switch, read at every call:
    ``torch.backends.cuda.matmul.fp32_precision == "tf32"`` (torch >= 2.9; inherited from
    ``torch.backends.fp32_precision``), which ``torch.backends.cuda.matmul.allow_tf32 =
    True`` and ``torch.set_float32_matmul_precision("high" | "medium")`` also set; the
    default ("highest" / "ieee") keeps dattn's fp32 products IEEE. So the attention core
    follows the same setting as the model's own projections (transformers' eager path does
    its attention matmuls in TF32 exactly then). Only the forward has a TF32 kernel; the
    backward computes IEEE fp32 either way."""
    if _fp32_precision is not None:
        try:
            return _lib.MATH_TF32 if _fp32_precision("cuda", "matmul") == "tf32" else _lib.MATH_IEEE
        except Exception:  # pragma: no cover - an API change: the legacy flag below
            pass
    try:
        return _lib.MATH_TF32 if torch.backends.cuda.matmul.allow_tf32 else _lib.MATH_IEEE
    except Exception:  # the legacy getter raises on mixed legacy / new API settings
        return _lib.MATH_IEEE


def _head(q, pk, pq, cu_seqlens, max_seqlen, position_buckets, max_relative_positions,
          padded_rows):
    """(the scalar fields abi_version .. total_tokens of dattn_params, the stream)."""
    dtype = _DTYPES.get(q.dtype)
    if dtype is None:
        raise DattnUnsupported(_lib.UNSUPPORTED, f"dtype {q.dtype} is not supported")
    math = _lib.MATH_IEEE
    if q.is_cuda:
        dev, idx, threads = _lib.DEVICE_CUDA, q.get_device(), 0
        stream = (_raw_stream(idx) if _raw_stream is not None
                  else torch.cuda.current_stream(q.device).cuda_stream)
        if dtype == _lib.F32:
            math = cuda_fp32_math()
    elif q.is_cpu:
        dev, idx, threads, stream = _lib.DEVICE_CPU, -1, torch.get_num_threads(), 0
    else:
        raise DattnUnsupported(_lib.UNSUPPORTED,
                               f"device type '{q.device.type}' has no dattn backend")
    pos = (_lib.POS_C2P if pk is not None else 0) | (_lib.POS_P2C if pq is not None else 0)
    if cu_seqlens is not None:
        layout = _lib.LAYOUT_PACKED
        sh = q.shape
        B, L, H, D, T = cu_seqlens.shape[0] - 1, max_seqlen, sh[1], sh[2], sh[0]
    else:
        layout = _lib.LAYOUT_PADDED
        B, L, H, D = q.shape
        T = 0
    return ((_lib.ABI_VERSION, dev, idx, dtype, layout, pos, position_buckets,
             max_relative_positions, padded_rows, math, threads, 0, B, L, H, D, T),
            stream)


def _dropout_key(rng, dropout_p):
    """(dropout_p, reserved1, dropout_seed, dropout_offset)."""
    if dropout_p > 0.0:
        if rng is None:
            raise ValueError("dattn: dropout_p > 0 needs the rng tensor [seed, offset]")
        seed, offset = rng.tolist()  # a CPU tensor: no device synchronisation
        return (dropout_p, 0, seed & 0xFFFFFFFFFFFFFFFF, offset & 0xFFFFFFFFFFFFFFFF)
    return (dropout_p, 0, 0, 0)


def _inputs(q, k, v, pk, pq, mask, cu_seqlens, keep):
    """(data, stride0..3) of q, k, v, pk, pq, mask, then cu_seqlens (a pointer)."""
    if cu_seqlens is not None:
        tm, cu = _ABSENT, cu_seqlens.data_ptr()  # (the packed layout ignores mask)
    else:
        cu = 0
        if mask is None:
            tm = _ABSENT
        else:
            tm = _desc(mask.view(torch.uint8) if mask.dtype == torch.bool else mask)
    return (*_td(q, keep), *_td(k, keep), *_td(v, keep),
            *(_td(pk, keep) if pk is not None else _ABSENT),
            *(_td(pq, keep) if pq is not None else _ABSENT), *tm, cu)


# Workspace bytes by call signature: (direction, the scalar fields, mask / lse present,
# dropout on). The workspace query validates the call exactly as the call itself does, so
# a hit skips a library round trip without skipping any check. The size can depend on more
# than the key (the CPU sizes packed calls by their longest sequence, read from cu_seqlens;
# DATTN_CUDA_BWD picks the CUDA backward's partials): a larger cached size only wastes
# memory, and a smaller one makes the call fail before it writes anything ("workspace_size
# is ... this call needs ..."), after which _run queries and calls again. Bounded: cleared
# when full (a packed workload with a new token count per batch misses across batches, hits
# across the layers of one batch).
_WS_BYTES = {}
_WS_ENTRIES = 1024


def _run(fn, size_fn, image, stream, like, key):
    """The library call with a workspace from PyTorch's allocator on like's device
    (256-byte aligned). The call is stream-ordered: when the workspace tensor is freed on
    return, the caching allocator keeps its block for that stream's later work."""
    nbytes = _WS_BYTES.get(key)
    if nbytes is None:
        nbytes = _query(size_fn, image, stream, key)
        cached = False
    else:
        cached = True
    ws = like.new_empty(nbytes + 256, dtype=torch.uint8) if nbytes else None
    addr = (ws.data_ptr() + 255) & ~255 if nbytes else 0
    try:
        fn(image + _pack_tail(addr, nbytes, stream))
    except DattnError as e:
        if not cached or e.status != _lib.INVALID_ARG:
            raise
        # the cached size may be short for this call: ask (the query raises the call's
        # own error if it is malformed), and call again when it needs more
        need = _query(size_fn, image, stream, key)
        if need <= nbytes:
            raise
        ws = like.new_empty(need + 256, dtype=torch.uint8)
        fn(image + _pack_tail((ws.data_ptr() + 255) & ~255, need, stream))
    del ws


def _query(size_fn, image, stream, key):
    nbytes = size_fn(image + _pack_tail(0, 0, stream))
    if len(_WS_BYTES) >= _WS_ENTRIES:
        _WS_BYTES.clear()
    _WS_BYTES[key] = nbytes
    return nbytes


def _bad(field, msg):
    raise DattnError(_lib.INVALID_ARG, f"{field}: {msg}", "call")


def _check(q, k, v, pk, pq, mask, cu_seqlens, position_buckets, max_relative_positions,
           more=()):
    """What the library cannot check itself (it sees strides and pointers only): every
    tensor's shape against q's and its device. A short k or pk would be read out of
    bounds, a longer pk would leave rows of dpk unwritten, a tensor on another device
    would be dereferenced as if it were on q's. more: (name, tensor, shape) triples."""
    shp, dev = q.shape, q.device
    packed = cu_seqlens is not None
    if len(shp) != (3 if packed else 4):
        _bad("q", f"shape {list(shp)}: must be {'[T, H, D] (packed)' if packed else '[B, L, H, D]'}")
    for name, t in (("k", k), ("v", v)):
        if t.shape != shp:
            _bad(name, f"shape {list(t.shape)} must equal q's {list(shp)}")
        if t.device != dev:
            _bad(name, f"on {t.device}, q on {dev}")
    if pk is not None or pq is not None:
        H, D = shp[-2], shp[-1]
        S = position_buckets if position_buckets > 0 else max_relative_positions
        for name, t in (("pk", pk), ("pq", pq)):
            if t is None:
                continue
            if t.shape != (H, 2 * S, D):
                _bad(name, f"shape {list(t.shape)} must be [H, 2S, D] = [{H}, {2 * S}, {D}] "
                           "(S: position_buckets if > 0, else max_relative_positions)")
            if t.device != dev:
                _bad(name, f"on {t.device}, q on {dev}")
    if packed:
        if cu_seqlens.dim() != 1 or cu_seqlens.shape[0] < 2:
            _bad("cu_seqlens", f"shape {list(cu_seqlens.shape)}: must be [B + 1], B >= 1")
        if cu_seqlens.device != dev:
            _bad("cu_seqlens", f"on {cu_seqlens.device}, q on {dev} (the kernels read it there)")
    elif mask is not None:
        if mask.shape != shp[:2]:
            _bad("mask", f"shape {list(mask.shape)} must be [B, L] = {list(shp[:2])}")
        if mask.device != dev:
            _bad("mask", f"on {mask.device}, q on {dev}")
    for name, t, want in more:
        if t.shape != want:
            _bad(name, f"shape {list(t.shape)} must be {list(want)}")
        if t.device != dev:
            _bad(name, f"on {t.device}, q on {dev}")


def _lse_shape(q, cu_seqlens):
    if cu_seqlens is not None:
        return (q.shape[1], q.shape[0])
    return (q.shape[0], q.shape[2], q.shape[1])


# ---- forward ------------------------------------------------------------------------


def _fwd_impl(q, k, v, pk, pq, mask, cu_seqlens, rng, max_seqlen, position_buckets,
              max_relative_positions, padded_rows, dropout_p, need_lse=True):
    """The forward's body, shared by the registered op, the eager autograd path and the
    eager no-grad fast path. need_lse=False (no-grad path only): lse is not written
    (lse.data = NULL) and None is returned in its place."""
    _check(q, k, v, pk, pq, mask, cu_seqlens, position_buckets, max_relative_positions)
    head, stream = _head(q, pk, pq, cu_seqlens, max_seqlen, position_buckets,
                         max_relative_positions, padded_rows)
    keep = []
    ins = _inputs(q, k, v, pk, pq, mask, cu_seqlens, keep)
    out = torch.empty_like(q, memory_format=_CONTIG)
    if need_lse:
        lse = q.new_empty(_lse_shape(q, cu_seqlens), dtype=torch.float32)
        tl = _desc(lse)
    else:
        lse, tl = None, _ABSENT
    image = _pack_head(*head, *ins, *_desc(out), *tl, *_dropout_key(rng, dropout_p),
                       *_NO_GRADS)
    _run(_lib.fwd, _lib.fwd_workspace_size, image, stream, q,
         (0, head, mask is not None and cu_seqlens is None, need_lse, dropout_p > 0.0))
    return out, lse


@torch.library.custom_op("dattn::fwd", mutates_args=())
def _fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pk: Optional[torch.Tensor],
         pq: Optional[torch.Tensor], mask: Optional[torch.Tensor],
         cu_seqlens: Optional[torch.Tensor], rng: Optional[torch.Tensor], max_seqlen: int,
         position_buckets: int, max_relative_positions: int, padded_rows: int,
         dropout_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    return _fwd_impl(q, k, v, pk, pq, mask, cu_seqlens, rng, max_seqlen, position_buckets,
                     max_relative_positions, padded_rows, dropout_p)


@_fwd.register_fake
def _fwd_fake(q, k, v, pk, pq, mask, cu_seqlens, rng, max_seqlen, position_buckets,
              max_relative_positions, padded_rows, dropout_p):
    out = q.new_empty(q.shape)
    lse = q.new_empty(_lse_shape(q, cu_seqlens), dtype=torch.float32)
    return out, lse


# ---- backward -----------------------------------------------------------------------


def _grad_like(t: torch.Tensor) -> torch.Tensor:
    """The buffer of dpk / dpq (every element is written by the kernel: no fill), with the
    strides of pk / pq when those are dense with a contiguous last dimension. hf.py passes
    pk, pq as transposed views [H, 2S, D] of the projection's [2S, H * D] output: the
    gradient then reaches the projection through the same views without a copy (a
    contiguous dpk made autograd clone it: one launch and 2 * |pk| bytes per term per
    layer). Otherwise (not dense, or strided last dimension) contiguous, as before. The
    real and fake implementations share it, so their strides agree under torch.compile."""
    if t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
        return torch.empty_like(t, memory_format=_CONTIG)
    return torch.empty_like(t)  # preserve_format: t's strides if dense, else contiguous


def _fused_qkv(q, k, v) -> bool:
    """Whether the eager backward writes dq, dk, dv side by side, as the slices [..., j, :, :]
    of one [..., 3, H, D] buffer, instead of three contiguous tensors: when all three are
    non-leaf tensors (a leaf's gradient gets its own layout: AccumulateGrad would copy a
    strided one). Then a producer that wants [dq | dk | dv] as one [N, 3 H D] matrix (the
    fused projection of _proj.py: its weight gradients are one GEMM over it) reads it in
    place instead of stacking the three (one launch, 2 * 3 |q| bytes, per layer), and the
    backward makes one allocation instead of three. Any other producer sees strided rows
    (row stride 3 H D, each row dense), which views, GEMMs and elementwise ops take as
    they are."""
    return q.grad_fn is not None and k.grad_fn is not None and v.grad_fn is not None


def _fused_pos(pk, pq) -> bool:
    """Likewise for dpq, dpk (query side first: _proj.py's order) as the slices [:, j] of
    one [2S, 2, H, D] buffer, transposed to [H, 2S, D]: when pk and pq are both non-leaf
    transposed views [2S, H, D] -> [H, 2S, D] of dense [2S, H D] projections (hf.py's
    layout, whose gradient _grad_like gives the same strides)."""
    if pk is None or pq is None or pk.grad_fn is None or pq.grad_fn is None:
        return False
    H, S2, D = pk.shape
    return pq.shape == pk.shape and pk.stride() == (D, H * D, 1) == pq.stride()


def _bwd_outputs(q, k, v, pk, pq, absent_as_none=False, fused=(False, False)):
    """dq, dk, dv (contiguous), dpk, dpq. The op's schema returns five tensors: an absent
    table's gradient is an empty tensor there; absent_as_none (eager autograd path, whose
    backward returns None for it) skips that allocation. fused: (_fused_qkv, _fused_pos)
    of the forward's inputs (eager autograd path only)."""
    if fused[0]:
        sh = q.shape
        dq, dk, dv = q.new_empty((*sh[:-2], 3, sh[-2], sh[-1])).unbind(-3)
    else:
        dq = torch.empty_like(q, memory_format=_CONTIG)
        dk = torch.empty_like(k, memory_format=_CONTIG)
        dv = torch.empty_like(v, memory_format=_CONTIG)
    if fused[1]:
        H, S2, D = pk.shape
        buf = pk.new_empty((S2, 2, H, D))
        return dq, dk, dv, buf[:, 1].transpose(0, 1), buf[:, 0].transpose(0, 1)
    if pk is not None:
        dpk = _grad_like(pk)
    else:
        dpk = None if absent_as_none else q.new_empty(0)
    if pq is not None:
        dpq = _grad_like(pq)
    else:
        dpq = None if absent_as_none else q.new_empty(0)
    return dq, dk, dv, dpk, dpq


def _bwd_impl(dout, q, k, v, pk, pq, mask, cu_seqlens, rng, out, lse, max_seqlen,
              position_buckets, max_relative_positions, padded_rows, dropout_p,
              absent_as_none=False, fused=(False, False), outs=None):
    """The backward's body (the registered op and the eager autograd path). The saved
    tensors are checked and described again: under saved-tensor hooks (activation
    checkpointing, offloading) they are not the forward's tensors. outs: dq, dk, dv, dpk,
    dpq to write (the fused layer node's views of its G / Gp matrices; None for an absent
    table) instead of new tensors."""
    _check(q, k, v, pk, pq, mask, cu_seqlens, position_buckets, max_relative_positions,
           (("dout", dout, q.shape), ("out", out, q.shape), ("lse", lse, _lse_shape(q, cu_seqlens))))
    if dout.dtype != q.dtype:
        dout = _last_contig(dout).to(q.dtype)
    head, stream = _head(q, pk, pq, cu_seqlens, max_seqlen, position_buckets,
                         max_relative_positions, padded_rows)
    keep = []
    ins = _inputs(q, k, v, pk, pq, mask, cu_seqlens, keep)
    if outs is None:
        outs = _bwd_outputs(q, k, v, pk, pq, absent_as_none, fused)
    dq, dk, dv, dpk, dpq = outs
    image = _pack_head(*head, *ins, *_td(out, keep), *_desc(lse),
                       *_dropout_key(rng, dropout_p), *_td(dout, keep), *_desc(dq),
                       *_desc(dk), *_desc(dv), *(_desc(dpk) if pk is not None else _ABSENT),
                       *(_desc(dpq) if pq is not None else _ABSENT))
    _run(_lib.bwd, _lib.bwd_workspace_size, image, stream, q,
         (1, head, mask is not None and cu_seqlens is None, True, dropout_p > 0.0))
    return dq, dk, dv, dpk, dpq


@torch.library.custom_op("dattn::bwd", mutates_args=())
def _bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
         pk: Optional[torch.Tensor], pq: Optional[torch.Tensor], mask: Optional[torch.Tensor],
         cu_seqlens: Optional[torch.Tensor], rng: Optional[torch.Tensor], out: torch.Tensor,
         lse: torch.Tensor, max_seqlen: int, position_buckets: int, max_relative_positions: int,
         padded_rows: int, dropout_p: float
         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return _bwd_impl(dout, q, k, v, pk, pq, mask, cu_seqlens, rng, out, lse, max_seqlen,
                     position_buckets, max_relative_positions, padded_rows, dropout_p)


@_bwd.register_fake
def _bwd_fake(dout, q, k, v, pk, pq, mask, cu_seqlens, rng, out, lse, max_seqlen,
              position_buckets, max_relative_positions, padded_rows, dropout_p):
    return _bwd_outputs(q, k, v, pk, pq)


def _setup_context(ctx, inputs, output):
    (q, k, v, pk, pq, mask, cu_seqlens, rng, max_seqlen, position_buckets,
     max_relative_positions, padded_rows, dropout_p) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, pk, pq, mask, cu_seqlens, rng, out, lse)
    ctx.args = (max_seqlen, position_buckets, max_relative_positions, padded_rows, dropout_p)
    ctx.has_pk, ctx.has_pq = pk is not None, pq is not None
    # lse is a by-product for the backward, not a differentiable result: autograd then
    # never fills a zero gradient for it (one launch of |lse| bytes per layer), and with
    # materialisation off an unused out reaches _backward as None instead of zeros.
    ctx.mark_non_differentiable(lse)
    ctx.set_materialize_grads(False)


def _backward(ctx, dout, dlse):
    if dout is None:  # out did not reach the loss: every input gradient is zero
        return (None,) * 13
    q, k, v, pk, pq, mask, cu_seqlens, rng, out, lse = ctx.saved_tensors
    dq, dk, dv, dpk, dpq = torch.ops.dattn.bwd(dout, q, k, v, pk, pq, mask, cu_seqlens, rng,
                                               out, lse, *ctx.args)
    return (dq, dk, dv, dpk if ctx.has_pk else None, dpq if ctx.has_pq else None,
            None, None, None, None, None, None, None, None)


_fwd.register_autograd(_backward, setup_context=_setup_context)


class _EagerAttention(torch.autograd.Function):
    """dattn::fwd with its registered autograd formula, for eager calls that need a
    gradient (plain tensors, no compile, no mode: see _eager_path): the same bodies
    (_fwd_impl / _bwd_impl) and the same formula as the op (_setup_context / _backward:
    out and lse saved, lse not differentiable, no zero gradient materialised), without
    the op's dispatch and its generated autograd wrapper, which cost ~100 us of host
    time per forward + backward (torch.library fills the op's defaults from its schema
    at every call). Under torch.compile, modes and tensor subclasses the op runs."""

    @staticmethod
    def forward(ctx, q, k, v, pk, pq, mask, cu_seqlens, rng, cfg):
        out, lse = _fwd_impl(q, k, v, pk, pq, mask, cu_seqlens, rng, *cfg)
        ctx.save_for_backward(q, k, v, pk, pq, mask, cu_seqlens, rng, out, lse)
        ctx.cfg = cfg
        ctx.fused = (_fused_qkv(q, k, v), _fused_pos(pk, pq))
        ctx.set_materialize_grads(False)
        return out

    @staticmethod
    def backward(ctx, dout):
        if dout is None:  # out did not reach the loss: every input gradient is zero
            return (None,) * 9
        q, k, v, pk, pq, mask, cu_seqlens, rng, out, lse = ctx.saved_tensors
        if (type(dout) is torch.Tensor and not torch.is_grad_enabled()
                and _plain(q, k, v, pk, pq, out, lse) and not _modes_active()):
            dq, dk, dv, dpk, dpq = _bwd_impl(dout, q, k, v, pk, pq, mask, cu_seqlens, rng,
                                             out, lse, *ctx.cfg, absent_as_none=True,
                                             fused=ctx.fused)
        else:  # create_graph, a mode or a subclass: the op, as dattn::fwd's backward does
            dq, dk, dv, dpk, dpq = torch.ops.dattn.bwd(dout, q, k, v, pk, pq, mask,
                                                       cu_seqlens, rng, out, lse, *ctx.cfg)
        return (dq, dk, dv, dpk if pk is not None else None, dpq if pq is not None else None,
                None, None, None, None)


def c_apply(fn_cls):
    """fn_cls.apply without torch.autograd.Function.apply's Python wrapper: the C apply
    it ends in. The wrapper binds default arguments (for Functions with setup_context) and
    unwraps functorch's dead wrappers of every argument: 9-15 us a call on this project's
    CPU (bench/results/host-2026-12-07-apply), host time before the forward's first launch.
    Only for callers that have ruled out functorch transforms (where the wrapper does more)
    and whose Function has no setup_context. On a torch without a C apply: fn_cls.apply."""
    try:
        return torch._C._FunctionBase.__dict__["apply"].__get__(None, fn_cls)
    except (AttributeError, KeyError, TypeError):  # pragma: no cover - a torch without it
        return fn_cls.apply


_eager_apply = c_apply(_EagerAttention)  # (_eager_path has ruled out functorch transforms)


# ---- public wrapper -----------------------------------------------------------------


def new_rng(device: "torch.device | str | None" = None) -> torch.Tensor:
    """[seed, offset] (int64, on the CPU) for one dropout call on ``device``, from
    PyTorch's generator of that device; no device synchronisation.

    CUDA: the device generator's seed and current Philox offset; the offset is then
    advanced by 4 (PyTorch's unit), so the next call -- or PyTorch's own dropout -- gets
    a fresh counter range. CPU (and None): two draws from the default CPU generator."""
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cuda":
        idx = dev.index if dev.index is not None else torch.cuda.current_device()
        torch.cuda.init()  # default_generators is empty before CUDA is initialised
        gen = torch.cuda.default_generators[idx]
        seed = gen.initial_seed() & 0xFFFFFFFFFFFFFFFF
        offset = gen.get_offset()
        gen.set_offset(offset + 4)
        if seed >= 1 << 63:  # as a signed int64; _fill masks it back to uint64
            seed -= 1 << 64
        return torch.tensor([seed, offset], dtype=torch.int64)
    return torch.randint(0, 2**62, (2,), dtype=torch.int64)


@torch.library.custom_op("dattn::rng", mutates_args=(),
                         tags=(torch.Tag.nondeterministic_seeded,))
def _rng_op(like: torch.Tensor) -> torch.Tensor:
    """new_rng(like.device) as an opaque op: torch.compile keeps the draw (and the
    generator's advance) in the compiled code instead of tracing generator calls."""
    return new_rng(like.device)


@_rng_op.register_fake
def _rng_fake(like):
    return torch.empty(2, dtype=torch.int64, device="cpu")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              pk: Optional[torch.Tensor] = None, pq: Optional[torch.Tensor] = None, *,
              mask: Optional[torch.Tensor] = None, cu_seqlens: Optional[torch.Tensor] = None,
              max_seqlen: Optional[int] = None, position_buckets: int = 256,
              max_relative_positions: int = 512, padded_rows: str = "hf",
              dropout_p: float = 0.0, rng: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Disentangled attention (SPEC.md). Returns out, shaped like q.

    pk / pq switch the c2p / p2c terms on; the softmax scale is sqrt(D * (1 + #terms)),
    computed by the library. Padded layout when cu_seqlens is None (mask optional),
    packed layout otherwise (max_seqlen: an upper bound of the sequence lengths; defaults
    to T, which costs nothing but is loose)."""
    dt = q.dtype
    k = k.to(dt) if k.dtype != dt else k
    v = v.to(dt) if v.dtype != dt else v
    if pk is not None and pk.dtype != dt:
        pk = pk.to(dt)
    if pq is not None and pq.dtype != dt:
        pq = pq.to(dt)
    args = (q, k, v, pk, pq) + tail_args(q, q.shape, mask, cu_seqlens, max_seqlen,
                                         position_buckets, max_relative_positions,
                                         padded_rows, dropout_p, rng)
    mask, cu_seqlens, rng = args[5:8]
    path = _eager_path(q, k, v, pk, pq, mask, cu_seqlens)
    if path is _NO_GRAD:
        # inference in eager mode: the op's dispatch (autograd wrapper, dynamo guard)
        # costs ~25 us of host time per call, which decides the time of short packed
        # batches on a GPU; the body is the same function the op runs (lse not written).
        return _fwd_impl(*args, need_lse=False)[0]
    if path is _GRAD:
        return _eager_apply(q, k, v, pk, pq, mask, cu_seqlens, rng, args[8:])
    out, _ = torch.ops.dattn.fwd(*args)
    return out


def tail_args(like, qshape, mask, cu_seqlens, max_seqlen, position_buckets,
              max_relative_positions, padded_rows, dropout_p, rng) -> tuple:
    """attention()'s arguments after q, k, v, pk, pq as the ops take them: (mask,
    cu_seqlens, rng, max_seqlen, position_buckets, max_relative_positions, padded_rows
    code, dropout_p). qshape: q's shape; like: a tensor on q's device (the dropout key is
    drawn for it when rng is None). Shared with the fused layer node of _proj.py, which
    calls the bodies below before q exists."""
    if cu_seqlens is not None:
        if cu_seqlens.dtype != torch.int32:
            cu_seqlens = cu_seqlens.to(torch.int32)
        if max_seqlen is None:
            max_seqlen = qshape[0]
        mask = None
    else:
        max_seqlen = qshape[1]
        if mask is not None and mask.dtype not in (torch.uint8, torch.bool):
            mask = mask != 0
    if dropout_p > 0.0 and rng is None:
        rng = torch.ops.dattn.rng(like) if torch.compiler.is_compiling() else new_rng(like.device)
    if dropout_p <= 0.0:
        rng = None
    return (mask, cu_seqlens, rng, max_seqlen, int(position_buckets),
            int(max_relative_positions), _PADROWS[padded_rows], float(dropout_p))


_NO_GRAD, _GRAD = "no-grad", "grad"
_Tensor = torch.Tensor
_is_compiling = torch.compiler.is_compiling
_tf_mode_enabled = torch._C._is_torch_function_mode_enabled
_functorch_active = torch._C._are_functorch_transforms_active
_jit_tracing = torch._C._get_tracing_state


def _plain(*ts) -> bool:
    """Every tensor of ts (None skipped) a plain torch.Tensor, no subclass."""
    for t in ts:
        if t is not None and type(t) is not _Tensor:
            return False
    return True


def _modes_active() -> bool:
    """torch.compile tracing, a torch function or dispatch mode (FakeTensor, the op
    audit's recorder, torch.device(...) as a context), a functorch transform, or the
    TorchScript tracer (which records ops, not a ctypes call)."""
    return (_is_compiling() or _tf_mode_enabled() or _get_current_dispatch_mode() is not None
            or _functorch_active() or _jit_tracing() is not None)


def _eager_path(q, k, v, pk, pq, mask, cu_seqlens):
    """_NO_GRAD, _GRAD, or None when the call must go through the op (compile, a mode, a
    tensor subclass)."""
    T = _Tensor
    if (type(q) is not T or type(k) is not T or type(v) is not T
            or (pk is not None and type(pk) is not T) or (pq is not None and type(pq) is not T)
            or (mask is not None and type(mask) is not T)
            or (cu_seqlens is not None and type(cu_seqlens) is not T) or _modes_active()):
        return None
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad
                                    or (pk is not None and pk.requires_grad)
                                    or (pq is not None and pq.requires_grad)):
        return _GRAD
    return _NO_GRAD


# ---- capability probe ---------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _probe_cached(device_type: str, device_index: int, dtype: torch.dtype, heads: int,
                  head_dim: int, pos_att: int, position_buckets: int,
                  max_relative_positions: int, packed: bool, backward: bool,
                  dropout: bool) -> Optional[str]:
    dev = _DEVICES.get(device_type)
    if dev is None:
        return f"device type '{device_type}' has no dattn backend"
    code = _DTYPES.get(dtype)
    if code is None:
        return f"dtype {dtype} is not supported by dattn"
    try:
        ok, why = _lib.device_supported(dev, device_index)
    except OSError as e:
        return f"libdattn could not be loaded ({e})"
    if not ok:
        return f"dattn cannot run on {device_type}: {why}"
    # A well-formed call of that kind, on addresses that are never dereferenced (the
    # workspace-size queries validate without touching data), asks the library whether
    # it would run it.
    p = _lib.new_params()
    p.device, p.device_index, p.dtype = dev, device_index, code
    p.pos_att, p.position_buckets = pos_att, position_buckets
    p.max_relative_positions = max_relative_positions
    p.heads, p.head_dim, p.batch, p.seqlen = heads, head_dim, 1, 1
    p.dropout_p = 0.1 if dropout else 0.0
    S = _lib.att_span(position_buckets, max_relative_positions) if pos_att else 1
    addr = [1 << 20]

    def fake(shape):
        t = _lib.Tensor()
        t.data = addr[0]
        addr[0] += 1 << 20
        s = 1
        for i in range(len(shape) - 1, -1, -1):
            t.stride[i] = s
            s *= shape[i]
        return t

    if packed and dev == _lib.DEVICE_CUDA:
        p.layout = _lib.LAYOUT_PACKED
        p.total_tokens = 1
        p.cu_seqlens = addr[0]
        addr[0] += 1 << 20
        row = (1, heads, head_dim)
        lse = (heads, 1)
    else:  # (a CPU packed call would read cu_seqlens: probe the padded layout there)
        row = (1, 1, heads, head_dim)
        lse = (1, heads, 1)
    p.q, p.k, p.v, p.out = fake(row), fake(row), fake(row), fake(row)
    p.lse = fake(lse)
    if pos_att & _lib.POS_C2P:
        p.pk = fake((heads, 2 * S, head_dim))
    if pos_att & _lib.POS_P2C:
        p.pq = fake((heads, 2 * S, head_dim))
    try:
        _lib.fwd_workspace_size(p)
        if backward:
            p.dout, p.dq, p.dk, p.dv = fake(row), fake(row), fake(row), fake(row)
            if pos_att & _lib.POS_C2P:
                p.dpk = fake((heads, 2 * S, head_dim))
            if pos_att & _lib.POS_P2C:
                p.dpq = fake((heads, 2 * S, head_dim))
            _lib.bwd_workspace_size(p)
    except _lib.DattnError as e:
        return f"dattn rejects this call: {e.message}"
    return None


@torch.compiler.assume_constant_result
def probe(device_type: str, device_index: int, dtype: torch.dtype, heads: int, head_dim: int,
          pos_att: int, position_buckets: int, max_relative_positions: int, packed: bool,
          backward: bool, dropout: bool) -> Optional[str]:
    """None when libdattn would run such a call on this device, else the reason it would
    not. Host-only, cached; constant under torch.compile."""
    return _probe_cached(device_type, device_index, dtype, heads, head_dim, pos_att,
                         position_buckets, max_relative_positions, packed, backward, dropout)
