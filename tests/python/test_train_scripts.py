"""CPU smoke tests of the training scripts the GPU runner uses (issue 5):
scripts/finetune_e2e.py (tiny model, 5 steps) and scripts/ddp_check.py (2 processes,
gloo, tiny model), so that CI covers their logic; on a CUDA machine also ddp_check.py's
--shared-gpu mode (two gloo ranks on one GPU: the CUDA kernels under DDP)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))


def test_finetune_e2e_tiny_matches_without_dropout(tmp_path):
    """fp32, dropout off: dattn's and transformers' loss curves agree step by step (the
    patched encoder trains like the original one), and the JSON has what the GPU run
    reports."""
    import finetune_e2e as fe

    out = tmp_path / "fe.json"
    rc = fe.main(["--tiny", "--steps", "5", "--device", "cpu", "--dtype", "fp32",
                  "--dropout", "0", "--no-gates", "--json", str(out)])
    assert rc == 0
    r = json.loads(out.read_text())
    assert len(r["losses_transformers"]) == len(r["losses_dattn"]) == 5
    for a, b in zip(r["losses_transformers"], r["losses_dattn"]):
        assert abs(a - b) <= 1e-4 * abs(a), (r["losses_transformers"], r["losses_dattn"])
    assert r["gates"]["finite"] and r["gates"]["dattn_ran"] and r["gates"]["final_within_tol"]
    for key in ("final_transformers", "final_dattn", "final_rel_diff", "wall_s_dattn", "device"):
        assert key in r


def test_finetune_e2e_tiny_with_dropout_bf16(tmp_path):
    """The GPU run's settings (bf16 autocast, dropout on) run on the CPU."""
    import finetune_e2e as fe

    out = tmp_path / "fe.json"
    rc = fe.main(["--tiny", "--steps", "5", "--device", "cpu", "--dtype", "bf16",
                  "--no-gates", "--json", str(out)])
    assert rc == 0
    r = json.loads(out.read_text())
    assert r["gates"]["finite"] and r["gates"]["dattn_ran"], r["dattn_paths"]
    assert r["dtype"] == "bf16" and r["dropout"] == 0.1


def test_ddp_check_gloo_two_processes(tmp_path):
    out = tmp_path / "ddp.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "ddp_check.py"), "--backend", "gloo",
                        "--tiny", "--json", str(out)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["ok"] and r["world_size"] == 2
    assert r["grad_check"]["max_rel"] <= 1e-5 and r["grad_check"]["n_params"] > 10
    assert r["env"]["NCCL_NVLS_ENABLE"] == "0"
    assert r["autocast"] == "none" and r["gates"]["dattn_dtype"]
    assert r["dattn_dtypes_seen"]["train"] == {"fwd": ["float32"], "bwd": ["float32"]}


def test_ddp_check_gloo_bf16_autocast(tmp_path):
    """--autocast bf16 on the CPU: every dattn forward and backward (grad check, both
    sides, and training) sees bf16 q, the gradients agree within the bf16 tolerance but
    not to fp32 precision (so autocast really changed the arithmetic), and the fast-path
    gate is only applied on CUDA."""
    out = tmp_path / "ddp_bf16.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "ddp_check.py"), "--backend", "gloo",
                        "--tiny", "--autocast", "bf16", "--json", str(out)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["ok"] and r["autocast"] == "bf16" and r["tol"] == 5e-2
    for phase in ("grad_ddp", "grad_single", "train"):
        assert r["dattn_dtypes_seen"][phase] == {"fwd": ["bfloat16"], "bwd": ["bfloat16"]}, phase
    assert 1e-5 < r["grad_check"]["max_rel"] <= 5e-2
    assert not r["grad_check"]["nonfinite"]
    assert "fast_bwd" not in r["gates"] and r["fast_bwd"]["why_not"] == "not on CUDA"
    assert set(r["gates"]) == {"grads_match", "loss_decreased", "ranks_in_sync", "dattn_ran",
                               "dattn_dtype"}


def test_ddp_check_shared_gpu_refusals(tmp_path):
    """--shared-gpu is gloo on cuda:0: it refuses NCCL (which will not put two ranks on one
    GPU) and, without a CUDA device, says so instead of spawning workers."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, str(ROOT / "scripts" / "ddp_check.py"), "--shared-gpu", "--tiny",
           "--json", str(tmp_path / "x.json")]
    p = subprocess.run(cmd + ["--backend", "nccl"], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "NCCL refuses two ranks on one GPU" in p.stdout, p.stdout + p.stderr
    if not torch.cuda.is_available():
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and "--shared-gpu needs a CUDA device" in p.stdout, p.stdout + p.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible to torch")
@pytest.mark.parametrize("autocast", ["none", "bf16"])
def test_ddp_check_shared_gpu_cuda(tmp_path, autocast):
    """Two gloo ranks on one GPU: dattn's CUDA kernels under DDP give the single-device
    gradients of the global batch (fp32: 1e-5 relative; bf16 autocast: its tolerance, with the
    tensor-core backward checked by the fast_bwd gate), and the ranks stay in sync."""
    out = tmp_path / "ddp.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "ddp_check.py"), "--shared-gpu",
                        "--tiny", "--autocast", autocast, "--json", str(out)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["ok"] and r["shared_gpu"] and r["backend"] == "gloo" and r["world_size"] == 2
    assert r["gates"]["ranks_in_sync"] and r["gates"]["dattn_ran"]
    assert r["grad_check"]["max_rel"] <= (1e-5 if autocast == "none" else 5e-2)


def test_op_trace_helpers():
    """bench/gpu_op_trace.py's interval union (gpu_train_bench's, imported: overlaps once,
    touching intervals join, order free) and its split of device activities into kernels and
    memory operations."""
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_op_trace as ot

    assert ot.union_us([]) == 0
    assert ot.union_us([(0, 10), (5, 12), (20, 25), (21, 22), (12, 13)]) == 18
    assert ot.union_us([(30, 31), (0, 2)]) == 3
    assert ot.device_kind("Memset (Device)") == "memset"
    assert ot.device_kind("Memcpy DtoD (Device -> Device)") == "memcpy"
    assert ot.device_kind("dattn_bwd_ws_f16_d64_kv0") == "kernel"


def test_op_trace_gaps():
    """The op trace's per-launch waits: in start order, each activity's idle time after every
    earlier one ended (overlaps wait 0, the first is the lead's: 0); per position the median
    over the calls with the most common launch sequence."""
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_op_trace as ot

    assert ot.gaps_us([]) == []
    acts = [("kv0", 100, 400), ("fwd", 0, 50), ("pre", 60, 90), ("exp", 85, 95), ("kv1", 400, 500)]
    assert ot.gaps_us(acts) == [("fwd", 0), ("pre", 10), ("exp", 0), ("kv0", 5), ("kv1", 0)]
    # an activity inside a longer earlier one waits 0, and the later wait counts from the longer end
    assert ot.gaps_us([("a", 0, 100), ("b", 10, 20), ("c", 130, 140)]) == [("a", 0), ("b", 0), ("c", 30)]
    g1 = [("a", 0), ("b", 4), ("c", 10)]
    g2 = [("a", 0), ("b", 6), ("c", 30)]
    g3 = [("a", 0), ("b", 5), ("c", 20)]
    odd = [("a", 0), ("x", 999)]
    assert ot.median_gaps([g1, odd, g2, g3]) == [("a", 0), ("b", 5), ("c", 20)]
    assert ot.median_gaps([]) == []


def _train_bench():
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_train_bench

    return gpu_train_bench


def test_train_bench_busy_summary():
    """The GPU-busy summary: union of device intervals (overlaps once), kernel vs memop
    split, launch and dattn-op counts from host events, top kernels by total time."""
    tb = _train_bench()
    assert tb.interval_union_ns([]) == 0
    assert tb.interval_union_ns([(0, 10), (5, 12), (20, 25), (21, 22), (12, 13)]) == 18
    ev = [("k1", True, 0, 4000), ("k2", True, 2000, 4000), ("k1", True, 10000, 1000),
          ("Memset (Device)", True, 20000, 1000), ("cudaLaunchKernel", False, 0, 100),
          ("cuLaunchKernelEx", False, 200, 100), ("dattn::fwd", False, 0, 50),
          ("dattn::bwd", False, 0, 50), ("dattn::fwd", False, 0, 50),
          ("_EagerAttentionBackward", False, 0, 50), ("_EagerAttention", False, 0, 50)]
    r = tb.summarize_events(ev, "cuda", wall_ms=0.05, host_ms=0.01, median_ms=0.02)
    assert r["busy_ms"] == 0.008 and r["span_ms"] == 0.021
    assert r["kernel_sum_ms"] == 0.009 and r["device_sum_ms"] == 0.010
    assert r["n_kernels"] == 3 and r["n_memops"] == 1 and r["n_launch_calls"] == 2
    assert r["dattn_ops"] == {"fwd": 2, "bwd": 1}
    assert abs(r["busy_fraction"] - 0.16) < 1e-12 and abs(r["busy_fraction_of_median"] - 0.4) < 1e-12
    assert [(t["name"], t["count"], t["total_us"]) for t in r["top"]] == [("k1", 2, 5.0), ("k2", 1, 4.0)]


def test_train_bench_cpu_smoke(tmp_path):
    """Every side of bench/gpu_train_bench.py on the CPU (2 tiny layers, tiny batch; the compile
    sides through aot_eager, not inductor's C++ compile): timings, profiles, ratios and the
    dattn ops seen inside the compiled step are in the JSON."""
    tb = _train_bench()
    out = tmp_path / "tb.json"
    rc = tb.main(["--device", "cpu", "--tiny", "--cases", "2x32", "--layers", "2", "--case-budget", "0",
                  "--reps", "1", "--compile-backend", "aot_eager", "--json", str(out)])
    assert rc == 0
    r = json.loads(out.read_text())
    assert r["sides"] == ["transformers", "dattn", "sdpa-floor", "dattn+compile", "transformers+compile"]
    assert r["compile"]["cases"] == ["2x32"] and r["compile"]["backend"] == "aot_eager"
    (row,) = r["cases"]
    for side in r["sides"]:
        assert row[side]["median_ms"] > 0, (side, row[side])
        p = row[side]["profile"]
        assert "error" not in p, p
        assert p["n_kernels"] > 0 and 0 < p["busy_ms"] <= p["wall_ms"] * 1.01 and p["top"]
        want = 2 if side.startswith("dattn") else 0
        assert p["dattn_ops"] == {"fwd": want, "bwd": want}, (side, p["dattn_ops"])
    assert row["dattn"]["path"] == "padded"
    assert row["dattn"]["dattn_ran"] is True and row["dattn+compile"]["dattn_ran"] is True
    assert row["dattn+compile"]["dynamo"]["graph_breaks"] == 0
    for k in ("time_ratio", "block_time_ratio", "dattn_over_floor", "compile_ratio",
              "dattn_compile_vs_transformers_eager"):
        assert row[k] > 0, k
    il = row["interleaved"]  # the ratios come from the round-robin medians
    assert set(il) == {"transformers", "dattn", "sdpa-floor"} and all(r["n"] >= 3 for r in il.values())
    assert row["time_ratio"] == il["dattn"]["median_ms"] / il["transformers"]["median_ms"]
    assert row["dattn_over_floor"] == il["dattn"]["median_ms"] / il["sdpa-floor"]["median_ms"]
    assert r["all_ran"] and row["target_time_ratio"] is None


def test_ddp_check_fast_bwd_gate_knows_every_tensor_core_kernel():
    """The fast_bwd gate names the tensor-core backward's kernels by a pattern; every kernel
    prefix the CUDA sources can instantiate (DATTN_BWD_PFX in src/cuda/bwd_sm80_inst.cuh) must
    match it, and the simple backward's kernels must not (the gate failed on the GPU once when
    a new default, tc3c, was missing from the pattern)."""
    import re

    import ddp_check as dc

    inst = (ROOT / "src" / "cuda" / "bwd_sm80_inst.cuh").read_text()
    prefixes = re.findall(r"#define DATTN_BWD_PFX (\w+)", inst)
    assert {"sm80", "tc3", "tc3b", "tc3c", "tc3d"} <= set(prefixes), prefixes
    for pfx in prefixes:
        for dt in ("f16", "bf16"):
            for kv in (0, 1):
                m = dc.TC_BWD.match(f"dattn_bwd_{pfx}_{dt}_d64_kv{kv}")
                assert m and m.group(2) == dt, (pfx, dt, kv)
    for name in ("dattn_bwd_dq_f16", "dattn_bwd_dkdv_bf16", "dattn_bwd_di_f16",
                 "dattn_bwd_tc_reduce_f16"):
        assert not dc.TC_BWD.match(name), name
    assert dc.SIMPLE_BWD.match("dattn_bwd_dq_bf16") and dc.SIMPLE_BWD.match("dattn_bwd_dkdv_f16")


def test_host_step_ab_cpu_smoke(tmp_path):
    """bench/host_step_ab.py on the CPU (2 tiny layers, 2 rounds): both sides timed, the
    switch restored afterwards."""
    sys.path.insert(0, str(ROOT / "bench"))
    import host_step_ab

    from dattn import hf

    before = hf.FUSED_LAYER
    out = tmp_path / "ab.json"
    assert host_step_ab.main(["--layers", "2", "--rounds", "2", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["fused_median_ms"] > 0 and r["two_nodes_median_ms"] > 0 and r["layers"] == 2
    assert hf.FUSED_LAYER == before


# Runs a script as on the GPU machine, where dattn is not installed: an installed copy (CI's
# venv has one) is hidden, so `import dattn` finds only what the script puts on sys.path itself.
_NO_INSTALLED_DATTN = """
import importlib.machinery, os, runpy, sys
root_py = os.path.join(sys.argv[1], "python")
class HideInstalled:
    def find_spec(self, name, path=None, target=None):
        if name != "dattn":
            return None
        here = [p for p in sys.path if p and os.path.abspath(p) == root_py]
        spec = importlib.machinery.PathFinder.find_spec(name, here)
        if spec is None:
            raise ModuleNotFoundError("No module named 'dattn' (the installed copy is hidden)")
        return spec
sys.meta_path.insert(0, HideInstalled())
sys.argv = sys.argv[2:]
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))  # as `python3 SCRIPT` sets it
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("script", ["gpu_op_trace.py", "gpu_bwd_bench.py"])
def test_bench_scripts_run_without_pythonpath(script):
    """The op trace and bwd-bench run as their docstrings say, from the repository root with no
    PYTHONPATH and no installed dattn (the op trace's first run this way failed on
    `from dattn import ops`): --help imports the whole module chain."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, "-c", _NO_INSTALLED_DATTN, str(ROOT),
                        str(ROOT / "bench" / script), "--help"], cwd=str(ROOT),
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "usage" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]
