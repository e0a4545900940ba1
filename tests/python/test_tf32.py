"""fp32 math mode of CUDA calls: dattn follows PyTorch's TF32 switch for fp32 matmuls.

An fp32 CUDA forward runs the TF32 tensor-core kernel exactly when PyTorch currently lets
fp32 CUDA matmuls use TF32 (``torch.backends.cuda.matmul.fp32_precision == "tf32"``, set
by ``allow_tf32 = True`` or ``set_float32_matmul_precision("high" | "medium")`` as well);
the default keeps IEEE fp32. The flag is read at every call.

- CPU (always): the switch's reading under every way of setting it, and that it reaches
  the fp32_math field of the call's dattn_params (fp32 CUDA calls only; CPU calls and
  fp16 / bf16 calls stay IEEE);
- CUDA (skipped without a GPU): the params image of a real call carries the mode, TF32
  and IEEE outputs differ on the same inputs, each within its bound of a float64
  reference (IEEE 2e-5 absolute as test_ops; TF32 2^-8 * max|ref|, the fp16 form with TF32's
  unit roundoff 2^-11, as tests/test_cuda_fwd.c).
"""

import contextlib

import pytest
import torch

from dattn import _lib, ops
from conftest import DEVICES
from test_host_path import _capture
from test_ops import reference

_M = torch.backends.cuda.matmul
_NEW_API = hasattr(_M, "fp32_precision") or hasattr(torch._C, "_get_fp32_precision_getter")


@contextlib.contextmanager
def _tf32_setting(how):
    """Sets PyTorch's fp32 matmul precision one way; restores conftest's state (the legacy
    flag off, which also resets the new API's matmul setting) afterwards."""
    try:
        if how == "legacy-on":
            _M.allow_tf32 = True
        elif how == "legacy-off":
            _M.allow_tf32 = False
        elif how in ("highest", "high", "medium"):
            torch.set_float32_matmul_precision(how)
        elif how in ("new-tf32", "new-ieee"):
            _M.fp32_precision = how[4:]
        elif how == "global-tf32":
            torch.backends.fp32_precision = "tf32"
            _M.fp32_precision = "none"
        elif how == "mixed":  # legacy on, then the new API off: the legacy getter raises
            _M.allow_tf32 = True
            _M.fp32_precision = "ieee"
        else:
            raise ValueError(how)
        yield
    finally:
        if _NEW_API and hasattr(torch.backends, "fp32_precision"):
            torch.backends.fp32_precision = "none"
        _M.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")


_EXPECT = {"legacy-on": _lib.MATH_TF32, "legacy-off": _lib.MATH_IEEE, "highest": _lib.MATH_IEEE,
           "high": _lib.MATH_TF32, "medium": _lib.MATH_TF32}
_EXPECT_NEW = {"new-tf32": _lib.MATH_TF32, "new-ieee": _lib.MATH_IEEE,
               "global-tf32": _lib.MATH_TF32, "mixed": _lib.MATH_IEEE}


@pytest.mark.parametrize("how", list(_EXPECT) + list(_EXPECT_NEW))
def test_switch_reading(how):
    if how in _EXPECT_NEW and not _NEW_API:
        pytest.skip("this torch has no fp32_precision API")
    assert ops.cuda_fp32_math() == _lib.MATH_IEEE  # conftest's state
    with _tf32_setting(how):
        assert ops.cuda_fp32_math() == {**_EXPECT, **_EXPECT_NEW}[how]
    assert ops.cuda_fp32_math() == _lib.MATH_IEEE


class _FakeCuda:
    """Just what ops._head reads of a CUDA tensor (no GPU needed)."""

    is_cuda, is_cpu = True, False

    def __init__(self, dtype, shape):
        self.dtype, self.shape = dtype, shape

    def get_device(self):
        return 0


_FIELD = 9  # fp32_math's position among _head's scalar fields (abi_version .. total_tokens)


@pytest.mark.parametrize("how", ["legacy-on", "high", "legacy-off", "highest"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_switch_reaches_params(how, dtype, monkeypatch):
    monkeypatch.setattr(ops, "_raw_stream", lambda idx: 0)
    q = _FakeCuda(dtype, (2, 11, 2, 64))
    with _tf32_setting(how):
        head, _ = ops._head(q, None, None, None, None, 256, 512, _lib.PADROWS_HF)
        cpu_head, _ = ops._head(torch.zeros(2, 11, 2, 64, dtype=dtype), None, None, None, None,
                                256, 512, _lib.PADROWS_HF)
    want = _EXPECT[how] if dtype == torch.float32 else _lib.MATH_IEEE
    assert head[_FIELD] == want
    assert head[1] == _lib.DEVICE_CUDA and head[3] == ops.dtype_code(dtype)
    assert cpu_head[_FIELD] == _lib.MATH_IEEE  # the CPU backend has no TF32 mode
    # the field is where the library reads fp32_math: the image of this head
    rest = len(_lib.PARAMS_HEAD.unpack(bytes(_lib.PARAMS_HEAD.size))) - len(head)
    image = _lib.PARAMS_HEAD.pack(*head, *([0] * rest)) + _lib.PARAMS_TAIL.pack(0, 0, 0)
    assert _lib.Params.from_buffer_copy(image).fp32_math == want


@pytest.mark.parametrize("device", [d for d in DEVICES if getattr(d, "values", [d])[0] == "cuda"])
@pytest.mark.parametrize("terms", ["both", "none"])
def test_cuda_tf32_mode(device, terms, monkeypatch, seed):
    B, L, H, D, buckets, M = 2, 300, 2, 64, 256, 512
    S = buckets
    x = [torch.randn(B, L, H, D, dtype=torch.float64) for _ in range(3)]
    pos = [torch.randn(H, 2 * S, D, dtype=torch.float64) if terms == "both" else None for _ in range(2)]
    mask = torch.ones(B, L, dtype=torch.uint8)
    mask[1, 200:] = 0
    low = [None if t is None else t.to(device, torch.float32) for t in x + pos]
    ref = reference(*x, *pos, mask, buckets, M)
    seen = _capture(monkeypatch)
    outs = {}
    for how in ("legacy-off", "legacy-on"):
        with _tf32_setting(how), torch.no_grad():
            outs[how] = ops.attention(*low, mask=mask.to(device), position_buckets=buckets,
                                      max_relative_positions=M)
    images = [_lib.Params.from_buffer_copy(img) for name, img in seen if name == "fwd"]
    assert [p.fp32_math for p in images] == [_lib.MATH_IEEE, _lib.MATH_TF32]
    ieee, tf32 = outs["legacy-off"].double().cpu(), outs["legacy-on"].double().cpu()
    assert (ieee - ref).abs().max().item() <= 2e-5
    tol = 2.0 ** -8 * ref.abs().max().item() + 1e-6
    assert (tf32 - ref).abs().max().item() <= tol
    assert not torch.equal(ieee, tf32), "TF32 mode gave the IEEE result bit for bit"
