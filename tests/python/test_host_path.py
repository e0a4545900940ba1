"""The per-call host path of dattn.ops (bench/host_overhead.py measures it):

- the dattn_params byte image (struct.pack, read in place by the library) holds the
  values the ctypes Params of the same call would, field by field, decoded through the
  ctypes layout;
- the eager no-grad path (lse not written), the eager autograd path (_EagerAttention)
  and the op (torch.ops.dattn.fwd with its registered autograd) give bitwise equal
  outputs and gradients, and each is taken when it should be;
- the workspace-size cache never serves a stale size: same shapes with other strides,
  dtypes, devices, terms, mask, padded rows, dropout, packed lengths give the results of
  an uncached call, and a cached size that is too small is corrected by a new query.
"""

import ctypes
import warnings

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from dattn import _lib, ops
from conftest import DEVICES, gradients_checkable
from test_ops import check_close, reference

H, D, S, M = 2, 16, 8, 32


def _tensors(device, dtype=torch.float32, B=2, L=11, grad=False):
    q, k, v = (torch.randn(B, L, H, D, device=device, dtype=dtype) for _ in range(3))
    pk, pq = (torch.randn(H, 2 * S, D, device=device, dtype=dtype) for _ in range(2))
    ts = [q, k, v, pk, pq]
    return [t.requires_grad_() for t in ts] if grad else ts


def _capture(monkeypatch):
    """Records every params image handed to _lib.fwd / _lib.bwd (and the call's kind)."""
    seen = []
    for name in ("fwd", "bwd"):
        orig = getattr(_lib, name)

        def wrap(p, orig=orig, name=name):
            seen.append((name, p))
            return orig(p)

        monkeypatch.setattr(_lib, name, wrap)
    return seen


def _check_tensor(field, t):
    if t is None:
        assert field.data is None and list(field.stride) == [0, 0, 0, 0]
        return
    assert field.data == (t.data_ptr() or None)
    st = list(t.stride())
    assert list(field.stride) == st + [0] * (4 - len(st))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["padded", "mask-bool", "packed", "dropout-zero-rows"])
def test_params_image_holds_the_call(device, kind, monkeypatch, seed):
    seen = _capture(monkeypatch)
    q, k, v, pk, pq = _tensors(device)
    pk = torch.randn(2 * S, H, D, device=device).transpose(0, 1)  # strided, as hf.py
    mask = cu = rng = None
    drop, rows, maxlen = 0.0, "hf", 11
    if kind == "mask-bool":
        mask = torch.ones(2, 11, dtype=torch.bool, device=device)
        mask[1, 7:] = False
    if kind == "packed":
        q, k, v = (t.reshape(22, H, D) for t in (q, k, v))
        cu = torch.tensor([0, 9, 22], dtype=torch.int32, device=device)
        maxlen = 13
    if kind == "dropout-zero-rows":
        mask = torch.ones(2, 11, dtype=torch.uint8, device=device)
        mask[0, 3:] = 0
        drop, rows = 0.25, "zero"
        rng = torch.tensor([-5, 3], dtype=torch.int64)  # a negative seed: masked to uint64
    out, lse = torch.ops.dattn.fwd(q, k, v, pk, None, mask, cu, rng, maxlen, S, M,
                                   ops._PADROWS[rows], drop)
    g = torch.randn_like(out)
    grads = torch.ops.dattn.bwd(g, q, k, v, pk, None, mask, cu, rng, out, lse, maxlen, S, M,
                                ops._PADROWS[rows], drop)
    assert [n for n, _ in seen] == ["fwd", "bwd"]
    for name, image in seen:
        assert type(image) is bytes and len(image) == ctypes.sizeof(_lib.Params)
        p = _lib.Params.from_buffer_copy(image)
        assert p.abi_version == _lib.ABI_VERSION and p.fp32_math == _lib.MATH_IEEE
        assert p.dtype == _lib.F32 and p.pos_att == _lib.POS_C2P
        assert (p.position_buckets, p.max_relative_positions) == (S, M)
        assert p.padded_rows == ops._PADROWS[rows]
        if device == "cpu":
            assert (p.device, p.device_index) == (_lib.DEVICE_CPU, -1)
            assert p.num_threads == torch.get_num_threads() and p.stream is None
        else:
            assert (p.device, p.device_index) == (_lib.DEVICE_CUDA, q.get_device())
            assert p.stream == (torch.cuda.current_stream(q.device).cuda_stream or None)
        if cu is not None:
            assert p.layout == _lib.LAYOUT_PACKED
            assert (p.batch, p.seqlen, p.heads, p.head_dim, p.total_tokens) == (2, 13, H, D, 22)
            assert p.cu_seqlens == cu.data_ptr()
            _check_tensor(p.mask, None)
        else:
            assert p.layout == _lib.LAYOUT_PADDED
            assert (p.batch, p.seqlen, p.heads, p.head_dim, p.total_tokens) == (2, 11, H, D, 0)
            assert p.cu_seqlens is None
            _check_tensor(p.mask, mask)
        for f, t in zip((p.q, p.k, p.v, p.pk, p.pq, p.out, p.lse), (q, k, v, pk, None, out, lse)):
            _check_tensor(f, t)
        assert p.dropout_p == pytest.approx(drop) and p.reserved0 == p.reserved1 == 0
        if drop:
            assert (p.dropout_seed, p.dropout_offset) == (2**64 - 5, 3)
        else:
            assert (p.dropout_seed, p.dropout_offset) == (0, 0)
        if name == "fwd":
            for f in (p.dout, p.dq, p.dk, p.dv, p.dpk, p.dpq):
                _check_tensor(f, None)
            need = _lib.fwd_workspace_size(image)
        else:
            dq, dk, dv, dpk, dpq = grads
            for f, t in zip((p.dout, p.dq, p.dk, p.dv, p.dpk, p.dpq), (g, dq, dk, dv, dpk, None)):
                _check_tensor(f, t)
            need = _lib.bwd_workspace_size(image)
        assert p.workspace_size == need
        assert (p.workspace or 0) % 256 == 0 and (need == 0) == (p.workspace is None)


def test_params_image_size_is_checked():
    with pytest.raises(ValueError, match="params image"):
        _lib.fwd(b"\0" * 16)
    with pytest.raises(ValueError, match="params image"):
        _lib.bwd_workspace_size(b"\0" * (ctypes.sizeof(_lib.Params) + 8))


class _OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def _call(device, kind, mask=True):
    """(q, k, v, pk, pq as a list, the keywords) of one call: B 2, L 13, padded (with a
    mask that pads the second row, unless mask=False), packed (two sequences), dropout 0.3
    or c2p only."""
    B, L = 2, 13
    x = _tensors(device, B=B, L=L)
    kw = dict(position_buckets=S, max_relative_positions=M)
    if kind == "packed":
        x[:3] = [t.reshape(B * L, H, D) for t in x[:3]]
        kw.update(cu_seqlens=torch.tensor([0, 4, 26], dtype=torch.int32, device=device),
                  max_seqlen=22)
    elif mask:
        kw["mask"] = (torch.arange(L, device=device) < torch.tensor([[L], [8]], device=device))
    if kind == "dropout":
        kw.update(dropout_p=0.3, rng=ops.new_rng(device))
    if kind == "c2p-only":
        x[4] = None
    return x, kw


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["padded", "packed", "dropout", "c2p-only"])
def test_eager_paths_and_op_agree_bitwise(device, kind, seed):
    x, kw = _call(device, kind)
    leaves = lambda: [t.detach().clone().requires_grad_() if t is not None else None  # noqa: E731
                      for t in x]
    with torch.no_grad():
        out_ng = ops.attention(*x, **kw)  # eager no-grad path: lse not written
    a = leaves()
    out_a = ops.attention(*a, **kw)  # eager autograd path
    assert type(out_a.grad_fn).__name__ == "_EagerAttentionBackward"
    b = leaves()
    with _OpLog() as log:  # a dispatch mode: the op runs (and its autograd)
        out_b = ops.attention(*b, **kw)
    assert "dattn.fwd.default" in log.names
    assert type(out_b.grad_fn).__name__.startswith("GeneratedBackwardFor_dattn_fwd")
    assert torch.equal(out_ng, out_a) and torch.equal(out_a, out_b)
    if not gradients_checkable(device):
        return
    g = torch.randn_like(out_a)
    out_a.backward(g)
    out_b.backward(g)
    for ta, tb in zip(a, b):
        if ta is not None:
            assert ta.grad is not None and torch.equal(ta.grad, tb.grad)
    # the eager path's backward takes the op under a mode (e.g. the op audit's recorder)
    c = leaves()
    out_c = ops.attention(*c, **kw)
    with _OpLog() as log:
        out_c.backward(g)
    assert "dattn.bwd.default" in log.names
    for ta, tc in zip(a, c):
        if ta is not None:
            assert torch.equal(ta.grad, tc.grad)


def test_eager_autograd_path_skips_function_apply_wrapper(monkeypatch, seed):
    """The eager autograd path enters _EagerAttention through the C apply (ops.c_apply), not
    through torch.autograd.Function.apply's Python wrapper (9-15 us a call on this project's
    CPU, before the forward's first launch); the node, outputs and gradients are the op's."""
    def no_wrapper(*a, **k):
        raise AssertionError("Function.apply's Python wrapper was called")

    monkeypatch.setattr(torch.autograd.Function, "apply", classmethod(no_wrapper))
    x, kw = _call("cpu", "padded")
    a = [t.detach().clone().requires_grad_() for t in x]
    out = ops.attention(*a, **kw)
    assert type(out.grad_fn).__name__ == "_EagerAttentionBackward"
    monkeypatch.undo()
    b = [t.detach().clone().requires_grad_() for t in x]
    with _OpLog():
        ref = ops.attention(*b, **kw)
    g = torch.randn_like(out)
    out.backward(g)
    ref.backward(g)
    assert torch.equal(out, ref)
    for ta, tb in zip(a, b):
        assert torch.equal(ta.grad, tb.grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["padded", "packed", "dropout"])
def test_nonleaf_gradients_side_by_side(device, kind, seed):
    """The eager backward of non-leaf q, k, v writes dq, dk, dv as the slices [..., j, :, :]
    of one [..., 3, H, D] buffer, and of non-leaf transposed views pq, pk of [2S, H D]
    projections writes dpq, dpk as the slices [:, j] of one [2S, 2, H, D] buffer (what
    _proj.py's backward reads in place); the values are bitwise those of leaf inputs, whose
    gradients stay contiguous."""
    if not gradients_checkable(device):
        pytest.skip("no gradients on this device")
    x, kw = _call(device, kind, mask=False)
    g = torch.randn_like(x[0])
    # leaves: contiguous q, k, v and [H, 2S, D] tables
    a = [t.detach().clone().requires_grad_() for t in x]
    ga = torch.autograd.grad(ops.attention(*a, **kw), a, g)
    assert all(t.is_contiguous() for t in ga)
    # non-leaf: q, k, v views of their own tensors, pk / pq transposed views of [2S, H D]
    base = [t.detach().clone().requires_grad_() for t in x[:3]]
    q, k, v = (t * 1 for t in base)
    pbase = [t.detach().transpose(0, 1).reshape(2 * S, H * D).requires_grad_() for t in x[3:]]
    pk, pq = (t.view(2 * S, H, D).transpose(0, 1) * 1 for t in pbase)
    pk, pq = (t.transpose(0, 1).contiguous().transpose(0, 1) for t in (pk, pq))  # hf.py's strides
    assert pk.stride() == (D, H * D, 1) and pk.grad_fn is not None
    gb = torch.autograd.grad(ops.attention(q, k, v, pk, pq, **kw), (q, k, v, pk, pq), g)
    dq, dk, dv, dpk, dpq = gb
    es, hd = dq.element_size(), H * D
    row = dq.stride()[-3]
    assert row == 3 * hd and dq.stride() == dk.stride() == dv.stride()
    assert dk.data_ptr() == dq.data_ptr() + hd * es and dv.data_ptr() == dq.data_ptr() + 2 * hd * es
    assert dpq.stride() == dpk.stride() == (D, 2 * hd, 1)
    assert dpk.data_ptr() == dpq.data_ptr() + hd * es
    for ta, tb in zip(ga, gb):
        assert torch.equal(ta, tb)


def _cases(devices):
    """(name, device, dtype, options) over the same B, L, H, D: every field the workspace
    key holds, and a few it does not (strides, packed lengths), changed one at a time,
    each case on every device in turn."""
    cases = [(str(dt).replace("torch.", ""), dt, {})
             for dt in (torch.float32, torch.bfloat16, torch.float16)]
    cases += [(name, torch.float32, opt) for name, opt in [
        ("transposed-pk", {"pk_t": True}),
        ("c2p", {"terms": (True, False)}),
        ("p2c", {"terms": (False, True)}),
        ("none", {"terms": (False, False)}),
        ("mask", {"mask": True}),
        ("mask-zero", {"mask": True, "rows": "zero"}),
        ("dropout", {"drop": 0.2}),
        ("packed-short", {"lens": [2, 3, 1, 2]}),
        ("packed-long", {"lens": [1, 1, 1, 5]}),
        ("packed-short2", {"lens": [2, 2, 2, 2]}),
        ("buckets", {"pos": (4, 16)}),
    ]]
    return [(f"{dev}-{name}", dev, dt, opt) for name, dt, opt in cases for dev in devices]


def _run_case(dev, dt, opt, x, g):
    q, k, v, pk, pq = (t.to(dev, dt) for t in x)
    if opt.get("pk_t"):
        pk = pk.transpose(0, 1).contiguous().transpose(0, 1)  # same values, other strides
    c2p, p2c = opt.get("terms", (True, True))
    pb, m = opt.get("pos", (S, M))
    span = _lib.att_span(pb, m)  # pk, pq: [H, 2 * span, D]
    pk, pq = (pk[:, :2 * span] if c2p else None), (pq[:, :2 * span] if p2c else None)
    B, L = q.shape[:2]
    kw = dict(position_buckets=pb, max_relative_positions=m, padded_rows=opt.get("rows", "hf"))
    if opt.get("mask"):
        mask = torch.ones(B, L, dtype=torch.uint8)
        mask[1, L // 2:] = 0
        kw["mask"] = mask.to(dev)
    if opt.get("drop"):
        kw.update(dropout_p=opt["drop"], rng=torch.tensor([11, 4], dtype=torch.int64))
    if "lens" in opt:  # same T = B * L and max_seqlen, other lengths
        lens = [n * L // 2 for n in opt["lens"]]
        lens[-1] += B * L - sum(lens)
        q, k, v = (t.reshape(B * L, H, D) for t in (q, k, v))
        cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
        kw.update(cu_seqlens=cu.to(dev), max_seqlen=B * L)
    leaves = [t.detach().requires_grad_() if t is not None else None for t in (q, k, v, pk, pq)]
    out = ops.attention(*leaves, **kw)
    grads = []
    if gradients_checkable(dev):
        out.backward(g.to(dev, dt).reshape(out.shape))
        grads = [t.grad for t in leaves if t is not None]
    return out.detach(), grads


@pytest.mark.parametrize("device", DEVICES)
def test_workspace_cache_never_stale(device, seed):
    """A sequence of calls over one shape through the cache, each equal (bitwise) to the
    same call with the cache emptied first; the CPU packed calls alternate short and long
    sequences (the CPU's workspace grows with the longest one: the retry path). On CUDA
    the CUDA cases interleave with the CPU ones (same shapes, other device)."""
    devices = ["cpu"] if device == "cpu" else [device, "cpu"]
    B, L = 4, 12
    x = [torch.randn(B, L, H, D) for _ in range(3)] + [torch.randn(H, 2 * S, D) for _ in range(2)]
    g = torch.randn(B, L, H, D)
    ops._WS_BYTES.clear()
    for rnd in range(2):  # the second round hits entries of the first
        for name, dev, dt, opt in _cases(devices):
            out, grads = _run_case(dev, dt, opt, x, g)
            saved = dict(ops._WS_BYTES)
            ops._WS_BYTES.clear()
            out2, grads2 = _run_case(dev, dt, opt, x, g)
            ops._WS_BYTES.update(saved)
            assert torch.equal(out, out2), f"{name} (round {rnd}): out"
            for a, b in zip(grads, grads2):
                assert torch.equal(a, b), f"{name} (round {rnd}): gradients"
    # and against the float64 reference, on the CPU, through the warm cache
    out, grads = _run_case("cpu", torch.float32, {"mask": True}, x, g)
    mask = torch.ones(B, L, dtype=torch.uint8)
    mask[1, L // 2:] = 0
    r = reference(*(t.double() for t in x), mask, S, M)
    check_close(out, r, 2e-5, "out")


def test_workspace_cache_short_entry_is_requeried(seed):
    """A cached size below the call's need (whatever the cause) costs one more query and
    call, not a failure; a malformed call still reports the library's own error."""
    B, L = 2, 10
    q, k, v, pk, pq = _tensors("cpu", B=B, L=L)
    kw = dict(position_buckets=S, max_relative_positions=M)
    ops._WS_BYTES.clear()
    with torch.no_grad():
        ref = ops.attention(q, k, v, pk, pq, **kw)
    (key, need), = ops._WS_BYTES.items()
    assert need > 256
    for poisoned in (0, 1, need - 256, 10 * need):
        ops._WS_BYTES[key] = poisoned
        with torch.no_grad():
            out = ops.attention(q, k, v, pk, pq, **kw)
        assert torch.equal(out, ref)
        assert ops._WS_BYTES[key] == max(poisoned, need)
    # packed on the CPU: the workspace grows with the longest sequence (read from
    # cu_seqlens by the library): a short batch's entry is too small for a long one
    qp, kp, vp = (t.reshape(B * L, H, D) for t in (q, k, v))
    ops._WS_BYTES.clear()
    short = torch.tensor([0, 3, 6, 9, 12, 15, 18, 20], dtype=torch.int32)
    long = torch.tensor([0, 1, 2, 3, 4, 5, 6, 20], dtype=torch.int32)
    outs = []
    with torch.no_grad():
        for cu in (short, long):
            outs.append(ops.attention(qp, kp, vp, pk, pq, cu_seqlens=cu, max_seqlen=20, **kw))
            outs.append(ops._WS_BYTES.copy())
    assert outs[1].keys() == outs[3].keys() and len(outs[1]) == 1
    assert list(outs[1].values())[0] < list(outs[3].values())[0]
    ops._WS_BYTES.clear()
    with torch.no_grad():
        assert torch.equal(outs[2], ops.attention(qp, kp, vp, pk, pq, cu_seqlens=long,
                                                  max_seqlen=20, **kw))
    # a malformed call with a warm entry reports the library's own error
    good = torch.tensor([0, 7, 20], dtype=torch.int32)
    bad = torch.tensor([0, 7, 19], dtype=torch.int32)
    with torch.no_grad():
        ops.attention(qp, kp, vp, pk, pq, cu_seqlens=good, max_seqlen=13, **kw)
        with pytest.raises(_lib.DattnError, match=r"cu_seqlens\[batch\] = 19 must equal"):
            ops.attention(qp, kp, vp, pk, pq, cu_seqlens=bad, max_seqlen=13, **kw)
    ops._WS_BYTES.clear()
    with torch.no_grad(), pytest.raises(_lib.DattnError, match=r"cu_seqlens\[batch\] = 19"):
        ops.attention(qp, kp, vp, pk, pq, cu_seqlens=bad, max_seqlen=13, **kw)


def test_workspace_cache_is_bounded(monkeypatch, seed):
    monkeypatch.setattr(ops, "_WS_ENTRIES", 3)
    ops._WS_BYTES.clear()
    with torch.no_grad():
        for L in range(2, 9):
            q, k, v, pk, pq = _tensors("cpu", L=L)
            ops.attention(q, k, v, pk, pq, position_buckets=S, max_relative_positions=M)
            assert 1 <= len(ops._WS_BYTES) <= 3


def test_jit_trace_records_the_op(seed):
    """The TorchScript tracer records ops: under it attention() takes the op (the eager
    paths' library call would be invisible to the trace)."""
    q, k, v, pk, _ = _tensors("cpu")

    def f(q, k, v, pk):
        return ops.attention(q, k, v, pk, None, position_buckets=S, max_relative_positions=M)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarning; torch.jit.trace is deprecated
        tr = torch.jit.trace(f, (q, k, v, pk), check_trace=False)
    assert "dattn::fwd" in [n.kind() for n in tr.graph.nodes()]
    q2, k2, v2 = (torch.randn_like(t) for t in (q, k, v))
    assert torch.equal(tr(q2, k2, v2, pk), f(q2, k2, v2, pk))


# ---- what the library cannot see: shapes and devices ---------------------------------

_BAD_SHAPES = [
    # (field named in the error, how to break the call)
    ("k", lambda a: a.update(k=a["k"][:, :-1])),                       # short k: read past its end
    ("v", lambda a: a.update(v=a["v"][..., :8])),
    ("pk", lambda a: a.update(pk=torch.cat([a["pk"], a["pk"][:, :2]], 1))),  # rows past 2S
    ("pq", lambda a: a.update(pq=a["pq"][:, :-2])),                   # fewer than 2S rows
    ("mask", lambda a: a.update(mask=torch.ones(2, 10, dtype=torch.uint8))),
    ("q", lambda a: a.update(q=a["q"][0], k=a["k"][0], v=a["v"][0])),  # rank 3, padded
]


@pytest.mark.parametrize("path", ["nograd", "grad", "op"])
@pytest.mark.parametrize("field,breaker", _BAD_SHAPES, ids=[f for f, _ in _BAD_SHAPES])
def test_shape_mismatch_names_the_field(field, breaker, path, seed):
    """A tensor whose shape does not match q's (or [H, 2S, D] for pk / pq, [B, L] for the
    mask) is refused with an error naming it, on every path, before the library runs."""
    q, k, v, pk, pq = _tensors("cpu")
    a = dict(q=q, k=k, v=v, pk=pk, pq=pq, mask=torch.ones(2, 11, dtype=torch.uint8))
    breaker(a)
    kw = dict(mask=a["mask"], position_buckets=S, max_relative_positions=M)
    calls = []
    orig = _lib.fwd
    try:
        _lib.fwd = lambda img: (calls.append(1), orig(img))[1]
        with pytest.raises(_lib.DattnError, match=rf"\b{field}: shape"):
            if path == "op":
                torch.ops.dattn.fwd(a["q"], a["k"], a["v"], a["pk"], a["pq"], a["mask"], None,
                                    None, a["q"].shape[1] if a["q"].dim() == 4 else 11, S, M,
                                    _lib.PADROWS_HF, 0.0)
            elif path == "grad":
                ops.attention(*(a[n].requires_grad_() for n in ("q", "k", "v", "pk", "pq")), **kw)
            else:
                with torch.no_grad():
                    ops.attention(a["q"], a["k"], a["v"], a["pk"], a["pq"], **kw)
    finally:
        _lib.fwd = orig
    assert not calls, "the library was called with a malformed call"


def test_backward_checks_dout_and_saved(seed):
    """The backward's own tensors: dout, out and lse shapes."""
    q, k, v, pk, pq = _tensors("cpu")
    args = (None, None, None, 11, S, M, _lib.PADROWS_HF, 0.0)
    out, lse = torch.ops.dattn.fwd(q, k, v, pk, pq, *args)
    for name, bad in (("dout", (out[:, :-1], out, lse)), ("out", (out, out[..., :8], lse)),
                      ("lse", (out, out, lse[:, :1]))):
        with pytest.raises(_lib.DattnError, match=rf"\b{name}: shape"):
            torch.ops.dattn.bwd(bad[0], q, k, v, pk, pq, None, None, None, bad[1], bad[2],
                                11, S, M, _lib.PADROWS_HF, 0.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device next to the CPU")
@pytest.mark.parametrize("field", ["k", "pk", "mask"])
def test_device_mismatch_names_the_field_cuda(field, seed):
    """A tensor on another device than q is refused (the kernels would dereference a host
    pointer on the GPU)."""
    q, k, v, pk, pq = _tensors("cuda")
    a = dict(q=q, k=k, v=v, pk=pk, pq=pq, mask=torch.ones(2, 11, dtype=torch.uint8, device="cuda"))
    a[field] = a[field].cpu()
    with torch.no_grad(), pytest.raises(_lib.DattnError, match=rf"\b{field}: on cpu"):
        ops.attention(a["q"], a["k"], a["v"], a["pk"], a["pq"], mask=a["mask"],
                      position_buckets=S, max_relative_positions=M)
