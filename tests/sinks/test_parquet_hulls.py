"""A task's GeoParquet rows from the fast path's hulls as WKB written from their numbers
(``arrow_hulls="wkb"``, what the match tasks ask for) are, byte for byte, the rows written
from their 7-decimal text (``arrow_hulls=True``), on the Cambridge hour."""
from __future__ import annotations

from pathlib import Path

import pytest

from spatec.plan.program import compile_program
from spatec.runtime.batch import phrase_rows
from spatec.runtime.rows import ColumnRows, rows_frame, time_fields
import pyarrow.parquet as pq

from spatec.sinks.files import parquet_table
from spatec.spatial.crs import Projector, choose_crs
from spatec.spatial.hullcol import HULL

REPO = Path(__file__).resolve().parents[2]
HOUR = REPO.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"


@pytest.mark.slow
def test_parts_from_wkb_hulls_are_the_text_parts(tmp_path):
    from spatec.events.read import read_events

    if not HOUR.exists():
        pytest.skip(f"the Cambridge hour is not at {HOUR}")
    c = compile_program(REPO / "bench" / "three_phrases.spatec")
    frames = {"BusGPS": read_events(HOUR, c.program.events["BusGPS"], tz=c.program.timezone).events}
    proj = Projector(choose_crs(c.program, frames))
    final = int(frames["BusGPS"]["_hi"].max())
    for plan in c.plans:
        parts = {}
        for how in (True, "wkb"):
            rows, _ = phrase_rows(plan, c.program, frames, proj, final, arrow_hulls=how)
            assert isinstance(rows, ColumnRows) and len(rows)
            if how == "wkb":
                hull = rows.columns["hull"]
                assert hull.type == HULL
                if plan.name == "Stuck":    # grown hulls: WKB from the numbers (text: the few
                    assert hull.field("wkb").null_count <= len(hull) // 100   # with a 500 m edge)
            path = tmp_path / f"{plan.name}.{how}"
            table = parquet_table(rows_frame(plan, rows), time_fields(plan), plan=plan)
            pq.write_table(table, path)
            parts[how] = (path.read_bytes(), table)
        assert parts[True][0] == parts["wkb"][0], plan.name
        assert parts[True][1].equals(parts["wkb"][1]) and parts[True][1].schema.metadata == parts["wkb"][1].schema.metadata
