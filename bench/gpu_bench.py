#!/usr/bin/env python3
"""GPU benchmarks of the dattn CUDA forward (issue 4 targets), through ctypes on
build/libdattn.so so that they need nothing but torch.

Op level (fp16, H=12, D=64, S=256, v3 log buckets, c2p|p2c): dattn forward against torch
SDPA's flash and cuDNN backends on the same Q/K/V shapes, medians of triton's do_bench
(which clears L2 before each run), inputs rotated over sets larger than L2, random data.
Effective TFLOP/s = 4*B*H*L^2*D / t; the roofline floor is
max(FLOPs / 790 TFLOP/s, exps / 4e12 /s, bytes / 4.3 TB/s).
Memory: extra device memory of one forward call (output, lse, workspace) at B=16, L=8192
against the output size.
Encoder level needs the Python layer (python/dattn with dattn.patch); it runs when that
package imports, else it is reported as skipped.

usage: python3 bench/gpu_bench.py [--json out.json] [--quick]
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import platform
import subprocess
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("stride", ctypes.c_int64 * 4)]


class Params(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int32) for n in (
        "abi_version", "device", "device_index", "dtype", "layout", "pos_att",
        "position_buckets", "max_relative_positions", "padded_rows", "fp32_math",
        "num_threads", "reserved0")] + [(n, ctypes.c_int64) for n in (
            "batch", "seqlen", "heads", "head_dim", "total_tokens")] + [
        ("q", Tensor), ("k", Tensor), ("v", Tensor), ("pk", Tensor), ("pq", Tensor),
        ("mask", Tensor), ("cu_seqlens", ctypes.c_void_p), ("out", Tensor), ("lse", Tensor),
        ("dropout_p", ctypes.c_float), ("reserved1", ctypes.c_int32),
        ("dropout_seed", ctypes.c_uint64), ("dropout_offset", ctypes.c_uint64),
        ("dout", Tensor), ("dq", Tensor), ("dk", Tensor), ("dv", Tensor), ("dpk", Tensor),
        ("dpq", Tensor), ("workspace", ctypes.c_void_p), ("workspace_size", ctypes.c_size_t),
        ("stream", ctypes.c_void_p)]


def load_lib():
    path = os.environ.get("DATTN_LIB", os.path.join(ROOT, "build", "libdattn.so"))
    lib = ctypes.CDLL(path)
    lib.dattn_params_init.argtypes = [ctypes.POINTER(Params)]
    lib.dattn_params_sizeof.restype = ctypes.c_size_t
    lib.dattn_fwd.argtypes = [ctypes.POINTER(Params)]
    lib.dattn_fwd_workspace_size.argtypes = [ctypes.POINTER(Params), ctypes.POINTER(ctypes.c_size_t)]
    lib.dattn_last_error.restype = ctypes.c_char_p
    lib.dattn_build_info.restype = ctypes.c_char_p
    assert lib.dattn_params_sizeof() == ctypes.sizeof(Params), "Params mirror out of date"
    return lib


def tens(t, dims):
    x = Tensor()
    x.data = t.data_ptr() if t is not None else None
    if t is not None:
        for i in range(dims):
            x.stride[i] = t.stride(i)
    return x


class DattnFwd:
    """One configured forward call; __call__ runs it on the current stream."""

    def __init__(self, lib, q, k, v, pk, pq, mask=None, pos_att=3, pb=256, M=512, lse=True):
        B, L, H, D = q.shape
        self.lib = lib
        self.p = Params()
        lib.dattn_params_init(ctypes.byref(self.p))
        p = self.p
        p.device = 1
        p.dtype = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}[q.dtype]
        p.pos_att, p.position_buckets, p.max_relative_positions = pos_att, pb, M
        p.batch, p.seqlen, p.heads, p.head_dim = B, L, H, D
        self.out = torch.empty_like(q)
        self.lse = torch.empty(B, H, L, device=q.device, dtype=torch.float32) if lse else None
        self.keep = [q, k, v, pk, pq, mask]
        p.q, p.k, p.v, p.out = tens(q, 4), tens(k, 4), tens(v, 4), tens(self.out, 4)
        p.pk, p.pq = tens(pk, 3), tens(pq, 3)
        if mask is not None:
            p.mask = tens(mask, 2)
        if lse:
            p.lse = tens(self.lse, 3)
        n = ctypes.c_size_t(0)
        st = lib.dattn_fwd_workspace_size(ctypes.byref(p), ctypes.byref(n))
        if st != 0:
            raise RuntimeError(lib.dattn_last_error().decode())
        self.ws = torch.empty(max(n.value, 1), dtype=torch.uint8, device=q.device)
        p.workspace, p.workspace_size = self.ws.data_ptr(), n.value

    def __call__(self):
        self.p.stream = torch.cuda.current_stream().cuda_stream
        st = self.lib.dattn_fwd(ctypes.byref(self.p))
        if st != 0:
            raise RuntimeError("dattn_fwd: %d %s" % (st, self.lib.dattn_last_error().decode()))
        return self.out


def bench(fn, rep=200):
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=rep, return_mode="median")


def rotating(make, set_bytes, min_total=256 << 20):
    n = max(2, math.ceil(min_total / max(set_bytes, 1)))
    sets = [make() for _ in range(n)]
    idx = [0]

    def nxt():
        idx[0] = (idx[0] + 1) % n
        return sets[idx[0]]
    return nxt


def op_level(lib, shapes, results, quick):
    H, D, S = 12, 64, 256
    dev = "cuda"
    for (B, L, target) in shapes:
        flops = 4.0 * B * H * L * L * D
        exps = float(B * H * L * L)
        nbytes = 4.0 * B * L * H * D * 2 + B * H * L * 4
        floor_ms = max(flops / 790e12, exps / 4e12, nbytes / 4.3e12) * 1e3
        set_bytes = 3 * B * L * H * D * 2

        def make():
            q = torch.randn(B, L, H, D, device=dev, dtype=torch.float16)
            k = torch.randn(B, L, H, D, device=dev, dtype=torch.float16)
            v = torch.randn(B, L, H, D, device=dev, dtype=torch.float16)
            pk = torch.randn(H, 2 * S, D, device=dev, dtype=torch.float16)
            pq = torch.randn(H, 2 * S, D, device=dev, dtype=torch.float16)
            return dict(q=q, k=k, v=v, pk=pk, pq=pq,
                        f3=DattnFwd(lib, q, k, v, pk, pq, pos_att=3),
                        f0=DattnFwd(lib, q, k, v, pk, pq, pos_att=0),
                        qt=q.transpose(1, 2), kt=k.transpose(1, 2), vt=v.transpose(1, 2))
        nxt = rotating(make, set_bytes)
        row = dict(B=B, L=L, H=H, D=D, S=S, dtype="fp16", flops=flops, floor_ms=floor_ms,
                   target_ratio_vs_flash=target)
        from torch.nn.attention import sdpa_kernel, SDPBackend

        def sdpa(backend):
            def run():
                s = nxt()
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(s["qt"], s["kt"], s["vt"])
            return run
        for name, fn in (("dattn_ms", lambda: nxt()["f3"]()),
                         ("dattn_nopos_ms", lambda: nxt()["f0"]()),
                         ("sdpa_flash_ms", sdpa(SDPBackend.FLASH_ATTENTION)),
                         ("sdpa_cudnn_ms", sdpa(SDPBackend.CUDNN_ATTENTION))):
            try:
                row[name] = bench(fn, rep=100 if quick else 300)
            except Exception as e:  # a backend may be missing
                row[name] = None
                row[name + "_error"] = str(e)[:200]
        for name in ("dattn_ms", "dattn_nopos_ms", "sdpa_flash_ms", "sdpa_cudnn_ms"):
            t = row.get(name)
            row[name.replace("_ms", "_tflops")] = flops / (t * 1e-3) / 1e12 if t else None
        if row.get("dattn_ms") and row.get("sdpa_flash_ms"):
            row["ratio_vs_flash"] = row["dattn_ms"] / row["sdpa_flash_ms"]
            row["met"] = row["ratio_vs_flash"] <= target
        if row.get("dattn_ms") and row.get("sdpa_cudnn_ms"):
            row["ratio_vs_cudnn"] = row["dattn_ms"] / row["sdpa_cudnn_ms"]
        # a padded variant: half the rows padding (right), HF rows
        s = nxt()
        m = torch.ones(B, L, dtype=torch.uint8, device=dev)
        m[:, L // 2:] = 0
        fm = DattnFwd(lib, s["q"], s["k"], s["v"], s["pk"], s["pq"], mask=m)
        row["dattn_masked_half_ms"] = bench(fm, rep=100)
        results["op"].append(row)
        del nxt
        torch.cuda.empty_cache()


def memory(lib, results):
    B, L, H, D, S = 16, 8192, 12, 64, 256
    dev = "cuda"
    q = torch.randn(B, L, H, D, device=dev, dtype=torch.float16)
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    pk = torch.randn(H, 2 * S, D, device=dev, dtype=torch.float16)
    pq = torch.randn_like(pk)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    f = DattnFwd(lib, q, k, v, pk, pq)
    f()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    out_bytes = q.numel() * 2
    results["memory"] = dict(B=B, L=L, H=H, D=D, extra_bytes=peak, out_bytes=out_bytes,
                             workspace_bytes=f.p.workspace_size,
                             ratio=peak / out_bytes, target_ratio=1.25, met=peak / out_bytes <= 1.25)
    t = bench(f, rep=50)
    results["memory"]["time_ms"] = t
    del f, q, k, v
    torch.cuda.empty_cache()


def encoder_level(results):
    try:
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import dattn  # noqa: F401
        if not hasattr(dattn, "patch"):
            raise ImportError("dattn.patch missing")
    except Exception as e:
        results["encoder"] = dict(skipped="python layer not available: %s" % str(e)[:200])
        return
    results["encoder"] = dict(skipped="python layer present but the encoder benchmark is not "
                                      "wired in this script yet")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    lib = load_lib()
    res = dict(
        date=datetime.datetime.utcnow().isoformat() + "Z",
        command=" ".join([os.path.basename(sys.executable)] + sys.argv),
        card=torch.cuda.get_device_name(0),
        capability=".".join(map(str, torch.cuda.get_device_capability(0))),
        torch=torch.__version__, cuda=torch.version.cuda, python=platform.python_version(),
        dattn=lib.dattn_build_info().decode(), op=[])
    try:
        res["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        res["driver"] = None
    try:
        import triton
        res["triton"] = triton.__version__
    except Exception:
        pass
    shapes = [(32, 512, 2.0), (8, 2048, 1.5), (2, 8192, 1.3)]
    op_level(lib, shapes, res, args.quick)
    memory(lib, res)
    encoder_level(res)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    print("\n%-14s %9s %9s %9s %9s %8s %7s %8s %8s %7s" % (
        "shape", "dattn", "nopos", "flash", "cudnn", "ratio", "target", "TFLOP/s", "floor", "masked"))
    for r in res["op"]:
        f2 = lambda x: "%9.3f" % x if x else "%9s" % "-"
        print("%-14s %s %s %s %s %8.2f %7.2f %8.1f %8.3f %7.3f" % (
            "B%d L%d" % (r["B"], r["L"]), f2(r.get("dattn_ms")), f2(r.get("dattn_nopos_ms")),
            f2(r.get("sdpa_flash_ms")), f2(r.get("sdpa_cudnn_ms")), r.get("ratio_vs_flash", float("nan")),
            r["target_ratio_vs_flash"], r.get("dattn_tflops") or 0, r["floor_ms"],
            r.get("dattn_masked_half_ms") or 0))
    m = res["memory"]
    print("memory B16 L8192: extra %.1f MB / output %.1f MB = %.3fx (target <= 1.25), %.3f ms" % (
        m["extra_bytes"] / 1e6, m["out_bytes"] / 1e6, m["ratio"], m["time_ms"]))
    print("encoder:", res["encoder"])


if __name__ == "__main__":
    main()
