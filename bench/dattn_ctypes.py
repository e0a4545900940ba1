"""Minimal ctypes mirror of include/dattn.h for the benchmark and ad-hoc checks.

Not the package's Python layer (python/dattn is): only what bench/ needs. Works with
numpy arrays and torch tensors (anything with a data pointer and element strides).
"""
import ctypes as C
import os

F32, F16, BF16 = 0, 1, 2
PADDED, PACKED = 0, 1
C2P, P2C = 1, 2
PADROWS_HF, PADROWS_ZERO = 0, 1


class Tensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("stride", C.c_int64 * 4)]


class Params(C.Structure):
    _fields_ = [
        ("abi_version", C.c_int32), ("device", C.c_int32), ("device_index", C.c_int32),
        ("dtype", C.c_int32), ("layout", C.c_int32), ("pos_att", C.c_int32),
        ("position_buckets", C.c_int32), ("max_relative_positions", C.c_int32),
        ("padded_rows", C.c_int32), ("fp32_math", C.c_int32), ("num_threads", C.c_int32),
        ("reserved0", C.c_int32),
        ("batch", C.c_int64), ("seqlen", C.c_int64), ("heads", C.c_int64),
        ("head_dim", C.c_int64), ("total_tokens", C.c_int64),
        ("q", Tensor), ("k", Tensor), ("v", Tensor), ("pk", Tensor), ("pq", Tensor),
        ("mask", Tensor), ("cu_seqlens", C.c_void_p), ("out", Tensor), ("lse", Tensor),
        ("dropout_p", C.c_float), ("reserved1", C.c_int32),
        ("dropout_seed", C.c_uint64), ("dropout_offset", C.c_uint64),
        ("dout", Tensor), ("dq", Tensor), ("dk", Tensor), ("dv", Tensor), ("dpk", Tensor),
        ("dpq", Tensor),
        ("workspace", C.c_void_p), ("workspace_size", C.c_size_t), ("stream", C.c_void_p),
    ]


def load(path=None):
    if path is None:
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.path.join(here, "..", "build", "libdattn.so")
    lib = C.CDLL(os.path.abspath(path))
    P = C.POINTER(Params)
    lib.dattn_params_init.argtypes = [P]
    lib.dattn_params_init.restype = None
    for f in ("dattn_fwd", "dattn_bwd"):
        getattr(lib, f).argtypes = [P]
        getattr(lib, f).restype = C.c_int
    for f in ("dattn_fwd_workspace_size", "dattn_bwd_workspace_size"):
        getattr(lib, f).argtypes = [P, C.POINTER(C.c_size_t)]
        getattr(lib, f).restype = C.c_int
    lib.dattn_last_error.restype = C.c_char_p
    lib.dattn_build_info.restype = C.c_char_p
    return lib


def tensor(x):
    """Tensor view of a numpy array or torch tensor (strides in elements)."""
    t = Tensor()
    if x is None:
        return t
    if hasattr(x, "data_ptr"):  # torch
        t.data = x.data_ptr()
        st = list(x.stride())
    else:  # numpy
        t.data = x.ctypes.data
        st = [s // x.itemsize for s in x.strides]
    for i, s in enumerate(st[:4]):
        t.stride[i] = s
    return t


def check(lib, st, what):
    if st != 0:
        raise RuntimeError(f"{what}: status {st}: {lib.dattn_last_error().decode()}")
