"""CPU tests of the shell helpers the device calls use: scripts/pack_out.sh (a results folder
into one archive plus a few named files, since the device tool brings back at most 8 files a
call), scripts/gpu_kernel_ab.sh's --pack step (its dry run) and scripts/gpu_cells.sh's card filter
and steps (a stub nvidia-smi)."""

import os
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "scripts" / "pack_out.sh"


def _tree(d: Path, n=12):
    (d / "grads").mkdir(parents=True)
    for i in range(n):
        (d / f"f{i}.txt").write_text(f"file {i}\n")
    (d / "grads" / "g.txt").write_text("deep\n")
    (d / "ratios.txt").write_text("ratios\n")
    (d / "summary.txt").write_text("summary\n")


def test_pack_out_archives_everything_and_keeps_the_named_files(tmp_path):
    d = tmp_path / "ab"
    _tree(d)
    before = sorted(str(p.relative_to(tmp_path)) for p in d.rglob("*") if p.is_file())
    r = subprocess.run(["sh", str(PACK), str(d), "ratios.txt", "summary.txt", "absent.txt"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with tarfile.open(tmp_path / "ab.tgz") as t:
        names = sorted(m.name for m in t.getmembers() if m.isfile())
        assert t.extractfile("ab/f3.txt").read() == b"file 3\n"
        assert t.extractfile("ab/grads/g.txt").read() == b"deep\n"
    assert names == before
    assert sorted(os.listdir(d)) == ["ratios.txt", "summary.txt"]
    assert (d / "ratios.txt").read_text() == "ratios\n"
    assert "ab.tgz (15 files)" in r.stdout


def test_pack_out_refuses_bad_arguments_and_leaves_the_folder(tmp_path):
    d = tmp_path / "gc"
    _tree(d, 2)
    before = sorted(p.name for p in d.rglob("*"))
    for args, what in (([str(tmp_path / "nope")], "give a folder"),
                       ([str(d), "grads/g.txt"], "a file name directly in"),
                       ([], "give a folder")):
        r = subprocess.run(["sh", str(PACK), *args], capture_output=True, text=True)
        assert r.returncode == 2 and what in r.stderr, (args, r.stderr)
    assert sorted(p.name for p in d.rglob("*")) == before
    assert not (tmp_path / "gc.tgz").exists()


def test_gpu_kernel_ab_dry_run_ends_with_the_pack_step(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "Makefile").write_text("")
    env = dict(os.environ, OUT=str(tmp_path / "out"))
    r = subprocess.run(["sh", "scripts/gpu_kernel_ab.sh", "--base", str(base), "--pack", "--dry-run"],
                       cwd=ROOT, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == f"+ sh scripts/pack_out.sh {tmp_path / 'out' / 'ab'} ratios.txt ab.txt summary.txt"
    r = subprocess.run(["sh", "scripts/gpu_kernel_ab.sh", "--base", str(base), "--dry-run"],
                       cwd=ROOT, capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "pack_out" not in r.stdout


def _fake_smi(tmp_path: Path, name: str) -> dict:
    """An environment whose nvidia-smi prints one card's query line."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    smi = bin_ / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho 'name, memory.total [MiB], clocks.max.sm [MHz]'\necho '{name}, 1 MiB, 1 MHz'\n")
    smi.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}", OUT=str(tmp_path / "out"))


def test_gpu_cells_h200_only_stops_on_another_card(tmp_path):
    """--h200-only on an H100: card.txt says so, nothing else runs or is written."""
    env = _fake_smi(tmp_path, "NVIDIA H100 80GB HBM3")
    r = subprocess.run(["sh", "scripts/gpu_cells.sh", "--h200-only"], cwd=ROOT, capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    cells = tmp_path / "out" / "cells"
    assert sorted(p.name for p in cells.iterdir()) == ["card.txt"]
    assert "H100" in (cells / "card.txt").read_text() and "not an H200" in (cells / "card.txt").read_text()


def test_gpu_cells_dry_run_lists_the_steps_within_eight_files(tmp_path):
    """On an H200 (or without --h200-only) the dry run prints the build, the timed cells and the
    fine-tune check in order, every output path under $OUT/cells, no more than eight files named
    (the device tool brings back eight a call)."""
    env = _fake_smi(tmp_path, "NVIDIA H200")
    r = subprocess.run(["sh", "scripts/gpu_cells.sh", "--h200-only", "--dry-run"], cwd=ROOT, capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    steps = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("step ")]
    assert steps == ["build", "bwd-bench", "op-trace", "bwd-bench-2", "finetune-e2e", "fwd-bench",
                     "train-bench"]
    cells = tmp_path / "out" / "cells"
    named = {w for ln in r.stdout.splitlines() for w in ln.split() if w.startswith(str(cells))}
    assert {Path(w).name for w in named} == {"bwd1.json", "op_trace.json", "bwd2.json",
                                             "finetune_e2e.json", "fwd.json", "train_bench.json"}
    assert len(named) + 2 <= 8  # + card.txt and log.txt
    r = subprocess.run(["sh", "scripts/gpu_cells.sh", "--bogus"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "unknown argument" in r.stderr
