"""The oracle itself on tiny hand-made traces whose answers can be worked out by hand:
the three spec examples of SPEC §7-9 (stuck_episodes, stuck_together, dwell_at_stops),
the cutting of runs, place sets as patterns, and phrases over phrases.

The spec examples are read from ../shared/spec/examples (copied beside a tiny
stops file, so that dwell_at_stops reads three stops rather than the real 1,388).
"""
from __future__ import annotations

import datetime as dt
import math
import shutil
from pathlib import Path

import automata_support  # noqa: F401  (puts tests/ on the path for `oracle`)
import oracle
import pytest

from spatec.frontend import ast as A
from spatec.frontend.check import check_file
from spatec.spatial.crs import Projector

US = 1_000_000
SPEC = Path(__file__).resolve().parents[3] / "shared" / "spec" / "examples"
LON0, LAT0 = 0.1245, 52.2050          # near Drummer Street, Cambridge
T0 = int(dt.datetime(2019, 10, 1, 8, 0, tzinfo=dt.timezone.utc).timestamp()) * US
M_LAT = 1 / 111_320.0
M_LON = 1 / (111_320.0 * math.cos(math.radians(LAT0)))


def lonlat(dx: float, dy: float = 0.0) -> tuple[float, float]:
    return LON0 + dx * M_LON, LAT0 + dy * M_LAT


def fix(vehicle: str, t_s: float, dx: float, dy: float = 0.0, line: str = "U", direction: str = "INBOUND") -> dict:
    """A BusGPS fix of bus.spatec: reported ``t_s`` seconds after T0, ``dx`` m east of the origin."""
    t = T0 + int(t_s * US)
    lon, lat = lonlat(dx, dy)
    return {"type": "BusGPS", "id": f"BusGPS:{vehicle}:{t_s:g}", "source": vehicle, "t": t, "lo": t - 30 * US,
            "hi": t, "place": "point", "lon": lon, "lat": lat, "r": 15.0, "geom": None,
            "attrs": {"vehicle": vehicle, "line": line, "operator": "SCCM", "direction": direction, "lon": lon,
                      "lat": lat, "ts": t}}


def stay(vehicle: str, start_s: float, n: int, dx: float, every: float = 20.0, line: str = "U") -> list:
    """``n`` fixes ``every`` seconds at one spot."""
    return [fix(vehicle, start_s + i * every, dx, line=line) for i in range(n)]


@pytest.fixture
def spec(tmp_path):
    """The spec examples beside a stops file of three stops (two touching, one apart)."""
    if not SPEC.is_dir():
        pytest.skip("the shared spec examples are not available")
    folder = tmp_path / "spec" / "examples"
    folder.mkdir(parents=True)
    for name in ("bus", "stuck_episodes", "stuck_together", "dwell_at_stops", "dwell_nearest_stop",
                 "headway_at_stop"):
        shutil.copy(SPEC / f"{name}.spatec", folder / f"{name}.spatec")
    stops = tmp_path / "datasets" / "cambridge"
    stops.mkdir(parents=True)
    rows = [("S1", "First", 0.0), ("S1b", "Beside first", 10.0), ("S2", "Second", 1000.0), ("S3", "Third", 2000.0)]
    text = "stop_id,name,lat,lon\n" + "".join(
        f"{sid},{name},{lonlat(dx)[1]:.8f},{lonlat(dx)[0]:.8f}\n" for sid, name, dx in rows)
    (stops / "stops.csv").write_text(text, encoding="utf-8")
    return folder


def evaluate(path: Path, rows: list):
    program = check_file(path)
    proj = Projector("EPSG:32631")
    return oracle.Oracle(program, proj, oracle.oevents(program, rows, proj))


def emitted(o, name: str) -> list[dict]:
    """The emit values of each composite, times as seconds after T0."""
    out = []
    for e in sorted(o.derived(name), key=lambda e: (e.lo, e.id)):
        out.append({k: (v - T0) / US if k in ("since", "until", "first_since", "second_since") else v
                    for k, v in e.attrs.items()})
    return out


# ------------------------------------------------------------------------------ stuck_episodes


def test_stuck_episodes(spec):
    rows = (stay("1", 0, 5, 0)                     # 5 fixes at one spot ...
            + stay("1", 100, 4, 500)               # ... then 4 at another: each stretch a run
            + [fix("1", 180, 2500)]                # ... which this fix ends (and starts a run of its own)
            + stay("2", 0, 3, 0) + [fix("2", 60, 900)]   # only 3 fixes: too short
            + stay("3", 0, 6, 3000))               # 6 fixes and nothing after: the run is not complete
    o = evaluate(spec / "stuck_episodes.spatec", rows)
    assert emitted(o, "StuckEpisode") == [
        {"vehicle": "1", "line": "U", "since": 0.0, "until": 80.0, "fixes": 5},
        {"vehicle": "1", "line": "U", "since": 100.0, "until": 160.0, "fixes": 4},
    ]
    got = o.phrase("StuckEpisode")
    assert [c[3] for c in got] in ([(("R", "BusGPS:1:0"),), (("R", "BusGPS:1:100"),)],
                                   [(("R", "BusGPS:1:100"),), (("R", "BusGPS:1:0"),)])
    first = next(c for c in got if c[3] == (("R", "BusGPS:1:0"),))
    assert first[4] == tuple(sorted(f"BusGPS:1:{t}" for t in (0, 20, 40, 60, 80)))  # every event of the run
    assert (first[1], first[2]) == (T0 - 30 * US, T0 + 80 * US)                   # its stamp: the hull


def test_runs_overlap_the_first_fix_not_the_previous(spec):
    # drifting 20 m per fix: each overlaps the one before, but the third is 40 m from the first
    rows = [fix("4", 0, 0), fix("4", 20, 20), fix("4", 40, 25), fix("4", 60, 40), fix("4", 80, 60),
            fix("4", 100, 2000)]
    o = evaluate(spec / "stuck_episodes.spatec", rows)
    run = next(n for n in A.walk(o.program.phrase("StuckEpisode").phrase.match) if isinstance(n, A.Run))
    cut = [[e.id.rsplit(":", 1)[1] for e in r.events] for r in o.runs(run)]
    assert cut == [["0", "20", "40"], ["60", "80"]]   # by local time (the fix at 40 s is 25 m east)
    assert o.phrase("StuckEpisode") == []


# ------------------------------------------------------------------------------ stuck_together


def test_stuck_together(spec):
    rows = (stay("a", 0, 5, 0) + [fix("a", 100, 3000)]
            + stay("b", 10, 5, 10) + [fix("b", 110, -3000)]            # beside a, at the same time
            + stay("c", 0, 5, 1000) + [fix("c", 100, 5000)]            # same time, 1 km away
            + stay("d", 7200, 5, 0) + [fix("d", 7300, 3000)])          # same place, two hours later
    o = evaluate(spec / "stuck_together.spatec", rows)
    assert [e["vehicle"] for e in emitted(o, "StuckEpisode")] == ["a", "c", "b", "d"]
    got = o.phrase("StuckTogether")
    assert len(got) == 1
    assert emitted(o, "StuckTogether") == [{"first": "a", "second": "b", "first_since": 0.0, "second_since": 10.0}]
    (cid, lo, hi, binds, members) = got[0]
    s1 = next(e for e in o.derived("StuckEpisode") if e.attrs["vehicle"] == "a")
    s2 = next(e for e in o.derived("StuckEpisode") if e.attrs["vehicle"] == "b")
    assert binds == (("S1", s1.id), ("S2", s2.id))          # derived events by their composite ids
    assert members == tuple(sorted((s1.id, s2.id)))
    assert (lo, hi) == (T0 - 30 * US, T0 + 90 * US)
    assert s1.source is None and s1.t == s1.hi              # no source; local time = event time


# ------------------------------------------------------------------------------ dwell_at_stops


def test_dwell_at_stops(spec):
    rows = (stay("x", 0, 13, 0) + [fix("x", 260, 5000)]      # 4 min at S1 (and at S1b, 10 m away)
            + stay("y", 0, 7, 1000) + [fix("y", 140, 5000)]  # 2 min at S2: too short
            + stay("z", 0, 13, 2035) + [fix("z", 260, 6000)])  # 4 min 35 m from S3: possibly, not certainly in
    o = evaluate(spec / "dwell_at_stops.spatec", rows)
    got = o.phrase("DwellAtStop")
    # inside both S1 and S1b (40 m discs 10 m apart): one match per place
    assert sorted(c[3] for c in got) == [(("R", "BusGPS:x:0"), ("S", "stops:1")),
                                        (("R", "BusGPS:x:0"), ("S", "stops:2"))]
    assert sorted((e["stop"], e["name"], e["since"], e["until"]) for e in emitted(o, "DwellAtStop")) == [
        ("S1", "First", 0.0, 240.0), ("S1b", "Beside first", 0.0, 240.0)]
    assert len({c[0] for c in got}) == 2                     # the place is part of the composite's id


def test_a_set_as_a_pattern(spec):
    program = check_file(spec / "dwell_at_stops.spatec")
    proj = Projector("EPSG:32631")
    pat = oracle.Patterns(program, proj)
    x, y = proj.forward(*lonlat(5))
    between = oracle.S.Loc.disc(float(x), float(y), 15.0)    # 5 m from S1, 5 m from S1b
    x, y = proj.forward(*lonlat(500))
    far = oracle.S.Loc.disc(float(x), float(y), 15.0)
    at_stops, certainly = A.AtPlace("stops"), A.Certainly(A.AtPlace("stops"))
    assert pat.test(at_stops, 0, 0, between) == (True, True)
    assert pat.test(certainly, 0, 0, between)[0] is True
    assert pat.test(at_stops, 0, 0, far) == (False, False)
    assert pat.test(A.Not(at_stops), 0, 0, far) == (True, True)
    # a fix on the edge of a stop: possibly at the set, not certainly
    x, y = proj.forward(*lonlat(1000 + 45))
    edge = oracle.S.Loc.disc(float(x), float(y), 15.0)
    assert pat.test(at_stops, 0, 0, edge) == (True, False)
    assert pat.test(certainly, 0, 0, edge)[0] is False
    places = [binds[0][1].id for binds, _, _ in pat.bindings(A.AtPlace("stops", "S"))]
    assert places == ["stops:1", "stops:2", "stops:3", "stops:4"]


def test_certainly_at_a_set_is_inside_one_place(tmp_path):
    # two stops 70 m apart, 40 m each: a 15 m fix half way is inside their union, inside neither
    (tmp_path / "pair.csv").write_text(
        "id,lon,lat\n" + "".join(f"{i},{lonlat(dx)[0]:.8f},{lonlat(dx)[1]:.8f}\n" for i, dx in ((1, 0), (2, 70))),
        encoding="utf-8")
    (tmp_path / "p.spatec").write_text(
        (Path(__file__).resolve().parents[2] / "examples" / "bus.spatec").read_text()
        + '\nplaces pair = "pair.csv"\n    place point(lon, lat) ± 40 m\n', encoding="utf-8")
    program = check_file(tmp_path / "p.spatec")
    proj = Projector("EPSG:32631")
    pat = oracle.Patterns(program, proj)
    x, y = proj.forward(*lonlat(35))
    half_way = oracle.S.Loc.disc(float(x), float(y), 15.0)
    assert pat.test(A.AtPlace("pair"), 0, 0, half_way) == (True, True)        # the set: inside the union
    assert pat.test(A.Certainly(A.AtPlace("pair")), 0, 0, half_way)[0] is False  # ... but in no one place
    assert pat.test(A.Not(A.AtPlace("pair")), 0, 0, half_way)[0] is False


# ------------------------------------------------------------------------------ the oracle's limits


def test_an_absence_over_a_phrase_waits_for_the_producers_frontier(tmp_path):
    path = tmp_path / "p.spatec"
    path.write_text((Path(__file__).resolve().parents[2] / "examples" / "bus.spatec").read_text() + """
phrase Near =
    BusGPS -> A ||= BusGPS -> B
  where A.vehicle < B.vehicle
  emit v = A.vehicle

phrase NoMore =
    Near -> N ; not Near -> X within 5 min
""", encoding="utf-8")
    o = evaluate(path, stay("a", 0, 2, 0) + stay("b", 0, 2, 5))
    assert len(o.phrase("Near")) == 4
    # REFERENCE decision 33: every window reaches past the data, so nothing is decided, and
    # NoMore's own frontier is the least lo of its undecided composites (Near's earliest)
    assert o.phrase("NoMore") == []
    assert o.frontier("NoMore") == min(c[1] for c in o.phrase("Near"))


def test_runs_with_patterns_and_a_gap(tmp_path):
    path = tmp_path / "g.spatec"
    path.write_text((Path(__file__).resolve().parents[2] / "examples" / "bus.spatec").read_text() + """
phrase Away per vehicle =
    run (BusGPS and not at centre) -> R gap 2 min
  emit since = R.first.t, n = count(R)
""", encoding="utf-8")
    far = 3000  # the origin (dx = 0) is at the centre
    rows = (stay("g", 0, 3, far)              # a run, then silence for longer than the gap: complete
            + stay("g", 200, 2, far)          # a new run, ended by ...
            + [fix("g", 240, 0)]              # ... a fix at the centre, which starts no run
            + [fix("g", 260, far)]            # a run of one, complete once the data passes 260 s + 2 min
            + [fix("h", 500, far)])           # another bus; its own run is not complete
    o = evaluate(path, rows)
    assert [(e.attrs["n"], (e.attrs["since"] - T0) / US) for e in sorted(o.derived("Away"), key=lambda e: e.lo)] \
        == [(3, 0.0), (2, 200.0), (1, 260.0)]
    o = evaluate(path, rows[:-1])             # without h the data ends at 260 s: the last run is open
    assert [e.attrs["n"] for e in sorted(o.derived("Away"), key=lambda e: e.lo)] == [3, 2]
