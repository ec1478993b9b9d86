"""A place set of 100,000 places (SPEC §9) through the local runner: each fix standing on
one place binds exactly that place (``certainly at grid -> S``, one composite), a fix
between places binds none, and ``at grid`` keeps the fixes that meet one. The set is
matched through its spatial index; a chain of 100,000 ``or`` would not finish in the
suite's time (no timing assertion: the test is there to stay fast)."""
from __future__ import annotations

import random

import pytest
from automata_support import CRS, compile_text, frames, lonlat, row

from spatec.runners.local import replay_frames

COLS, ROWS, STEP = 400, 250, 100.0      # 100,000 discs of 40 m, 100 m apart


@pytest.mark.slow
def test_a_hundred_thousand_places(tmp_path):
    path = tmp_path / "grid.csv"
    lines = ["cell,lon,lat"]
    for j in range(ROWS):
        for i in range(COLS):
            lon, lat = lonlat(i * STEP, j * STEP)
            lines.append(f"c{j}_{i},{lon:.8f},{lat:.8f}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    c = compile_text(f'places grid = "{path}"\n    place point(lon, lat) ± 40 m\n\n'
                     "phrase On =\n    Bus -> A and certainly at grid -> S\n  emit cell = S.cell\n\n"
                     "phrase Near =\n    Bus -> A and at grid\n")
    rnd = random.Random(3)
    rows, want = [], {}
    for k in range(300):
        i, j = rnd.randrange(COLS), rnd.randrange(ROWS)
        on = k % 3 != 0
        # on a place: within 8 m of its centre (a 15 m fix inside the 40 m disc); else in
        # the middle of four places, 70 m from each
        dx, dy = (rnd.uniform(-5, 5), rnd.uniform(-5, 5)) if on else (STEP / 2, STEP / 2)
        r = row("Bus", f"v{k}", k * 10, i * STEP + dx, j * STEP + dy)
        rows.append(r)
        if on:
            want[r["id"]] = (f"grid:{j * COLS + i + 1}", f"c{j}_{i}")
    out = replay_frames(c, frames(rows), crs=CRS).frames
    got = {r["events"]["A"]: (r["places"]["S"], r["cell"]) for r in out["On"].to_dict("records")}
    assert got == want
    assert sorted(r["events"]["A"] for r in out["Near"].to_dict("records")) == sorted(want)
