"""ctypes binding of libdattn (include/dattn.h).

Every function gets declared argtypes/restype; `Params` mirrors `dattn_params` field for
field and is checked against the library at load time (sizeof, ABI version and the
defaults written by dattn_params_init), so a stale or foreign libdattn.so is refused
instead of being called with a wrong struct.

Where the library comes from, first match wins:
  1. $DATTN_LIBRARY (an explicit path: a deliberate override, e.g. a debug or CUDA build);
  2. libdattn.so shipped inside this package (``pip install .`` puts it there);
  3. build/libdattn.so of the source tree this package sits in (``make`` + PYTHONPATH=python
     or an editable install).
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
from pathlib import Path

# ---- constants mirrored from dattn.h -------------------------------------------------
ABI_VERSION = 1

OK, INVALID_ARG, UNSUPPORTED, CUDA_ERROR, INTERNAL = 0, 1, 2, 3, 4
DEVICE_CPU, DEVICE_CUDA = 0, 1
F32, F16, BF16 = 0, 1, 2
LAYOUT_PADDED, LAYOUT_PACKED = 0, 1
POS_C2P, POS_P2C = 1, 2
PADROWS_HF, PADROWS_ZERO = 0, 1
MATH_IEEE, MATH_TF32 = 0, 1

_STATUS_NAMES = {OK: "ok", INVALID_ARG: "invalid argument", UNSUPPORTED: "unsupported",
                 CUDA_ERROR: "CUDA error", INTERNAL: "internal error"}


class DattnError(RuntimeError):
    """A libdattn call returned a status other than DATTN_OK."""

    def __init__(self, status: int, message: str, where: str = ""):
        self.status = status
        self.message = message
        name = _STATUS_NAMES.get(status, f"status {status}")
        super().__init__(f"dattn{(' ' + where) if where else ''}: {name}: {message}")


class DattnUnsupported(DattnError):
    """DATTN_UNSUPPORTED: a valid call this build/backend cannot run (callers fall back)."""


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("stride", ctypes.c_int64 * 4)]


class Params(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("device_index", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("layout", ctypes.c_int32),
        ("pos_att", ctypes.c_int32),
        ("position_buckets", ctypes.c_int32),
        ("max_relative_positions", ctypes.c_int32),
        ("padded_rows", ctypes.c_int32),
        ("fp32_math", ctypes.c_int32),
        ("num_threads", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
        ("batch", ctypes.c_int64),
        ("seqlen", ctypes.c_int64),
        ("heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("total_tokens", ctypes.c_int64),
        ("q", Tensor),
        ("k", Tensor),
        ("v", Tensor),
        ("pk", Tensor),
        ("pq", Tensor),
        ("mask", Tensor),
        ("cu_seqlens", ctypes.c_void_p),
        ("out", Tensor),
        ("lse", Tensor),
        ("dropout_p", ctypes.c_float),
        ("reserved1", ctypes.c_int32),
        ("dropout_seed", ctypes.c_uint64),
        ("dropout_offset", ctypes.c_uint64),
        ("dout", Tensor),
        ("dq", Tensor),
        ("dk", Tensor),
        ("dv", Tensor),
        ("dpk", Tensor),
        ("dpq", Tensor),
        ("workspace", ctypes.c_void_p),
        ("workspace_size", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
    ]


_P = ctypes.POINTER(Params)


def _struct_format(fields) -> str:
    """The struct-module format of a ctypes field list, in native mode (C's alignment):
    ctypes' simple types carry their struct code in _type_. Checked field by field
    against the ctypes offsets below."""
    out = []
    for _, typ in fields:
        if issubclass(typ, ctypes.Structure):
            out.append(_struct_format(typ._fields_))
        elif issubclass(typ, ctypes.Array):
            out.append(f"{typ._length_}{typ._type_._type_}")
        else:
            out.append(typ._type_)
    return "".join(out)


def _check_struct_layout():
    fmt = "@"
    for name, typ in Params._fields_:
        if struct.calcsize(fmt) != getattr(Params, name).offset:
            raise AssertionError(f"dattn: struct image of dattn_params is off at {name}")
        fmt += _struct_format([(name, typ)])
    if struct.calcsize(fmt) != ctypes.sizeof(Params):
        raise AssertionError("dattn: struct image of dattn_params has the wrong size")


_check_struct_layout()

# The byte image of dattn_params for the per-call path of ops.py: filling a ctypes
# Structure costs an attribute write per field (~100 of them per call); one
# struct.pack of all the values costs about as much as ten. PARAMS_HEAD covers every
# field up to `workspace`; PARAMS_TAIL is (workspace, workspace_size, stream), packed
# separately so that the workspace query and the call share the head.
# PARAMS_HEAD values, in order: the 12 int32 and 5 int64 scalars (abi_version .. total_tokens),
# then (data, stride0..3) for q, k, v, pk, pq, mask, cu_seqlens, (data, stride0..3) for
# out, lse, dropout_p, reserved1, dropout_seed, dropout_offset, and (data, stride0..3) for
# dout, dq, dk, dv, dpk, dpq.
PARAMS_HEAD = struct.Struct("@" + _struct_format(Params._fields_[:-3]))
PARAMS_TAIL = struct.Struct("@" + _struct_format(Params._fields_[-3:]))
assert Params.workspace.offset == PARAMS_HEAD.size
assert PARAMS_HEAD.size + PARAMS_TAIL.size == ctypes.sizeof(Params)

# name: (restype, argtypes)
_SIGNATURES = {
    "dattn_params_init": (None, [_P]),
    "dattn_fwd_workspace_size": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_size_t)]),
    "dattn_bwd_workspace_size": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_size_t)]),
    "dattn_fwd": (ctypes.c_int, [_P]),
    "dattn_bwd": (ctypes.c_int, [_P]),
    "dattn_status_string": (ctypes.c_char_p, [ctypes.c_int]),
    "dattn_last_error": (ctypes.c_char_p, []),
    "dattn_version": (ctypes.c_char_p, []),
    "dattn_params_sizeof": (ctypes.c_size_t, []),
    "dattn_build_info": (ctypes.c_char_p, []),
    "dattn_device_supported": (ctypes.c_int, [ctypes.c_int32, ctypes.c_int32]),
    "dattn_att_span": (ctypes.c_int32, [ctypes.c_int32, ctypes.c_int32]),
    "dattn_scale": (ctypes.c_float, [ctypes.c_int64, ctypes.c_int32]),
    "dattn_slots": (ctypes.c_int, [ctypes.c_int32, ctypes.c_int32, ctypes.c_int64,
                                   ctypes.c_int64, ctypes.POINTER(ctypes.c_int32)]),
    "dattn_dropout_keep": (ctypes.c_int, [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_float,
                                          ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                          ctypes.c_int64, ctypes.c_int64]),
}

_PKG_DIR = Path(__file__).resolve().parent


def candidate_paths() -> list[Path]:
    """Where the library is looked for, in order."""
    out = []
    env = os.environ.get("DATTN_LIBRARY")
    if env:
        out.append(Path(env))
    out.append(_PKG_DIR / "libdattn.so")
    out.append(_PKG_DIR.parent.parent / "build" / "libdattn.so")
    return out


_lock = threading.Lock()
_lib = None
_lib_path = None


_BYTES_FNS = {}  # name -> the same C function taking the params as a byte image


def _load():
    global _lib, _lib_path
    if _lib is not None:  # (a module global read: no lock once loaded)
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in candidate_paths():
            if not path.is_file():
                tried.append(f"{path} (missing)")
                continue
            lib = ctypes.CDLL(str(path))
            for name, (res, args) in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype = res
                fn.argtypes = args
            _check_abi(lib, path)
            for name in ("dattn_fwd", "dattn_bwd"):
                fn = lib[name]  # a separate function object: its own argtypes
                fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_char_p]
                _BYTES_FNS[name] = fn
            for name in ("dattn_fwd_workspace_size", "dattn_bwd_workspace_size"):
                fn = lib[name]
                fn.restype = ctypes.c_int
                fn.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)]
                _BYTES_FNS[name] = fn
            _lib, _lib_path = lib, path
            return lib
        raise OSError("libdattn.so not found; build it with `make` in the repository or "
                      "set DATTN_LIBRARY. Tried: " + "; ".join(tried))


def _check_abi(lib, path):
    size = lib.dattn_params_sizeof()
    if size != ctypes.sizeof(Params):
        raise OSError(f"{path}: dattn_params is {size} bytes in the library but "
                      f"{ctypes.sizeof(Params)} in this binding (mismatched versions)")
    p = Params()
    ctypes.memset(ctypes.byref(p), 0x5A, ctypes.sizeof(p))
    lib.dattn_params_init(ctypes.byref(p))
    expect = dict(abi_version=ABI_VERSION, device=DEVICE_CPU, device_index=-1, dtype=F32,
                  layout=LAYOUT_PADDED, pos_att=POS_C2P | POS_P2C, position_buckets=256,
                  max_relative_positions=512, padded_rows=PADROWS_HF, fp32_math=MATH_IEEE,
                  num_threads=0, batch=0, total_tokens=0, dropout_p=0.0, workspace_size=0)
    for name, val in expect.items():
        got = getattr(p, name)
        if got != val:
            raise OSError(f"{path}: dattn_params_init() set {name} = {got}, this binding "
                          f"expects {val} (ABI mismatch)")
    if p.q.data is not None or p.stream is not None or p.cu_seqlens is not None:
        raise OSError(f"{path}: dattn_params_init() left pointers set (ABI mismatch)")


def lib():
    """The loaded library (loads it on first use)."""
    return _load()


def library_path() -> Path:
    _load()
    return _lib_path


def last_error() -> str:
    return lib().dattn_last_error().decode("utf-8", "replace")


def check(status: int, where: str = "") -> None:
    """Raises DattnError / DattnUnsupported for a non-OK status (message from the library)."""
    if status == OK:
        return
    msg = last_error()
    if status == UNSUPPORTED:
        raise DattnUnsupported(status, msg, where)
    raise DattnError(status, msg, where)


def new_params() -> Params:
    p = Params()
    lib().dattn_params_init(ctypes.byref(p))
    return p


_PARAMS_SIZE = ctypes.sizeof(Params)


def _fn(name, image):
    """The byte-image variant of a C function, for an image of the right size."""
    if len(image) != _PARAMS_SIZE:
        raise ValueError(f"dattn: a params image has {len(image)} bytes, "
                         f"dattn_params has {_PARAMS_SIZE}")
    if _lib is None:
        _load()
    return _BYTES_FNS[name]


# The four calls below take a Params, or its byte image (bytes of sizeof(Params): a
# PARAMS_HEAD.pack(...) + PARAMS_TAIL.pack(...)), which the library reads in place.


def fwd_workspace_size(p) -> int:
    n = ctypes.c_size_t(0)
    if type(p) is bytes:
        st = _fn("dattn_fwd_workspace_size", p)(p, ctypes.byref(n))
    else:
        st = lib().dattn_fwd_workspace_size(ctypes.byref(p), ctypes.byref(n))
    check(st, "fwd_workspace_size")
    return n.value


def bwd_workspace_size(p) -> int:
    n = ctypes.c_size_t(0)
    if type(p) is bytes:
        st = _fn("dattn_bwd_workspace_size", p)(p, ctypes.byref(n))
    else:
        st = lib().dattn_bwd_workspace_size(ctypes.byref(p), ctypes.byref(n))
    check(st, "bwd_workspace_size")
    return n.value


def fwd(p) -> None:
    st = _fn("dattn_fwd", p)(p) if type(p) is bytes else lib().dattn_fwd(ctypes.byref(p))
    if st != OK:
        check(st, "fwd")


def bwd(p) -> None:
    st = _fn("dattn_bwd", p)(p) if type(p) is bytes else lib().dattn_bwd(ctypes.byref(p))
    if st != OK:
        check(st, "bwd")


def version() -> str:
    return lib().dattn_version().decode()


def build_info() -> str:
    return lib().dattn_build_info().decode()


def device_supported(device: int, device_index: int = -1) -> tuple[bool, str]:
    """(True, "") when the backend can run on that device, else (False, reason)."""
    st = lib().dattn_device_supported(device, device_index)
    if st == OK:
        return True, ""
    return False, last_error() or _STATUS_NAMES.get(st, str(st))


def att_span(position_buckets: int, max_relative_positions: int) -> int:
    return lib().dattn_att_span(position_buckets, max_relative_positions)


def scale(head_dim: int, pos_att: int) -> float:
    return lib().dattn_scale(head_dim, pos_att)


def slots(position_buckets: int, max_relative_positions: int, r0: int, count: int) -> list[int]:
    buf = (ctypes.c_int32 * max(count, 1))()
    check(lib().dattn_slots(position_buckets, max_relative_positions, r0, count, buf), "slots")
    return list(buf[:count])


def dropout_keep(seed: int, offset: int, p: float, b: int, h: int, heads: int, i: int,
                 j: int) -> bool:
    return bool(lib().dattn_dropout_keep(seed, offset, p, b, h, heads, i, j))
