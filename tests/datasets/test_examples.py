"""examples/: layout, synthetic inputs, and the programs pass `spatec check`."""
import csv
import importlib.util
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from shapely import wkt
from shapely.geometry import Point

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FOLDERS = ["hospital_to_station", "centre_to_hospital", "tuesday_to_hospital", "wet_weather",
           "stuck", "silent", "bunching", "roadworks", "episodes", "dwell_at_stops", "headway", "stuck_together",
           "off_route", "fences"]
#: programs that read the shared data set beside the repository
NEEDS_SHARED = {"dwell_at_stops": ROOT.parent / "shared" / "datasets" / "cambridge" / "stops.csv",
                # derived from the data set (`spatec datasets gtfs`): tests/datasets/test_off_route.py builds it
                "off_route": EXAMPLES / "off_route" / "cambridge_gtfs.zip"}


def module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bus_spatec_is_the_spec_example_with_the_direction():
    """examples/bus.spatec is the spec's, with the journey's direction, which the Cambridge data
    has (SIRI's DirectionRef)."""
    spec = ROOT.parent / "shared" / "spec" / "examples" / "bus.spatec"
    if not spec.is_file():
        pytest.skip("shared spec not available")
    ours = (EXAMPLES / "bus.spatec").read_text()
    theirs = spec.read_text().replace("operator: str, lon", "operator: str, direction: str, lon").replace(
        "read up to 30 s earlier.\n", "read up to 30 s earlier;\n# `direction` is the journey's direction "
        "(SIRI's DirectionRef: INBOUND, OUTBOUND).\n")
    assert ours == theirs


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_example_has_a_program_and_a_readme(folder):
    program = EXAMPLES / folder / f"{folder}.spatec"
    readme = (EXAMPLES / folder / "README.md").read_text()
    assert program.is_file()
    assert f"spatec replay examples/{folder}/{folder}.spatec" in readme
    assert folder in (EXAMPLES / "README.md").read_text()


@pytest.mark.parametrize("folder", FOLDERS)
def test_programs_check(folder, tmp_path):
    from spatec.frontend.check import check_file

    path = EXAMPLES / folder / f"{folder}.spatec"
    if folder == "off_route" and not NEEDS_SHARED[folder].is_file():
        path = built_off_route(tmp_path)
    elif folder in NEEDS_SHARED and not NEEDS_SHARED[folder].is_file():
        pytest.skip(f"{NEEDS_SHARED[folder]} is not available")
    program = check_file(path)  # a CheckError lists every problem
    assert program.phrases


def built_off_route(tmp_path: Path) -> Path:
    """examples/off_route beside the feed it reads, built from the data set as its README says
    (`spatec datasets gtfs`)."""
    import shutil

    from spatec.datasets import gtfsfeed

    cambridge = ROOT.parent / "shared" / "datasets" / "cambridge"
    hour = cambridge / "sirivm_2019-10-01_0854-1000.csv.gz"
    if not hour.is_file():
        pytest.skip(f"{hour} is not available")
    (tmp_path / "off_route").mkdir()
    shutil.copy(EXAMPLES / "bus.spatec", tmp_path / "bus.spatec")
    shutil.copy(EXAMPLES / "off_route" / "off_route.spatec", tmp_path / "off_route" / "off_route.spatec")
    gtfsfeed.build(cambridge / "stops.csv", hour, tmp_path / "off_route" / "cambridge_gtfs.zip")
    return tmp_path / "off_route" / "off_route.spatec"


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
