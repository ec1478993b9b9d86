"""`spatec replay --runner local`: outputs in every format, rejects that add up, clear errors."""
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spatec.cli.main import main
from spatec.datasets import synth

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    df = synth.synthetic_trace(6, 3600, seed=3, bad_fraction=0.02)
    p = tmp_path_factory.mktemp("data") / "trace.csv"
    df.to_csv(p, index=False)
    return p, df


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "geojson"])
def test_replay_writes_every_format(trace, tmp_path, fmt, capsys):
    path, df = trace
    prog = EXAMPLES / "hospital_to_station" / "hospital_to_station.spatec"
    out = tmp_path / "out"
    rc = main(["replay", str(prog), "--runner", "local", "--events", f"BusGPS={path}", "--out", str(out),
               "--format", fmt, "--map", str(tmp_path / "map.html")])
    assert rc == 0
    err = capsys.readouterr().err
    target = out / f"HospitalToStation.{fmt}"
    assert target.exists()
    if fmt == "jsonl":
        rows = [json.loads(l) for l in target.read_text().splitlines()]
        assert rows, "the synthetic trace has hospital -> station journeys"
        assert all(r["phrase"] == "HospitalToStation" and r["lo"].endswith("Z") for r in rows)
        assert all(r["minutes"] > 0 for r in rows)
    elif fmt == "parquet":
        t = pq.read_table(target)
        assert b"geo" in t.schema.metadata
        assert str(t.schema.field("lo").type).startswith("timestamp")
    else:
        fc = json.loads(target.read_text())
        assert fc["type"] == "FeatureCollection" and fc["features"]
    assert (tmp_path / "map.html").read_text().count("Leaflet") > 0
    # every row is used or rejected with a reason
    bad = sum(len(v) for v in df.attrs["bad_rows"].values())
    rejects = [json.loads(l) for l in (out / "_rejects" / "BusGPS.jsonl").read_text().splitlines()]
    assert len(rejects) == bad
    assert all(r["reason"] and r["row"] >= 1 and r["file"] for r in rejects)
    assert f"{len(df):,} rows read = {len(df) - bad:,} used + {bad:,} rejected" in err


def test_unknown_event_type_is_a_clear_error(trace, tmp_path, capsys):
    path, _ = trace
    prog = EXAMPLES / "stuck" / "stuck.spatec"
    rc = main(["replay", str(prog), "--runner", "local", "--events", f"Bus={path}", "--out", str(tmp_path)])
    assert rc == 1
    assert "declares no event type Bus (declared: BusGPS)" in capsys.readouterr().err


def test_program_errors_stop_before_running(tmp_path, capsys):
    bad = tmp_path / "bad.spatec"
    bad.write_text('include "%s"\nphrase P = BusGPS -> A ; BusGPS -> B\n' % (EXAMPLES / "bus.spatec"))
    rc = main(["replay", str(bad), "--runner", "local", "--events", "BusGPS=x.csv", "--out", str(tmp_path)])
    assert rc == 1
    err = capsys.readouterr().err
    assert f"{bad}:2:12: phrase P is unbounded" in err
