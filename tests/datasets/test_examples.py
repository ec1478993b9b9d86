"""examples/: layout, synthetic inputs, and a light static check of the programs.

The language front end checks programs for real; this only catches slips that
are easy to see without it (unbound variables, missing includes, unbounded
phrases), so that the examples are right before the parser exists.
"""
import csv
import importlib.util
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from shapely import wkt
from shapely.geometry import Point

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FOLDERS = ["hospital_to_station", "centre_to_hospital", "tuesday_to_hospital", "wet_weather",
           "stuck", "silent", "bunching", "roadworks"]
FUNCS = r"(?:duration|distance|speed|before|concurrent|overlap|disjoint|hull_area|successive)"


def module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bus_spatec_is_the_spec_example():
    spec = ROOT.parent / "shared" / "spec" / "examples" / "bus.spatec"
    if not spec.is_file():
        pytest.skip("shared spec not available")
    assert (EXAMPLES / "bus.spatec").read_text() == spec.read_text()


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_example_has_a_program_and_a_readme(folder):
    program = EXAMPLES / folder / f"{folder}.spatec"
    readme = (EXAMPLES / folder / "README.md").read_text()
    assert program.is_file()
    assert f"spatec replay examples/{folder}/{folder}.spatec" in readme
    assert folder in (EXAMPLES / "README.md").read_text()


def phrases(text: str):
    """(name, match, rest) of each phrase, comments removed."""
    text = re.sub(r"#[^\n]*", "", text)
    for m in re.finditer(r"phrase\s+(\w+)(.*?)(?=\nphrase\s|\Z)", text, re.S):
        body = m.group(2)
        parts = re.split(r"\b(where|within|emit)\b", body, maxsplit=1)
        yield m.group(1), parts[0], "".join(parts[1:])


@pytest.mark.parametrize("folder", FOLDERS)
def test_programs_bind_what_they_use_and_are_bounded(folder):
    path = EXAMPLES / folder / f"{folder}.spatec"
    text = path.read_text()
    for inc in re.findall(r'include\s+"([^"]+)"', text):
        assert (path.parent / inc).is_file(), inc
    declared = set(re.findall(r"\bevent\s+(\w+)", text)) | {"BusGPS"}
    found = list(phrases(text))
    assert found, "no phrase"
    for name, match, rest in found:
        bound = re.findall(r"(\w+)\s*->\s*([A-Z]\w*)", match)
        assert {t for t, _ in bound} <= declared, name
        names = [v for _, v in bound]
        assert len(names) == len(set(names)), f"{name}: a variable bound twice"
        used = set(re.findall(r"\b([A-Z]\w*)\.\w+", rest))
        for args in re.findall(FUNCS + r"\(([^)]*)\)", rest):
            used |= {a.strip() for a in args.split(",")}
        assert used <= set(names), f"{name}: unbound {used - set(names)}"
        bounded = ("within" in rest.split("emit")[0] or "successive(" in rest or "||" in match
                   or re.search(r"not\b.*\bwithin\s+\d", match, re.S))
        assert bounded, f"{name} is unbounded"
        # Quantities compared with, or dividing, durations and distances carry units.
        lits = re.findall(r"\bwithin[ \t]+(\d[\d.]*[ \t]*[\w/]*)", rest + match)
        lits += re.findall(r"\b(?:duration|distance|speed)\([^)]*\)[ \t]*(?:[<>]=?|==|/)[ \t]*"
                           r"(\d[\d.]*[ \t]*[\w/]*)", rest)
        for lit in lits:
            assert re.fullmatch(r"\d+(?:\.\d+)?[ \t]*(s|min|h|d|m|km|km/h|m/s)", lit.strip()), \
                f"{name}: literal without unit: {lit!r}"


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_rain_input_is_what_make_rain_writes(tmp_path):
    make = module(EXAMPLES / "wet_weather" / "make_rain.py")
    make.main(tmp_path / "rain.csv")
    assert (tmp_path / "rain.csv").read_bytes() == (EXAMPLES / "wet_weather" / "rain_2019-10-01.csv").read_bytes()


def test_rain_covers_the_places_and_rains_during_the_hour():
    rows = read_csv(EXAMPLES / "wet_weather" / "rain_2019-10-01.csv")
    assert list(rows[0]) == ["gauge", "mm_h", "reading", "area"]
    gauges = {r["gauge"] for r in rows}
    assert len(gauges) == 4
    times = sorted({datetime.fromisoformat(r["reading"]) for r in rows})
    assert times[0].isoformat() == "2019-10-01T08:00:00+01:00"
    assert times[-1].isoformat() == "2019-10-01T11:00:00+01:00"
    assert all(b - a == timedelta(minutes=15) for a, b in zip(times, times[1:]))
    assert len(rows) == 4 * len(times)
    areas = {r["gauge"]: wkt.loads(r["area"]) for r in rows}
    assert all(a.is_valid for a in areas.values())
    places = {"hospital": (0.14491, 52.17590), "station": (0.13610, 52.19300), "centre": (0.12415, 52.20520)}
    for place, (lon, lat) in places.items():
        covering = [g for g, a in areas.items() if a.contains(Point(lon, lat))]
        assert len(covering) == 1, place
        wet = [r for r in rows if r["gauge"] == covering[0] and float(r["mm_h"]) > 0
               and "09:00" <= r["reading"][11:16] <= "10:00"]
        assert wet, f"no rain at the {place} during the hour"


def test_roadworks_input_is_what_make_roadworks_writes(tmp_path):
    make = module(EXAMPLES / "roadworks" / "make_roadworks.py")
    make.main(tmp_path / "rw.csv")
    assert (tmp_path / "rw.csv").read_bytes() == (EXAMPLES / "roadworks" / "roadworks_2019-10-01.csv").read_bytes()
    rows = read_csv(tmp_path / "rw.csv")
    assert list(rows[0]) == ["works_id", "description", "start", "end", "area"]
    for r in rows:
        assert datetime.fromisoformat(r["start"]) < datetime.fromisoformat(r["end"])
        area = wkt.loads(r["area"])
        assert area.is_valid and area.exterior.is_ccw
        assert "synthetic" in r["description"]
