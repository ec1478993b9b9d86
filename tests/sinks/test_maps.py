"""`--map`: the page's columns decode to the composites, and the page, rendered in headless
Chromium with every request refused, draws them: one layer per phrase, the program's places,
a legend, colour by a field, a time slider, popups with times in the program's zone."""
from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import shapely

from spatec.datasets import synth
from spatec.errors import SpatecError
from spatec.plan.program import compile_program
from spatec.runners.local import replay_frames
from spatec.runners.replay import ingest
from spatec.sinks import maps

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
PROBE = Path(__file__).with_name("map_probe.js")
HOUR = REPO.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"


def page_parts(path: Path):
    """The page's metadata and its binary columns, decoded as the page decodes them."""
    text = path.read_text(encoding="utf-8")
    meta = json.loads(re.search(r"const SPATEC_META = (\{.*?\});</script>", text, re.S).group(1))
    blob = gzip.decompress(base64.b64decode(re.search(r'<script id="spatec-data"[^>]*>([^<]*)</script>',
                                                      text).group(1)))
    types = {"u8": np.uint8, "i32": np.int32, "u32": np.uint32, "f64": np.float64}

    def col(spec):
        return np.frombuffer(blob, dtype=types[spec["dtype"]], count=spec["length"], offset=spec["offset"])
    return text, meta, col


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """Both phrases of stuck.spatec over a synthetic trace: composites with text, time and number fields."""
    d = tmp_path_factory.mktemp("maps")
    df = synth.synthetic_trace(8, 3600, seed=5)
    path = d / "trace.csv"
    df.to_csv(path, index=False)
    compiled = compile_program(EXAMPLES / "stuck" / "stuck.spatec")
    frames, _ = ingest(compiled, [("BusGPS", str(path))], d)
    res = replay_frames(compiled, frames)
    assert all(len(f) for f in res.frames.values()), "the synthetic trace has buses standing still"
    return compiled, res.frames, d


def test_columns_decode_to_the_composites(replayed):
    compiled, frames, d = replayed
    page = maps.write_map(frames, d / "m.html", program=compiled.program,
                          plans={p.name: p for p in compiled.plans})
    text, meta, col = page_parts(page)
    # everything is in the page: no script or stylesheet is loaded from elsewhere
    assert not re.search(r"<script[^>]*\bsrc=|<link[^>]*stylesheet", text)
    assert [l["phrase"] for l in meta["layers"]] == sorted(frames)
    assert meta["tz"] == "Europe/London"
    assert {f["properties"]["name"] for f in meta["places"]["features"]} == {"centre", "hospital", "station"}
    for layer in meta["layers"]:
        df = frames[layer["phrase"]]
        assert layer["n"] == len(df) and layer["undrawn"] == 0
        starts = col(layer["starts"]).astype(np.int64)
        xy = np.cumsum(col(layer["coords"]).astype(np.int64).reshape(-1, 2), axis=0)
        lonlat = (xy + np.array(meta["origin"])) * maps.QUANTUM
        assert len(starts) == len(df) + 1 and starts[-1] == len(lonlat)
        for i in range(0, len(df), max(1, len(df) // 25)):
            ring = shapely.Polygon(lonlat[starts[i]:starts[i + 1]])
            hull = shapely.from_wkt(df["hull"].iloc[i])
            # the drawn outline is the hull's, to within the simplification and the quantum
            assert ring.hausdorff_distance(hull) <= maps.TOLERANCE + 2 * maps.QUANTUM
        assert np.array_equal(col(layer["lo"]), df["lo"].to_numpy() / 1e6)
        ids = col(layer["ids"]).reshape(-1, 16)
        assert [bytes(r).hex() for r in ids[:5]] == df["id"].tolist()[:5]
        fields = {f["name"]: f for f in layer["fields"]}
        assert fields["vehicle"]["kind"] == "text" and fields["since"]["kind"] == "time"
        codes = col(fields["vehicle"]["column"])
        assert [fields["vehicle"]["values"][c] for c in codes[:20]] == df["vehicle"].tolist()[:20]
        assert np.array_equal(col(fields["until"]["column"]), df["until"].to_numpy() / 1e6)


def test_composites_take_few_bytes_of_the_page(replayed):
    """~90 bytes a composite in the page (the folium page: 3 kB each, one layer per composite)."""
    compiled, frames, d = replayed
    page = maps.write_map(frames, d / "size.html", program=compiled.program)
    empty = maps.write_map({p: f.iloc[:0] for p, f in frames.items()}, d / "empty.html", program=compiled.program)
    per = (page.stat().st_size - empty.stat().st_size) / sum(len(f) for f in frames.values())
    assert per < 150, per


def test_an_unknown_colour_field_is_an_error(replayed):
    compiled, frames, d = replayed
    with pytest.raises(SpatecError, match="no phrase emits a field of that name.*vehicle"):
        maps.write_map(frames, d / "bad.html", program=compiled.program, colour="speed")


def test_missing_assets_say_how_to_install_them(replayed, tmp_path, monkeypatch):
    compiled, frames, _ = replayed
    monkeypatch.setenv("SPATEC_WEB_MODULES", str(tmp_path / "nowhere"))
    with pytest.raises(SpatecError, match="scripts/setup.sh"):
        maps.write_map(frames, tmp_path / "m.html", program=compiled.program)


# ------------------------------------------------------------------------------ in the browser

def browser_or_skip():
    node = shutil.which("node")
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if node is None:
        pytest.skip("node is not installed (scripts/setup.sh needs npm)")
    if not (maps.assets_dir() / "playwright-core").exists():
        pytest.skip("web/node_modules lacks playwright-core: run scripts/setup.sh")
    if not os.path.exists(chromium):
        pytest.skip(f"no Chromium at {chromium} (scripts/setup_system.sh installs Debian's)")
    return node


def probe(page: Path, probes: dict, tmp_path: Path) -> dict:
    node = browser_or_skip()
    spec = tmp_path / "probes.json"
    spec.write_text(json.dumps(probes))
    r = subprocess.run([node, str(PROBE), str(page), str(spec)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    # nothing left the machine: the page asked for itself only, and nothing was refused
    assert got["refused"] == [] and got["requests"] == [page.resolve().as_uri()], got["requests"][:5]
    assert got["error"] is None, got["error"]
    assert not [c for c in got["console"] if "pageerror" in c or "Error" in c], got["console"][:5]
    return got


def inside(hull_wkt: str) -> list:
    p = shapely.from_wkt(hull_wkt).representative_point()
    return [p.x, p.y]


def test_the_page_draws_the_composites_offline(replayed, tmp_path):
    compiled, frames, d = replayed
    page = maps.write_map(frames, tmp_path / "map.html", program=compiled.program,
                          plans={p.name: p for p in compiled.plans})
    stuck = frames["Stuck"]
    # the slider's window: the first 30 minutes; a composite of Stuck alone at its place
    # (StuckOnRoad's are Stuck's too) that starts after it
    a = int(min(f["lo"].min() for f in frames.values()) // 1_000_000)
    win = [a, a + 1800]
    on_road = set(frames["StuckOnRoad"]["id"])
    later = stuck[~stuck["id"].isin(on_road) & (stuck["lo"] / 1e6 > win[1])]
    row = later.iloc[len(later) // 2]
    got = probe(page, {"points": [inside(row["hull"])], "click": inside(row["hull"]), "colour": "vehicle",
                       "window": win}, tmp_path)
    layers = {l["phrase"]: l for l in got["layers"]}
    assert set(layers) == set(frames)
    assert all(layers[p]["n"] == layers[p]["shown"] == len(frames[p]) for p in frames)
    # a click on the composite picks it (WebGL picking: it was drawn there); its popup
    # gives its times in the program's zone, formatted
    pick = got["picks"][0]
    assert pick is not None and pick["phrase"] in frames and pick["id"] in set(frames[pick["phrase"]]["id"])
    hit = frames[pick["phrase"]].set_index("id").loc[pick["id"]]
    assert shapely.from_wkt(hit["hull"]).buffer(1e-5).contains(shapely.Point(inside(row["hull"])))
    when = pd.Timestamp(int(hit["lo"]), unit="us", tz="UTC").tz_convert("Europe/London")
    assert f"{when:%Y-%m-%d %H:%M:%S} {'BST' if when.dst() else 'GMT'}" in got["popup"]
    assert str(hit["lo"]) not in got["popup"]             # no raw microseconds
    assert f"vehicle\t{hit['vehicle']}" in got["popup"]
    # the legend: the phrases, their counts, the zone, the places; coloured by vehicle, its values
    for p, f in frames.items():
        assert p in got["legend"] and f"{len(f):,} / {len(f):,}" in got["legend"]
    assert "times in Europe/London" in got["legend"] and "places of the program" in got["legend"]
    top = frames["Stuck"]["vehicle"].value_counts().index[0]
    assert top in got["legend_coloured"] and top not in got["legend"].split("Colour by")[1].split("\n", 2)[-1]
    # the slider's 30-minute window: what overlaps it is shown, the later composite is not
    assert got["window_label"].count(":") == 4
    shown = {l["phrase"]: l["shown"] for l in got["window_layers"]}
    for p, f in frames.items():
        want = int(((f["lo"] / 1e6 <= win[1]) & (f["hi"] / 1e6 >= win[0])).sum())
        assert shown[p] == want
    assert 0 < sum(shown.values()) < sum(len(f) for f in frames.values())
    # what a click picks now is drawn in the window (or nothing is), never the later composite
    wp = got["window_picks"][0]
    if wp is not None:
        r = frames[wp["phrase"]].set_index("id").loc[wp["id"]]
        assert wp["id"] != row["id"] and r["lo"] / 1e6 <= win[1] and r["hi"] / 1e6 >= win[0]


@pytest.mark.slow
def test_the_stuck_bus_day_map(tmp_path):
    """The Cambridge hour replicated 24 times: ~240k Stuck composites in one page, drawn."""
    from spatec.cli.main import main

    if not HOUR.exists():
        pytest.skip(f"the Cambridge hour is not at {HOUR}")
    browser_or_skip()
    day = synth.replicate(pd.read_csv(HOUR), 24)
    data = tmp_path / "busday.parquet"
    day.to_parquet(data)
    out, page = tmp_path / "out", tmp_path / "stuck.html"
    rc = main(["replay", str(EXAMPLES / "stuck" / "stuck.spatec"), "--runner", "local", "--phrase", "Stuck",
               "--events", f"BusGPS={data}", "--out", str(out), "--map", str(page), "--map-colour", "line",
               "--quiet"])
    assert rc == 0
    with open(out / "Stuck.jsonl", encoding="utf-8") as f:
        stuck = pd.DataFrame([{k: r[k] for k in ("id", "hull")} for r in map(json.loads, f)])
    assert len(stuck) > 200_000
    assert page.stat().st_size < 40e6          # the folium page: 67 MB for a twelfth of this
    # one zoomed pick, far into the buffer (the small map's test picks and clicks in detail;
    # each pick here redraws 240k composites in software GL)
    row = stuck.iloc[4 * len(stuck) // 5]
    got = probe(page, {"points": [inside(row["hull"])]}, tmp_path)
    assert got["layers"] == [{"phrase": "Stuck", "n": len(stuck), "shown": len(stuck), "undrawn": 0,
                              "fields": ["vehicle", "line", "since", "until"]}]
    # picked where it is drawn: that composite or one stacked on it (a bus stuck for longer)
    pick = got["picks"][0]
    assert pick is not None and pick["id"] in set(stuck["id"])
    hull = shapely.from_wkt(stuck.set_index("id").loc[pick["id"], "hull"])
    assert hull.buffer(1e-5).contains(shapely.Point(inside(row["hull"])))
    assert "line" in got["legend"]


# ------------------------------------------------------------------------------ context, offline

CONTEXT = """include "bus.spatec"
places stops = "stops.csv"
    place point(lon, lat) ± 40 m

phrase AtHospital per vehicle =
    run (BusGPS and at hospital) -> R gap 5 min
  emit vehicle = R.vehicle, line = R.line, since = R.first.t

phrase Dwell per vehicle =
    (run BusGPS -> R while overlap(R.first, R.this)) and certainly at stops -> S
  where R.last.t - R.first.t > 2 min
  emit vehicle = R.vehicle, stop = S.name, minutes = (R.last.t - R.first.t) / 1 min
"""


def test_only_the_places_used_are_drawn_and_sets_are_listed(tmp_path):
    from spatec.frontend.check import check_file

    (tmp_path / "bus.spatec").write_text((EXAMPLES / "bus.spatec").read_text(), encoding="utf-8")
    (tmp_path / "stops.csv").write_text("stop_id,name,lon,lat\nS1,Alpha,0.12,52.2\nS2,,0.13,52.21\n", encoding="utf-8")
    (tmp_path / "m.spatec").write_text(CONTEXT, encoding="utf-8")
    program = check_file(tmp_path / "m.spatec")
    assert maps.used_places(program) == (["hospital"], ["stops"])   # station, centre: declared, not used
    assert [f["properties"]["name"] for f in maps.places_geojson(program)["features"]] == ["hospital"]
    (s,) = maps.place_sets_meta(program)
    assert (s["name"], s["n"], s["labels"]) == ("stops", 2, ["Alpha", "stops:2"])   # (no name: its id)
    assert s["points"] == [[0.12, 52.2, 40.0, 0], [0.13, 52.21, 40.0, 1]]


def test_a_corridor_is_drawn_as_its_width(tmp_path):
    from spatec.frontend.places import PlaceDef

    line = PlaceDef("c", "line", wkt="LINESTRING (0.12 52.2, 0.13 52.2)", widen=30.0)
    g = maps._display_geometry(line)
    # 30 m either side of a line 685 m long: about 2 * 30 * 685 m² (+ the ends), in degrees here
    assert g.geom_type == "Polygon" and g.bounds[1] == pytest.approx(52.2 - 30 / 111_250, rel=0, abs=2e-6)


def test_the_background_is_the_inputs_roads():
    ev = pd.DataFrame({"_source": ["a", "a", "a", "a", "b", "b"], "_place": "point",
                       "_t": np.array([0, 20, 40, 400, 0, 20]) * 1_000_000,
                       "_lon": [0.10, 0.1001, 0.1002, 0.1003, 0.1001, 0.10],
                       "_lat": [52.2, 52.2, 52.2, 52.2, 52.2, 52.2]})
    seg, q = maps.background_segments({"BusGPS": ev})
    # a's three joined fixes are two segments; after 360 s a gap; b drives a's first segment back
    assert q == 1e-5 and seg.tolist() == [[10000, 5220000, 10010, 5220000], [10010, 5220000, 10020, 5220000]]
    many = pd.concat([ev.assign(_lon=ev["_lon"] + k * 1e-4, _source=ev["_source"] + str(k)) for k in range(30)])
    old, maps.BACKGROUND_SEGMENTS = maps.BACKGROUND_SEGMENTS, 20
    try:
        seg, q = maps.background_segments({"BusGPS": many})
    finally:
        maps.BACKGROUND_SEGMENTS = old
    assert len(seg) <= 20 and q > 1e-5          # coarser until the segments fit


BACKGROUND_RGB = (244, 243, 239)      # the page's #f4f3ef


@pytest.mark.slow
def test_a_screenshot_of_the_map_shows_roads_places_and_labels(tmp_path):
    """The Cambridge hour, a map around Addenbrooke's at zoom 15 in headless Chromium: the
    roads are drawn where the buses drove and nowhere else, the hospital (used) is labelled and
    the station and centre (declared, unused) are not, the stops are clustered, and no label
    overlaps another or a panel."""
    from PIL import Image

    from spatec.cli.main import main

    if not HOUR.exists():
        pytest.skip(f"the Cambridge hour is not at {HOUR}")
    browser_or_skip()
    stops_csv = REPO.parent / "shared" / "datasets" / "cambridge" / "stops.csv"
    (tmp_path / "bus.spatec").write_text((EXAMPLES / "bus.spatec").read_text(), encoding="utf-8")
    (tmp_path / "stops.csv").write_bytes(stops_csv.read_bytes())
    (tmp_path / "m.spatec").write_text(CONTEXT, encoding="utf-8")
    page = tmp_path / "m.html"
    assert main(["replay", str(tmp_path / "m.spatec"), "--runner", "local", "--quiet", "--events", f"BusGPS={HOUR}",
                 "--out", str(tmp_path / "out"), "--map", str(page)]) == 0
    _, meta, _ = page_parts(page)
    assert [f["properties"]["name"] for f in meta["places"]["features"]] == ["hospital"]
    assert [(s["name"], s["n"]) for s in meta["sets"]] == [("stops", 1388)] and meta["background"]["n"] > 10_000

    fixes = pd.read_csv(HOUR, usecols=["lon", "lat"])
    view = (0.1420, 52.1800)
    near = fixes[(abs(fixes["lon"] - view[0]) < 0.01) & (abs(fixes["lat"] - view[1]) < 0.005)]
    on_road = near.sample(300, random_state=1)[["lon", "lat"]].to_numpy()
    # points of the view more than 150 m from every fix and stop, and 400 m from the hospital
    gx, gy = np.meshgrid(np.linspace(view[0] - 0.0075, view[0] + 0.0075, 40),
                         np.linspace(view[1] - 0.0045, view[1] + 0.0045, 30))
    grid = np.column_stack([gx.ravel(), gy.ravel()])
    stops = pd.read_csv(stops_csv)[["lon", "lat"]].to_numpy()
    scale = np.array([111_320 * np.cos(np.radians(52.18)), 110_540])

    def nearest(points, to):
        tree = shapely.STRtree(shapely.points(to * scale))
        return tree.query_nearest(shapely.points(points * scale), return_distance=True, all_matches=False)[1]
    d_fix = nearest(grid, fixes[["lon", "lat"]].to_numpy())
    d_stop = nearest(grid, stops)
    d_h = np.hypot(*((grid - [0.14491, 52.17590]) * scale).T)
    empty = grid[(d_fix > 150) & (d_stop > 150) & (d_h > 400)]
    assert len(empty) > 40

    shot = tmp_path / "shot.png"
    got = probe(page, {"view": [view[0], view[1], 15], "screenshot": str(shot),
                       "project": on_road.tolist() + empty.tolist()}, tmp_path)
    img = Image.open(shot).convert("RGB")
    w, h = img.size
    px = [tuple(p) for p in got["projected"]]
    blocked = got["panels"] + [l["box"] for l in got["labels"]] + \
        [[c_["x"] - c_["r"], c_["y"] - c_["r"], c_["x"] + c_["r"], c_["y"] + c_["r"]] for c_ in got["clusters"]]

    def clear(x, y):
        return 2 <= x < w - 2 and 2 <= y < h - 2 and not any(b[0] - 3 <= x <= b[2] + 3 and b[1] - 3 <= y <= b[3] + 3
                                                              for b in blocked)

    def plain(x, y):       # the page's own background, nothing drawn there (within a pixel)
        return all(max(abs(a - b) for a, b in zip(img.getpixel((x + dx, y + dy)), BACKGROUND_RGB)) <= 4
                   for dx in (-1, 0, 1) for dy in (-1, 0, 1))

    roads = [p for p in px[:len(on_road)] if clear(*map(round, p))]
    away = [p for p in px[len(on_road):] if clear(*map(round, p))]
    assert len(roads) > 100 and len(away) > 30
    drawn = sum(not plain(*map(round, p)) for p in roads) / len(roads)
    blank = sum(plain(*map(round, p)) for p in away) / len(away)
    print(f"screenshot {shot}: {drawn:.1%} of {len(roads)} fixes' pixels drawn, {blank:.1%} of {len(away)} pixels "
          f"far from every fix blank; {len(got['labels'])} labels, {len(got['clusters'])} clusters")
    assert drawn > 0.9, f"only {drawn:.0%} of the fixes' pixels show a road"
    assert blank > 0.9, f"only {blank:.0%} of the pixels far from every fix are blank"
    # labels: the used place's, none of the unused ones, no two overlapping, none under a panel
    texts = [l["text"] for l in got["labels"]]
    assert "hospital" in texts and "station" not in texts and "centre" not in texts and len(texts) >= 10
    boxes = [l["box"] for l in got["labels"]]

    def meets(a, b):
        return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
    assert not [(i, j) for i in range(len(boxes)) for j in range(i) if meets(boxes[i], boxes[j])]
    assert not [b for b in boxes for p in got["panels"] if meets(b, p)]
    hb = boxes[texts.index("hospital")]
    ink = sum(1 for x in range(int(hb[0]), int(hb[2])) for y in range(int(hb[1]), int(hb[3]))
              if sum(img.getpixel((x, y))) < 300)
    assert ink > 30, "the hospital's label has no text in the screenshot"
    # the stops are clustered around the hospital at zoom 15: clusters of two or more
    assert got["clusters"] and all(c_["n"] >= 2 for c_ in got["clusters"])
