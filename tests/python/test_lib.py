"""The ctypes binding: loading, ABI checks, error reporting, helper functions."""

import ctypes
import subprocess
import sys

import pytest
import torch

from dattn import _lib


def test_params_mirror_matches_library():
    assert ctypes.sizeof(_lib.Params) == _lib.lib().dattn_params_sizeof()
    p = _lib.new_params()
    assert p.abi_version == _lib.ABI_VERSION
    assert p.device_index == -1 and p.position_buckets == 256 and p.max_relative_positions == 512


def test_every_function_declared():
    lib = _lib.lib()
    for name, (res, args) in _lib._SIGNATURES.items():
        fn = getattr(lib, name)
        assert fn.argtypes == args and fn.restype == res, name


def test_version_and_build_info():
    assert _lib.version() == "0.1.0"
    assert _lib.build_info().startswith("dattn 0.1.0")


def test_cpu_supported_and_bad_device():
    assert _lib.device_supported(_lib.DEVICE_CPU, -1) == (True, "")
    ok, why = _lib.device_supported(7, -1)
    assert not ok and "device" in why


def test_invalid_call_names_field():
    p = _lib.new_params()
    p.batch, p.seqlen, p.heads, p.head_dim = 1, 4, 1, 8
    with pytest.raises(_lib.DattnError) as e:
        _lib.fwd(p)
    assert e.value.status == _lib.INVALID_ARG
    assert ".data must not be NULL" in str(e.value)
    assert not isinstance(e.value, _lib.DattnUnsupported)


def test_unsupported_is_its_own_exception():
    p = _lib.new_params()
    p.batch, p.seqlen, p.heads, p.head_dim = 1, 1, 1, 512  # head_dim > 256 on the CPU
    bufs = [torch.zeros(512) for _ in range(6)]
    for name, b in zip(("q", "k", "v", "out"), bufs):
        t = _lib.Tensor()
        t.data = b.data_ptr()
        t.stride[:] = [512, 512, 512, 1]
        setattr(p, name, t)
    p.pos_att = 0
    with pytest.raises(_lib.DattnUnsupported) as e:
        _lib.fwd(p)
    assert "head_dim" in e.value.message


def test_slots_match_transformers():
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    for buckets, M in ((256, 512), (16, 64), (-1, 32)):
        r = torch.arange(-700, 701)
        S = buckets if buckets > 0 else M
        if buckets > 0:
            b = make_log_bucket_position(r, buckets, M).long()
        else:
            b = r
        want = torch.clamp(b + S, 0, 2 * S - 1).tolist()
        assert _lib.slots(buckets, M, -700, r.numel()) == want


def test_scale_is_float32_sqrt():
    for D in (16, 32, 64, 128):
        for bits in (0, 1, 2, 3):
            f = 1 + (bits & 1) + (bits >> 1)
            want = torch.sqrt(torch.tensor(float(D * f), dtype=torch.float32)).item()
            assert _lib.scale(D, bits) == want


def test_missing_library_reports_where_it_looked(tmp_path):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import dattn._lib as l; "
            "l._PKG_DIR = __import__('pathlib').Path(sys.argv[2]); "
            "import os; os.environ['DATTN_LIBRARY'] = sys.argv[2] + '/nope.so'\n"
            "try:\n    l.lib()\nexcept OSError as e:\n    print('ERR', e)")
    import dattn
    pkg_parent = str(__import__("pathlib").Path(dattn.__file__).parents[1])
    out = subprocess.run([sys.executable, "-c", code, pkg_parent, str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert "ERR libdattn.so not found" in out.stdout, out.stderr
    assert "nope.so (missing)" in out.stdout
