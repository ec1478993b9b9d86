"""Phrases that group a type's events alike take each group's rows once (Stager.share) and
write them once: what each phrase reads of the shared files (its columns) is, schema and
metadata included, the table it writes from its own gather."""
from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

from spatec.events.canonical import to_events
from spatec.events.formats import read_csv
from spatec.events.read import wanted_columns
from spatec.plan.program import compile_program
from spatec.runners.spark.staging import Stager, phrase_columns, read_arrow, staged_columns

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
    by_name = {p.name: p for p in compiled.plans}
    compared = 0
    for name, st in own.items():
        assert sorted(st["groups"]) == sorted(shared[name]["groups"])
        for g, files in st["groups"].items():
            for t, path in files.items():
                mine = read_arrow(path)
                got = phrase_columns(read_arrow(shared[name]["groups"][g][t]),
                                     staged_columns(compiled.program, by_name[name], t))
                assert got.schema.equals(mine.schema, check_metadata=True) and got.equals(mine), (name, g, t)
                compared += 1
        for kind in ("all", "src"):         # (a phrase's own files)
            for t, path in st[kind].items():
                assert filecmp.cmp(path, shared[name][kind][t], shallow=False)
    assert compared > 8
    # phrases grouped alike share their groups' files: fewer files, fewer bytes
    size = lambda d: sum(f.stat().st_size for f in d.iterdir())  # noqa: E731
    alike = [p for p in compiled.plans if not windows.get(p.name) and "BusGPS" in p.physical.keyed]
    keys = {tuple(p.physical.key) for p in alike}
    if texts and len(alike) > len(keys):     # (with pandas metadata, each its own: Stager._group_tables)
        assert size(tmp_path / "shared") < size(tmp_path / "own")
    # the same groups, rows and spans, the paths aside
    strip = lambda st: {k: v for k, v in st.items() if k not in ("groups", "all", "src")}  # noqa: E731
    assert {k: strip(v) for k, v in own.items()} == {k: strip(v) for k, v in shared.items()}
