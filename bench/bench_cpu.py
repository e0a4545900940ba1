#!/usr/bin/env python3
"""CPU benchmark: dattn vs transformers' eager DisentangledSelfAttention (DeBERTa-v3-base).

    /work/venv/bin/python bench/bench_cpu.py [--threads N] [--reps R] [--shapes 128:1,512:8,...]
                                             [--out bench/results/cpu-YYYYmmdd-HHMM.json]

Shape: H = 12, D = 64, position_buckets = 256, max_relative_positions = 512, c2p|p2c, fp32,
no padding (all-ones mask), L in {128, 512, 2048, 8192} x B in {1, 8} by default.

What is timed
  dattn: dattn_fwd on q, k, v given as [B, L, H, D] views of three [B, L, H*D] tensors (the
    projection outputs), pk, pq [H, 2S, D], a [B, L] uint8 mask; "fwd+bwd" adds dattn_bwd
    (dq, dk, dv, dpk, dpq). Workspaces are allocated once, outside the timing.
  transformers: DisentangledSelfAttention.forward itself, with its three projections
    replaced by nn.Identity (so the call starts from q, k, v — here all the same tensor x,
    which does not change the work), share_att_key=True (so pk = pq = the identity
    "projection" of rel_embeddings, likewise free), eval mode (no dropout). Everything
    else it does is timed: the [B*H, L, D] transposes, the c2p / p2c matmuls and gathers,
    the scaled scores, mask fill, softmax, P V and the output transpose. Its inputs that
    the encoder builds once per forward for all layers — relative_pos [1, L, L] and the
    [B, 1, L, L] mask — are built outside the timing, as in the model. "fwd+bwd" calls
    backward on the output (grads for x and rel_embeddings).
  Both at the same thread count: torch.set_num_threads(n) and dattn num_threads = n.
  Median (and min) over --reps calls after one warm-up call.

Peak memory (method): each (implementation, shape) runs in a fresh subprocess (another
one than the timing run), with glibc's mmap threshold fixed at 128 KiB
(MALLOC_MMAP_THRESHOLD_) so that every large block is returned to the OS when freed.
After the inputs exist and one warm-up call has run (thread pools, lazy init), the
process's peak RSS is reset (write "5" to /proc/self/clear_refs) and VmRSS noted; then
one measured call runs and VmHWM is read. extra = VmHWM - VmRSS(before), minus the bytes of O (dattn's out
is allocated before; transformers allocates its output inside, so its size is subtracted)
— i.e. memory beyond Q/K/V/O. dattn's workspace and lse are allocated inside the measured
region and therefore counted. For "fwd+bwd" the gradients dq/dk/dv (transformers: the
grad of x) are outputs too and subtracted likewise.

Shapes for which transformers' estimated peak exceeds --hf-mem-limit GiB are not run;
the result says "OOM (estimated N GiB)". The estimate extrapolates the measured extra
bytes per score element (B*H*L^2) of the largest shape that did run.

FLOP/s: effective forward GFLOP/s = 4*B*H*L^2*D / t (the count used by FlashAttention
papers; position terms not counted). The fp32 FMA peak of the same cores comes from
bench/fma_peak.c run with the same thread count.
"""
import argparse
import ctypes as C
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

H, D, S, PB, M = 12, 64, 256, 256, 512


def mem_status():
    s = open("/proc/self/status").read()
    g = lambda k: int(re.search(k + r":\s+(\d+)", s).group(1)) * 1024
    return g("VmRSS"), g("VmHWM")


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


# ------------------------------------------------------------------ workers

def worker_dattn(L, B, threads, reps, do_bwd, mode):
    import torch
    import dattn_ctypes as dc

    torch.manual_seed(0)
    lib = dc.load(os.path.join(ROOT, "build", "libdattn.so"))
    HD = H * D
    x = [torch.randn(B, L, HD) for _ in range(3)]
    q, k, v = (t.view(B, L, H, D) for t in x)
    pk = torch.randn(H, 2 * S, D)
    pq = torch.randn(H, 2 * S, D)
    mask = torch.ones(B, L, dtype=torch.uint8)
    out = torch.empty(B, L, H, D)
    dout = torch.randn(B, L, H, D) if do_bwd else None

    p = dc.Params()
    lib.dattn_params_init(C.byref(p))
    p.num_threads = threads
    p.batch, p.seqlen, p.heads, p.head_dim = B, L, H, D
    p.position_buckets, p.max_relative_positions = PB, M
    for name, t in (("q", q), ("k", k), ("v", v), ("pk", pk), ("pq", pq), ("mask", mask),
                    ("out", out)):
        setattr(p, name, dc.tensor(t))

    def aligned(nbytes):
        buf = torch.empty(nbytes + 256, dtype=torch.uint8)
        return buf, (buf.data_ptr() + 255) // 256 * 256

    def call_fwd(state):
        lse = torch.empty(B, H, L)
        p.lse = dc.tensor(lse)
        sz = C.c_size_t()
        dc.check(lib, lib.dattn_fwd_workspace_size(C.byref(p), C.byref(sz)), "fwd ws")
        if "fws" not in state:
            state["fws"] = aligned(sz.value)
        p.workspace, p.workspace_size = state["fws"][1], sz.value
        dc.check(lib, lib.dattn_fwd(C.byref(p)), "fwd")
        return lse

    def call_bwd(state, lse):
        p.lse = dc.tensor(lse)
        p.dout = dc.tensor(dout)
        if "grads" not in state:
            state["grads"] = [torch.empty(B, L, H, D) for _ in range(3)] + \
                             [torch.empty(H, 2 * S, D) for _ in range(2)]
        for name, t in zip(("dq", "dk", "dv", "dpk", "dpq"), state["grads"]):
            setattr(p, name, dc.tensor(t))
        sz = C.c_size_t()
        dc.check(lib, lib.dattn_bwd_workspace_size(C.byref(p), C.byref(sz)), "bwd ws")
        if "bws" not in state:
            state["bws"] = aligned(sz.value)
        p.workspace, p.workspace_size = state["bws"][1], sz.value
        dc.check(lib, lib.dattn_bwd(C.byref(p)), "bwd")

    res = {"impl": "dattn", "L": L, "B": B, "threads": threads,
           "build": lib.dattn_build_info().decode()}
    if mode == "time":
        st = {}
        lse = call_fwd(st)  # warm-up
        if do_bwd:
            call_bwd(st, lse)
        tf, tfb = [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            lse = call_fwd(st)
            t1 = time.perf_counter()
            tf.append(t1 - t0)
            if do_bwd:
                call_bwd(st, lse)
                tfb.append(time.perf_counter() - t0)
        res["fwd_s"] = tf
        if do_bwd:
            res["fwdbwd_s"] = tfb
        return res
    # memory: warm-up (separate state, freed), then the measured calls with fresh buffers
    w = {}
    lse = call_fwd(w)
    if do_bwd:
        call_bwd(w, lse)
    del w, lse
    rss0, _ = mem_status()
    reset_peak()
    st = {}
    lse = call_fwd(st)
    _, hwm = mem_status()
    res["fwd_extra_bytes"] = hwm - rss0
    res["fwd_workspace_bytes"] = st["fws"][0].numel()
    if do_bwd:
        rss0, _ = mem_status()
        reset_peak()
        call_bwd(st, lse)
        _, hwm = mem_status()
        gbytes = 3 * B * L * H * D * 4 + 2 * H * 2 * S * D * 4  # dq dk dv dpk dpq: outputs
        res["bwd_extra_bytes"] = hwm - rss0 - gbytes
        res["bwd_workspace_bytes"] = st["bws"][0].numel()
    return res


def hf_module():
    import torch
    from transformers import DebertaV2Config
    from transformers.models.deberta_v2.modeling_deberta_v2 import DisentangledSelfAttention

    cfg = DebertaV2Config(hidden_size=H * D, num_attention_heads=H, position_buckets=PB,
                          max_relative_positions=M, relative_attention=True,
                          pos_att_type=["p2c", "c2p"], share_att_key=True,
                          attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0)
    m = DisentangledSelfAttention(cfg).eval()
    m.query_proj = torch.nn.Identity()
    m.key_proj = torch.nn.Identity()
    m.value_proj = torch.nn.Identity()
    return m


def worker_hf(L, B, threads, reps, do_bwd, mode):
    import torch
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m = hf_module()
    x = torch.randn(B, L, H * D)
    rel = torch.randn(2 * S, H * D)
    relative_pos = build_relative_position(x, x, bucket_size=PB, max_position=M)
    m2 = torch.ones(B, L, dtype=torch.long)
    mask4 = m2.unsqueeze(1).unsqueeze(2) * m2.unsqueeze(1).unsqueeze(2).squeeze(-2).unsqueeze(-1)
    grad = torch.randn(B, L, H * D) if do_bwd else None
    obytes = B * L * H * D * 4

    def fwd():
        with torch.no_grad():
            return m(x, mask4, relative_pos=relative_pos, rel_embeddings=rel)[0]

    def fwdbwd():
        xx = x.detach().requires_grad_(True)
        rr = rel.detach().requires_grad_(True)
        o = m(xx, mask4, relative_pos=relative_pos, rel_embeddings=rr)[0]
        o.backward(grad)
        return xx.grad, rr.grad

    res = {"impl": "transformers", "L": L, "B": B, "threads": threads}
    if mode == "time":
        o = fwd()  # warm-up
        del o
        tf, tfb = [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            o = fwd()
            tf.append(time.perf_counter() - t0)
            del o
        res["fwd_s"] = tf
        if do_bwd:
            g = fwdbwd()
            del g
            for _ in range(reps):
                t0 = time.perf_counter()
                g = fwdbwd()
                tfb.append(time.perf_counter() - t0)
                del g
            res["fwdbwd_s"] = tfb
        return res
    o = fwd()
    del o
    rss0, _ = mem_status()
    reset_peak()
    o = fwd()
    _, hwm = mem_status()
    del o
    res["fwd_extra_bytes"] = hwm - rss0 - obytes
    if do_bwd:
        g = fwdbwd()
        del g
        rss0, _ = mem_status()
        reset_peak()
        g = fwdbwd()
        _, hwm = mem_status()
        del g
        res["fwdbwd_extra_bytes"] = hwm - rss0 - 2 * obytes - 2 * S * H * D * 4  # o, x.grad, rel.grad
    return res


# ------------------------------------------------------------------ driver

def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()


def loadavg():
    return [float(x) for x in open("/proc/loadavg").read().split()[:3]]


def run_worker(impl, L, B, threads, reps, do_bwd, timeout):
    """Timing run, then a separate memory run (fresh processes: the memory run fixes
    glibc's mmap threshold so that freed blocks leave the RSS, which would also change
    the timings, hence two processes)."""
    res = {}
    for mode in ("time", "mem"):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", impl, str(L), str(B),
               str(threads), str(reps), str(int(do_bwd)), mode]
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        if mode == "mem":
            env.update(MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072")
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        if r.returncode != 0:
            res.update({"impl": impl, "L": L, "B": B, "error_" + mode: (r.stderr or r.stdout)[-2000:],
                        "returncode": r.returncode})
            continue
        res.update(json.loads(r.stdout.strip().splitlines()[-1]))
        res["wall_s_" + mode] = time.time() - t0
    return res


def build():
    subprocess.run(["make", "-s", "-C", ROOT], check=True)
    exe = os.path.join(ROOT, "build", "fma_peak")
    subprocess.run(["cc", "-O2", "-fopenmp", os.path.join(HERE, "fma_peak.c"), "-o", exe],
                   check=True)
    return exe


def summarize(r):
    out = dict(r)
    for k in ("fwd_s", "fwdbwd_s"):
        if k in r:
            out[k + "_median"] = statistics.median(r[k])
            out[k + "_min"] = min(r[k])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=7, metavar=("IMPL", "L", "B", "THREADS", "REPS", "BWD", "MODE"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--shapes", default="128:1,128:8,512:1,512:8,2048:1,2048:8,8192:1,8192:8")
    ap.add_argument("--no-bwd", action="store_true")
    ap.add_argument("--no-hf", action="store_true")
    ap.add_argument("--hf-mem-limit", type=float, default=None,
                    help="GiB: skip transformers shapes estimated to need more "
                         "(default: MemAvailable at start minus 4 GiB)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.worker:
        impl, L, B, t, reps, bwd, mode = a.worker
        fn = worker_dattn if impl == "dattn" else worker_hf
        print(json.dumps(fn(int(L), int(B), int(t), int(reps), bool(int(bwd)), mode)))
        return

    if a.hf_mem_limit is None:
        avail = int(re.search(r"MemAvailable:\s+(\d+)", open("/proc/meminfo").read()).group(1)) * 1024
        a.hf_mem_limit = max(0.0, avail / 2**30 - 4.0)
    fma = build()
    import torch
    import transformers

    cpu_model = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
    fam = sh("grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2").strip()
    mod = sh("grep -m1 '^model\\s' /proc/cpuinfo | cut -d: -f2").strip()
    info = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join([os.path.relpath(sys.executable, ROOT) if False else sys.executable]
                            + sys.argv),
        "cpu_model": f"{cpu_model} (family {fam}, model {mod})",
        "cores": os.cpu_count(),
        "mem_total_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "threads": a.threads,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__,
                     "gcc": sh("cc --version | head -1"),
                     "dattn_git": sh(f"git -C {ROOT} rev-parse --short HEAD") +
                                  (" (dirty)" if sh(f"git -C {ROOT} status --porcelain -- src include") else "")},
        "shape": {"H": H, "D": D, "position_buckets": PB, "max_relative_positions": M,
                  "pos_att": "c2p|p2c", "dtype": "fp32", "mask": "all ones"},
        "method": __doc__.split("What is timed")[1].strip(),
        "loadavg_before": loadavg(),
        "hf_mem_limit_gib": a.hf_mem_limit,
    }
    fp = json.loads(sh(f"{fma} {a.threads} 0.5"))
    info["fma_peak"] = fp
    peak = fp["peak_nt_gflops"]
    print(f"# {info['cpu_model']}, {info['cores']} cores, fp32 FMA peak {peak:.1f} GFLOP/s "
          f"on {a.threads} threads; load {info['loadavg_before']}", flush=True)

    results = []
    hf_per_elem = None  # measured transformers extra bytes per B*H*L^2
    shapes = [tuple(int(v) for v in s.split(":")) for s in a.shapes.split(",")]
    for (L, B) in shapes:
        row = {"L": L, "B": B, "load_before": loadavg()}
        # the cores' FMA rate right now (the machine is shared: it varies)
        row["fma_peak_now"] = json.loads(sh(f"{fma} {a.threads} 0.2"))["peak_nt_gflops"]
        flops = 4.0 * B * H * L * L * D
        dreps = a.reps if L * L * B <= 2048 * 2048 * 8 else max(1, min(a.reps, 3))
        r = summarize(run_worker("dattn", L, B, a.threads, dreps, not a.no_bwd, 3600))
        row["dattn"] = r
        if "fwd_s_median" in r:
            r["fwd_gflops"] = flops / r["fwd_s_median"] * 1e-9
            r["fwd_frac_of_peak"] = r["fwd_gflops"] / peak
            r["fwd_frac_of_peak_now"] = r["fwd_gflops"] / row["fma_peak_now"]
        if not a.no_hf:
            est = None
            if hf_per_elem:
                est = hf_per_elem * B * H * L * L
            if est is not None and est > a.hf_mem_limit * 2**30:
                row["transformers"] = f"OOM (estimated {est / 2**30:.1f} GiB)"
                row["transformers_estimated_extra_bytes"] = est
            else:
                hreps = a.reps if L * L * B <= 2048 * 2048 else max(1, min(a.reps, 3))
                h = summarize(run_worker("hf", L, B, a.threads, hreps, not a.no_bwd, 7200))
                row["transformers"] = h
                if "fwd_extra_bytes" in h:
                    key = "fwdbwd_extra_bytes" if "fwdbwd_extra_bytes" in h else "fwd_extra_bytes"
                    pe = max(h["fwd_extra_bytes"], h.get(key, 0)) / (B * H * L * L)
                    if L >= 512:
                        hf_per_elem = max(hf_per_elem or 0, pe)
                if "fwd_s_median" in h:
                    h["fwd_gflops"] = flops / h["fwd_s_median"] * 1e-9
                    if "fwd_s_median" in r:
                        row["fwd_speedup"] = h["fwd_s_median"] / r["fwd_s_median"]
                    if "fwdbwd_s_median" in h and "fwdbwd_s_median" in r:
                        row["fwdbwd_speedup"] = h["fwdbwd_s_median"] / r["fwdbwd_s_median"]
                    row["fwd_extra_mem_ratio"] = r.get("fwd_extra_bytes", 0) / max(1, h["fwd_extra_bytes"])
        if isinstance(row.get("transformers"), str) and "fwd_extra_bytes" in r:
            row["fwd_extra_mem_ratio_vs_estimate"] = r["fwd_extra_bytes"] / row["transformers_estimated_extra_bytes"]
        row["load_after"] = loadavg()
        results.append(row)
        hf = row.get("transformers")
        hs = (f"{hf['fwd_s_median']*1e3:9.1f} ms" if isinstance(hf, dict) and "fwd_s_median" in hf
              else (hf if isinstance(hf, str) else "-"))
        print(f"L={L:5d} B={B}: dattn fwd {r.get('fwd_s_median', float('nan'))*1e3:9.1f} ms "
              f"({r.get('fwd_gflops', 0):6.1f} GFLOP/s, {100*r.get('fwd_frac_of_peak', 0):4.1f}% of peak), "
              f"fwd+bwd {r.get('fwdbwd_s_median', float('nan'))*1e3:9.1f} ms; transformers fwd {hs}; "
              f"speedup {row.get('fwd_speedup', float('nan')):.2f}x; "
              f"extra mem dattn {r.get('fwd_extra_bytes', 0)/2**20:.1f} MiB", flush=True)
    info["loadavg_after"] = loadavg()
    info["results"] = results
    out = a.out or os.path.join(HERE, "results",
                                "cpu-" + datetime.datetime.now().strftime("%Y%m%d-%H%M") + ".json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(info, f, indent=1)
    print("wrote", os.path.relpath(out, ROOT))


if __name__ == "__main__":
    main()
