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
