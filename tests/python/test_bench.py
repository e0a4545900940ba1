"""python -m dattn bench / mnli on the CPU (tiny sizes), the MNLI length model, the
agreement rule and the BENCHMARKS.md generator."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dattn import bench, mnli
from dattn.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def test_bench_cpu_smoke(tmp_path, capsys):
    rc = main(["bench", "--device", "cpu", "--lengths", "16,24", "--batches", "1,3",
               "--layers", "1", "--reps", "1", "--out", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0, out
    data = json.loads((tmp_path / "bench.json").read_text())
    meta = data["meta"]
    assert meta["env"]["torch"] == torch.__version__ and meta["command"].startswith("python -m dattn bench")
    ran = {(r["impl"], r["B"], r["L"], r["layout"]) for r in data["runs"]}
    impls = [i for i in bench.IMPLS if i not in meta["skipped_impls"]]
    assert {"transformers", "sdpa", "dattn"} <= set(impls)
    # B=1 has no packed case; B=3 has both layouts
    want = {(i, B, L, lay) for i in impls for L in (16, 24)
            for (B, lay) in ((1, "padded"), (3, "padded"), (3, "packed"))}
    assert ran == want
    for r in data["runs"]:
        assert r["status"] == "ok", r
        assert r["ms"] > 0 and r["reps"] == 1 and len(r["times_ms"]) == 1
        if r["impl"] == "dattn":
            assert r["path"] == r["layout"]
        if r["layout"] == "packed":
            assert r["tokens"] == sum(bench.packed_lengths(3, r["L"]))
    # peers that cannot run here are named with a reason
    for name, why in meta["skipped_impls"].items():
        assert name in bench.PEERS and why and f"skipping {name}" in out
    assert "Geometric mean" in out and "transformers/dattn" in out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "bench_latency.png").stat().st_size > 1000


def test_bench_rejects_unknown_names(capsys):
    assert main(["bench", "--device", "cpu", "--impls", "dattn,nope"]) == 2
    assert "unknown impls" in capsys.readouterr().err


def test_packed_lengths():
    assert bench.packed_lengths(1, 512) == [512]
    n = bench.packed_lengths(16, 512)
    assert n[0] == 512 and n[-1] == 128 and n == sorted(n, reverse=True)
    assert abs(1 - sum(n) / (16 * 512) - 0.375) < 1e-3


def test_mnli_length_model():
    n = mnli.mnli_lengths()
    st = mnli.length_stats(n)
    assert st["n"] == 9815
    assert 0.925 < st["padding_at_pad_to"] < 0.927  # ~92.6% padding at L = 512
    assert 37 < st["mean"] < 39 and 30 <= st["median"] <= 38
    assert 80 <= st["p99"] <= 130 and st["max"] <= 512 and st["min"] >= mnli.MIN_TOKENS
    assert mnli.mnli_lengths() == n  # deterministic
    other = mnli.mnli_lengths(seed=1)
    assert other != n and sorted(other) == sorted(n)  # the seed only shuffles


def test_agreement_rule():
    ref = torch.tensor([[2.0, 0.0, -1.0], [0.50, 0.49, 0.0], [1.0, -1.0, 0.0]])
    near = ref.clone()
    near[1] = torch.tensor([0.48, 0.495, 0.0])  # flips a near-tie (gap 0.01 < max delta 0.02)
    a = mnli.agreement(ref, near)
    assert a["disagreements"] == 1 and a["near_ties_only"]
    assert abs(a["max_abs_dlogit"] - 0.02) < 1e-6 and abs(a["disagreement_max_gap"] - 0.01) < 1e-6
    far = ref.clone()
    far[0] = torch.tensor([1.0, 1.5, -1.0])  # flips a clear decision (gap 2 > max delta 1.5)
    b = mnli.agreement(ref, far)
    assert b["disagreements"] == 1 and not b["near_ties_only"]
    assert mnli.agreement(ref, ref)["agreement"] == 1.0


def test_mnli_cpu_smoke(tmp_path, capsys):
    rc = main(["mnli", "--device", "cpu", "--layers", "1", "--hidden", "64", "--vocab", "100",
               "--examples", "20", "--batch", "8", "--pad-to", "96", "--dtype", "fp32",
               "--impls", "dattn-padded,dattn-packed", "--out", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0, out
    data = json.loads((tmp_path / "mnli.json").read_text())
    assert set(data["runs"]) == {"transformers", "dattn-padded", "dattn-packed"}
    assert data["meta"]["config"]["conv_kernel_size"] == 3
    for name in ("dattn-padded", "dattn-packed"):
        r = data["runs"][name]
        assert r["status"] == "ok" and r["path"] == name.split("-")[1]
        assert r["agreement"] == 1.0 and r["max_abs_dlogit"] < 1e-4
        assert sum(r["prediction_counts"]) == 20


def test_benchmarks_md_generator(tmp_path):
    gen = ROOT / "bench" / "make_benchmarks_md.py"
    out = tmp_path / "B.md"
    empty = tmp_path / "none"
    empty.mkdir()
    r = subprocess.run([sys.executable, str(gen), "--results", str(empty), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.read_text().count("No results committed yet") == 2
    assert main(["bench", "--device", "cpu", "--lengths", "16", "--batches", "2",
                 "--layers", "1", "--reps", "1", "--impls", "transformers,dattn",
                 "--out", str(empty), "--quiet"]) == 0
    r = subprocess.run([sys.executable, str(gen), "--results", str(empty), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "## Encoder benchmark" in text and "| 16 |" in text and "transformers ms" in text
    assert "No results committed yet" in text  # mnli.json still missing


def test_benchmarks_md_merges_parts():
    """bench-*.json parts fill the cases the main run skipped (and only those)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mkmd", ROOT / "bench" / "make_benchmarks_md.py")
    mkmd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mkmd)
    row = lambda dt, L, st, ms: dict(impl="dattn", dtype=dt, B=1, L=L, layout="padded",
                                     status=st, ms=ms)
    main_run = dict(meta=dict(impls=["dattn"], dtypes=["fp16", "fp32"], command="a", date="d1",
                              env=dict(git="g1")),
                    runs=[row("fp16", 64, "ok", 1.0), row("fp32", 64, "skipped", None)])
    part = dict(meta=dict(impls=["dattn"], dtypes=["fp32"], command="b", date="d2",
                          env=dict(git="g2"), seconds=3),
                runs=[row("fp32", 64, "ok", 2.0), row("fp16", 64, "skipped", None)])

    class P:
        name = "bench-fp32.json"

        def read_text(self):
            import json
            return json.dumps(part)

    merged = mkmd.merge_parts(main_run, [P()])
    got = {(r["dtype"], r["L"]): (r["status"], r["ms"]) for r in merged["runs"]}
    assert got == {("fp16", 64): ("ok", 1.0), ("fp32", 64): ("ok", 2.0)}
    assert merged["meta"]["parts"][0]["git"] == "g2"
    assert any("bench-fp32.json" in line for line in mkmd.env_lines(merged["meta"]))
