"""The README's tutorial runs: its `sh tutorial` and `python tutorial` blocks, in order, from a
folder laid out as the repository root is (``../shared`` beside it), with `spatec` on PATH."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
BLOCK = re.compile(r"^```(sh|python) tutorial\n(.*?)^```", re.S | re.M)


def blocks() -> list:
    return BLOCK.findall((REPO / "README.md").read_text(encoding="utf-8"))


def test_the_tutorial_has_its_steps():
    kinds = [k for k, _ in blocks()]
    assert kinds.count("sh") >= 4 and kinds.count("python") >= 1
    text = "".join(b for _, b in blocks())
    assert "spatec check" in text and "spatec replay" in text and "--map" in text and "spatec sql" in text


@pytest.mark.slow
def test_the_tutorial_runs(tmp_path):
    if not (SHARED / "datasets" / "cambridge").exists():
        pytest.skip(f"the Cambridge data is not at {SHARED}")
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "shared").symlink_to(SHARED)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for kind, code in blocks():
        cmd = ["bash", "-eu", "-c", code] if kind == "sh" else [sys.executable, "-c", code]
        r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{kind} block failed:\n{code}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
        if "spatec sql" in code:       # the median journey time per line: a table with a row per line
            assert "median_minutes" in r.stdout and "│ 1 " in r.stdout, r.stdout
        if kind == "python":
            assert "HospitalToStation" in r.stdout and "rows read" in r.stdout
    out = root / "tutorial" / "out"
    assert (out / "HospitalToStation.jsonl").read_text().count("+01:00") > 0
    assert (root / "tutorial" / "journeys.html").stat().st_size > 100_000
    assert (out / "_manifest.json").exists()
