"""CPU smoke tests of the training scripts the GPU runner uses (issue 5):
scripts/finetune_e2e.py (tiny model, 5 steps) and scripts/ddp_check.py (2 processes,
gloo, tiny model), so that CI covers their logic."""

import json
import os
import subprocess
import sys
from pathlib import Path

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
