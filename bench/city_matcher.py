"""A matcher's index holding ``n`` subscriptions of ``bench/bench_serve.py``'s mix (seeded), as
the matcher process builds it (for the benchmarks of the matcher without the service)."""
from __future__ import annotations

import csv
import random
import tempfile
from pathlib import Path

from bench_serve import PROGRAM, STOPS, mix

from spatec.frontend.check import check_file
from spatec.service.areas import Areas
from spatec.service.filters import Filters
from spatec.service.matcher import Matching
from spatec.spatial.crs import Projector

ROOT = Path(__file__).resolve().parents[1]
VEHICLES = [f"v{i}" for i in range(400)]
LINES = [str(i) for i in range(100)]


def city_matcher(n: int, crs: str, rng: random.Random):
    """``(program, areas, matching, subscriptions, stops)``: the index made and its tables
    prepared in ``crs``."""
    work = Path(tempfile.mkdtemp(prefix="bench-matcher-"))
    (work / "p.spatec").write_text(PROGRAM.format(bus=ROOT / "examples" / "bus.spatec"))
    program = check_file(work / "p.spatec")
    with open(STOPS, newline="") as f:
        stops = [(float(r["lon"]), float(r["lat"])) for r in csv.DictReader(f)]
    box = (min(s[0] for s in stops), min(s[1] for s in stops), max(s[0] for s in stops), max(s[1] for s in stops))
    subs = mix(n, VEHICLES, LINES, stops, box, rng)
    areas = Areas(program, Projector(crs))
    filters = Filters(program)
    m = Matching(areas, program)
    compiled: dict = {}
    for i, s in enumerate(subs):
        w = s.get("where")
        flt = (compiled.get(w) or compiled.setdefault(w, filters.compile("Standing", w))) if w else None
        m.put(f"s{i}", "Standing", flt, areas.area(s["area"], s.get("certainly", False)) if "area" in s else None)
    areas.prepare(m.index.loose_areas())
    m.index.prepare()
    return program, areas, m, subs, stops
