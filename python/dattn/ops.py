"""PyTorch custom ops over libdattn: ``dattn::fwd`` and ``dattn::bwd``.

Both are ``torch.library`` custom ops with fake (meta) implementations and a registered
autograd formula, so ``torch.compile(fullgraph=True)`` traces through them and autograd
uses the fused backward. The implementations only fill a ctypes struct and call the
library: no host synchronisation (no ``.item()``, no device-to-host copy). On CUDA the
call goes on the current stream and the workspace comes from PyTorch's allocator.

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


def _tensor(t: Optional[torch.Tensor]) -> _lib.Tensor:
    out = _lib.Tensor()
    if t is None:
        return out
    out.data = t.data_ptr() or None
    st = t.stride()
    for i, s in enumerate(st):
        out.stride[i] = s
    return out


def _last_contig(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    if t is None:
        return None
    if t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
        return t.contiguous()
    return t


def _device_of(t: torch.Tensor) -> tuple[int, int]:
    dev = _DEVICES.get(t.device.type)
    if dev is None:
        raise DattnUnsupported(_lib.UNSUPPORTED, f"device type '{t.device.type}' has no dattn backend")
    idx = t.device.index if t.device.index is not None else -1
    if dev == _lib.DEVICE_CUDA and idx < 0:
        idx = torch.cuda.current_device()
    return dev, idx


def _fill(q, k, v, pk, pq, mask, cu_seqlens, rng, max_seqlen, position_buckets,
          max_relative_positions, padded_rows, dropout_p) -> _lib.Params:
    p = _lib.new_params()
    dtype = _DTYPES.get(q.dtype)
    if dtype is None:
        raise DattnUnsupported(_lib.UNSUPPORTED, f"dtype {q.dtype} is not supported")
    p.device, p.device_index = _device_of(q)
    p.dtype = dtype
    p.pos_att = (_lib.POS_C2P if pk is not None else 0) | (_lib.POS_P2C if pq is not None else 0)
    p.position_buckets = position_buckets
    p.max_relative_positions = max_relative_positions
    p.padded_rows = padded_rows
    if p.device == _lib.DEVICE_CPU:
        p.num_threads = torch.get_num_threads()
    if cu_seqlens is not None:
        p.layout = _lib.LAYOUT_PACKED
        p.batch = cu_seqlens.shape[0] - 1
        p.seqlen = max_seqlen
        p.total_tokens = q.shape[0]
        p.heads, p.head_dim = q.shape[1], q.shape[2]
        p.cu_seqlens = cu_seqlens.data_ptr() or None
    else:
        p.layout = _lib.LAYOUT_PADDED
        p.batch, p.seqlen, p.heads, p.head_dim = q.shape
        p.mask = _tensor(mask)
    p.q, p.k, p.v = _tensor(q), _tensor(k), _tensor(v)
    p.pk, p.pq = _tensor(pk), _tensor(pq)
    p.dropout_p = dropout_p
    if dropout_p > 0.0:
        if rng is None:
            raise ValueError("dattn: dropout_p > 0 needs the rng tensor [seed, offset]")
        seed, offset = rng.tolist()  # a CPU tensor: no device synchronisation
        p.dropout_seed = seed & 0xFFFFFFFFFFFFFFFF
        p.dropout_offset = offset & 0xFFFFFFFFFFFFFFFF
    if p.device == _lib.DEVICE_CUDA:
        p.stream = torch.cuda.current_stream(q.device).cuda_stream or None
    return p


def _workspace(p: _lib.Params, nbytes: int, device: torch.device):
    """Allocates the workspace from PyTorch's allocator (256-byte aligned); keeps it alive
    by returning the tensor."""
    if nbytes == 0:
        return None
    buf = torch.empty(nbytes + 256, dtype=torch.uint8, device=device)
    addr = buf.data_ptr()
    aligned = (addr + 255) & ~255
    p.workspace = aligned
    p.workspace_size = nbytes
    return buf


def _lse_shape(q, cu_seqlens):
    if cu_seqlens is not None:
        return (q.shape[1], q.shape[0])
    return (q.shape[0], q.shape[2], q.shape[1])


def _prep_mask(mask):
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        mask = mask.view(torch.uint8)
    return mask


# ---- forward ------------------------------------------------------------------------


def _fwd_impl(q, k, v, pk, pq, mask, cu_seqlens, rng, max_seqlen, position_buckets,
              max_relative_positions, padded_rows, dropout_p):
    """The forward's body, shared by the registered op and the eager no-grad fast path."""
    q, k, v, pk, pq = (_last_contig(t) for t in (q, k, v, pk, pq))
    mask = _prep_mask(mask)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(_lse_shape(q, cu_seqlens), dtype=torch.float32, device=q.device)
    p = _fill(q, k, v, pk, pq, mask, cu_seqlens, rng, max_seqlen, position_buckets,
              max_relative_positions, padded_rows, dropout_p)
    p.out, p.lse = _tensor(out), _tensor(lse)
    ws = _workspace(p, _lib.fwd_workspace_size(p), q.device)
    _lib.fwd(p)
    del ws  # the call is stream-ordered; the caching allocator keeps the block safe
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
        return torch.empty(t.shape, dtype=t.dtype, device=t.device)
    return torch.empty_like(t)  # preserve_format: t's strides if dense, else contiguous


def _bwd_outputs(q, k, v, pk, pq):
    dt, dev = q.dtype, q.device
    dq = torch.empty(q.shape, dtype=dt, device=dev)
    dk = torch.empty(k.shape, dtype=dt, device=dev)
    dv = torch.empty(v.shape, dtype=dt, device=dev)
    dpk = _grad_like(pk) if pk is not None else torch.empty(0, dtype=dt, device=dev)
    dpq = _grad_like(pq) if pq is not None else torch.empty(0, dtype=dt, device=dev)
    return dq, dk, dv, dpk, dpq


def _bwd_impl(dout, q, k, v, pk, pq, mask, cu_seqlens, rng, out, lse, max_seqlen,
              position_buckets, max_relative_positions, padded_rows, dropout_p):
    dout, q, k, v, pk, pq, out = (_last_contig(t) for t in (dout, q, k, v, pk, pq, out))
    if dout.dtype != q.dtype:
        dout = dout.to(q.dtype)
    mask = _prep_mask(mask)
    dq, dk, dv, dpk, dpq = _bwd_outputs(q, k, v, pk, pq)
    p = _fill(q, k, v, pk, pq, mask, cu_seqlens, rng, max_seqlen, position_buckets,
              max_relative_positions, padded_rows, dropout_p)
    p.out, p.lse, p.dout = _tensor(out), _tensor(lse), _tensor(dout)
    p.dq, p.dk, p.dv = _tensor(dq), _tensor(dk), _tensor(dv)
    if pk is not None:
        p.dpk = _tensor(dpk)
    if pq is not None:
        p.dpq = _tensor(dpq)
    ws = _workspace(p, _lib.bwd_workspace_size(p), q.device)
    _lib.bwd(p)
    del ws
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
    if cu_seqlens is not None:
        if cu_seqlens.dtype != torch.int32:
            cu_seqlens = cu_seqlens.to(torch.int32)
        if max_seqlen is None:
            max_seqlen = q.shape[0]
        mask = None
    else:
        max_seqlen = q.shape[1]
        if mask is not None and mask.dtype not in (torch.uint8, torch.bool):
            mask = mask != 0
    if dropout_p > 0.0 and rng is None:
        rng = torch.ops.dattn.rng(q) if torch.compiler.is_compiling() else new_rng(q.device)
    if dropout_p <= 0.0:
        rng = None
    args = (q, k, v, pk, pq, mask, cu_seqlens, rng, max_seqlen, int(position_buckets),
            int(max_relative_positions), _PADROWS[padded_rows], float(dropout_p))
    if _eager_no_grad(q, k, v, pk, pq):
        # inference in eager mode: the op's dispatch (autograd wrapper, dynamo guard)
        # costs ~25 us of host time per call, which decides the time of short packed
        # batches on a GPU; the body is the same function the op runs.
        return _fwd_impl(*args)[0]
    out, _ = torch.ops.dattn.fwd(*args)
    return out


def _eager_no_grad(*ts) -> bool:
    if torch.compiler.is_compiling():
        return False
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in ts):
        return False
    # a tensor subclass or mode (FakeTensor, functorch transforms, ...) takes the op
    return (all(t is None or type(t) is torch.Tensor for t in ts)
            and not torch._C._is_torch_function_mode_enabled()
            and _get_current_dispatch_mode() is None)


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
