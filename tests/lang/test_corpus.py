"""The conformance corpus, lang/corpus/: one generic runner for every program.

- ``invalid/NAME.spatec``: checking fails with exactly the ``file:line:col:
  message`` lines of ``invalid/NAME.errors`` (paths relative to the repository).
- ``valid/NAME.spatec``: checking passes, and ``explain --format json`` equals
  ``valid/NAME.explain.json``.

``SPATEC_UPDATE_GOLDEN=1`` rewrites the expected files from the current output.
"""
from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import pytest

from spatec.cli.main import main
from spatec.errors import ProgramError, UnsupportedError
from spatec.frontend.check import check_file

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "lang" / "corpus"
VALID = sorted(p.stem for p in (CORPUS / "valid").glob("*.spatec"))
INVALID = sorted(p.stem for p in (CORPUS / "invalid").glob("*.spatec"))
UPDATE = os.environ.get("SPATEC_UPDATE_GOLDEN") == "1"


def _explain():
    """`spatec.plan.explain.explain`, or None while the planner does not exist yet."""
    try:
        module = importlib.import_module("spatec.plan.explain")
    except ModuleNotFoundError as e:
        if e.name in ("spatec.plan", "spatec.plan.explain"):
            return None
        raise
    return module.explain


def error_lines(rel_path: str) -> list[str]:
    """The first line of every rendered diagnostic: ``file:line:col: message``."""
    try:
        check_file(rel_path)
    except ProgramError as e:
        return [d.render().splitlines()[0] for d in e.diagnostics]
    return []


@pytest.fixture
def at_root(monkeypatch):
    # error lines name files relative to the repository root
    monkeypatch.chdir(ROOT)


def test_corpus_size():
    assert len(VALID) + len(INVALID) >= 40


@pytest.mark.parametrize("name", INVALID)
def test_invalid(name, at_root):
    rel = f"lang/corpus/invalid/{name}.spatec"
    expected_file = CORPUS / "invalid" / f"{name}.errors"
    got = error_lines(rel)
    assert got, f"{rel} should not pass the checker"
    if UPDATE:
        expected_file.write_text("\n".join(got) + "\n", encoding="utf-8")
    assert expected_file.is_file(), f"missing {expected_file.relative_to(ROOT)}"
    expected = [ln for ln in expected_file.read_text(encoding="utf-8").splitlines() if ln.strip()]
    assert got == expected


@pytest.mark.parametrize("name", VALID)
def test_valid_checks(name, at_root, capsys):
    code = main(["check", "--quiet", f"lang/corpus/valid/{name}.spatec"])
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize("name", VALID)
def test_valid_explain(name, at_root):
    explain = _explain()
    if explain is None:
        pytest.skip("spatec.plan.explain does not exist yet")
    program = check_file(f"lang/corpus/valid/{name}.spatec")
    try:
        got = explain(program, phrase=None, fmt="json")
    except UnsupportedError as e:
        pytest.skip(str(e))  # a construct of SPEC §7-9 whose plan is not built yet
    golden = CORPUS / "valid" / f"{name}.explain.json"
    if UPDATE:
        golden.write_text(got if got.endswith("\n") else got + "\n", encoding="utf-8")
    assert golden.is_file(), (f"missing golden file {golden.relative_to(ROOT)}; "
                              "write it with SPATEC_UPDATE_GOLDEN=1 and review it")
    assert json.loads(got) == json.loads(golden.read_text(encoding="utf-8"))
