"""The command line (python -m dattn / dattn), on small settings."""

import json
import subprocess
import sys
from pathlib import Path

from dattn.__main__ import main


def test_demo_small(capsys):
    rc = main(["demo", "--device", "cpu", "--layers", "1", "--batch", "2", "--seqlen", "32",
               "--iters", "1", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "parity: PASS" in out
    lines = [line for line in out.splitlines() if line.startswith(("padded", "packed"))]
    assert len(lines) == 2 and all("PASS" in line for line in lines)


def test_check_small(capsys):
    rc = main(["check", "--device", "cpu", "--kinds", "v3,v2xl", "--dtypes", "fp32,bf16",
               "--seqlen", "16", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "8 passed, 0 failed" in out


def test_hub_repo_and_info(tmp_path, capsys):
    assert main(["hub-repo", str(tmp_path / "repo")]) == 0
    assert (tmp_path / "repo" / "build" / "torch-cpu" / "metadata.json").is_file()
    assert main(["info"]) == 0
    assert "best device:" in capsys.readouterr().out


def test_module_entry_point():
    import dattn

    env_path = str(Path(dattn.__file__).parents[1])
    out = subprocess.run([sys.executable, "-m", "dattn", "info"], capture_output=True, text=True,
                         timeout=300, env={**__import__("os").environ, "PYTHONPATH": env_path})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("dattn 0.1.0")
