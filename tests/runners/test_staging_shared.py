"""Phrases that group a type's events alike take each group's rows once (Stager.share):
the staged files are byte for byte those each phrase writes from its own gather."""
from __future__ import annotations

import filecmp
import os
from pathlib import Path

import pytest

from spatec.events.canonical import to_events
from spatec.events.formats import read_csv
from spatec.events.read import wanted_columns
from spatec.plan.program import compile_program
from spatec.runners.spark.staging import Stager

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = [ROOT / "bench" / "three_phrases.spatec",       # three phrases per vehicle, different columns
            ROOT.parent / "shared" / "spec" / "examples" / "silent_and_bunching.spatec"]   # per vehicle, per line


def _stage(compiled, res, root, texts: bool, shared: bool, windows: dict) -> dict:
    st = Stager(compiled.program, {"BusGPS": res.events}, str(root), "c0",
                texts={"BusGPS": res.texts} if texts else None)
    plans = [p for p in compiled.plans if "BusGPS" in p.physical.types]
    if shared:
        st.share(plans, windows)
    return {p.name: st.stage(p, 8, windows.get(p.name)) for p in plans}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
@pytest.mark.parametrize("texts", [True, False], ids=["arrow-texts", "no-texts"])
def test_shared_gathers_write_the_same_files(program, texts, hour_path, tmp_path):
    compiled = compile_program(program)
    decl = compiled.program.events["BusGPS"]
    res = to_events([read_csv(str(hour_path), wanted_columns(decl))], decl, compiled.program.timezone)
    windows = {p.name: 3_600_000_000 for p in compiled.plans if not p.physical.key}
    own = _stage(compiled, res, tmp_path / "own", texts, False, windows)
    shared = _stage(compiled, res, tmp_path / "shared", texts, True, windows)
    names = sorted(os.listdir(tmp_path / "own"))
    assert names == sorted(os.listdir(tmp_path / "shared")) and len(names) > 8
    for n in names:
        assert filecmp.cmp(tmp_path / "own" / n, tmp_path / "shared" / n, shallow=False), n
    # the same groups, rows and spans, the paths aside
    strip = lambda st: {k: v for k, v in st.items() if k not in ("groups", "all", "src")}  # noqa: E731
    assert {k: strip(v) for k, v in own.items()} == {k: strip(v) for k, v in shared.items()}
