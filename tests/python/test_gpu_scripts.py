"""CPU tests of the shell helpers the device calls use: scripts/pack_out.sh (a results folder
into one archive plus a few named files, since the device tool brings back at most 8 files a
call) and scripts/gpu_kernel_ab.sh's --pack step (its dry run)."""

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
