"""What an analyst sees of `spatec replay`: --tz, the manifest, stale outputs, --quiet, progress."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from spatec.cli.main import main
from spatec.cli.progress import Progress, TaskLogTail
from spatec.datasets import synth
from spatec.events.timefmt import parse_times

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STUCK = EXAMPLES / "stuck" / "stuck.spatec"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    df = synth.synthetic_trace(4, 3600, seed=7, bad_fraction=0.02)
    p = tmp_path_factory.mktemp("data") / "trace.csv"
    df.to_csv(p, index=False)
    return p


def replay(trace, out, *more):
    return main(["replay", str(STUCK), "--runner", "local", "--events", f"BusGPS={trace}", "--out", str(out),
                 "--quiet", *more])


def lines(path):
    return [json.loads(l) for l in Path(path).read_text().splitlines()]


def test_tz_program_writes_local_times_with_their_offset(trace, tmp_path):
    assert replay(trace, tmp_path / "utc") == 0
    assert replay(trace, tmp_path / "local", "--tz", "program") == 0
    utc, local = lines(tmp_path / "utc" / "Stuck.jsonl"), lines(tmp_path / "local" / "Stuck.jsonl")
    assert len(utc) == len(local) > 0
    assert all(r["lo"].endswith("Z") for r in utc)
    assert all(r["lo"].endswith("+01:00") and r["since"].endswith("+01:00") for r in local)   # BST
    for field in ("lo", "hi", "since", "until"):
        a = parse_times([r[field] for r in utc]).values
        b = parse_times([r[field] for r in local]).values
        assert (a == b).all(), field        # the same instants
    assert [r["id"] for r in utc] == [r["id"] for r in local]
    # without --tz the bytes are those of every earlier release: UTC, `Z`
    assert replay(trace, tmp_path / "again") == 0
    assert (tmp_path / "again" / "Stuck.jsonl").read_bytes() == (tmp_path / "utc" / "Stuck.jsonl").read_bytes()


def test_tz_geojson_and_a_bad_zone(trace, tmp_path, capsys):
    assert replay(trace, tmp_path / "g", "--tz", "America/New_York", "--format", "geojson") == 0
    fc = json.loads((tmp_path / "g" / "Stuck.geojson").read_text())
    assert fc["features"] and all(f["properties"]["lo"].endswith("-04:00") for f in fc["features"])
    assert replay(trace, tmp_path / "b", "--tz", "Mars/Olympus") == 1
    assert "--tz 'Mars/Olympus': not a time zone" in capsys.readouterr().err


def test_manifest_names_what_the_run_wrote(trace, tmp_path):
    out = tmp_path / "out"
    assert replay(trace, out, "--map", str(out / "map.html")) == 0
    m = json.loads((out / "_manifest.json").read_text())
    assert m["program"]["path"] == str(STUCK.resolve()) and len(m["program"]["sha256"]) == 64
    assert m["program"]["phrases"] == ["Stuck", "StuckOnRoad"] and m["program"]["timezone"] == "Europe/London"
    assert m["runner"] == "local" and m["format"] == "jsonl" and m["tz"] == "UTC"
    (inp,) = m["inputs"]
    assert inp["read"] == inp["used"] + inp["rejected"] and inp["rejected"] > 0
    got = {o["phrase"]: o for o in m["outputs"]}
    for name, o in got.items():
        assert o["path"] == f"{name}.jsonl" and o["composites"] == len(lines(out / o["path"]))
        assert o["bytes"] == (out / o["path"]).stat().st_size
    assert m["rejects"] == [{"type": "BusGPS", "path": "_rejects/BusGPS.jsonl", "rows": inp["rejected"]}]
    assert m["map"] == {"path": "map.html", "inside": True}
    assert m["removed"] == [] and m["unclaimed"] == []


def test_stale_outputs_are_removed_and_strangers_left(trace, tmp_path, capsys):
    out = tmp_path / "out"
    assert replay(trace, out, "--map", str(out / "map.html")) == 0
    mine = out / "notes.jsonl"                  # not spatec's: no manifest names it
    mine.write_text('{"mine": true}\n')
    # the second run: one phrase, another format, no map
    rc = main(["replay", str(STUCK), "--runner", "local", "--events", f"BusGPS={trace}", "--out", str(out),
               "--phrase", "Stuck", "--format", "parquet"])
    assert rc == 0
    m = json.loads((out / "_manifest.json").read_text())
    # the other phrase's output is not stale: a run of some phrases keeps it, and says so
    assert m["removed"] == ["Stuck.jsonl", "map.html"]
    assert not (out / "Stuck.jsonl").exists() and (out / "StuckOnRoad.jsonl").exists()
    assert [o["path"] for o in m["outputs"] if o.get("kept")] == ["StuckOnRoad.jsonl"]
    assert not (out / "map.html").exists() and (out / "Stuck.parquet").exists()
    assert (out / "_rejects" / "BusGPS.jsonl").exists()          # written again
    assert mine.read_text() == '{"mine": true}\n' and m["unclaimed"] == ["notes.jsonl"]
    err = capsys.readouterr().err
    assert "removed" in err and "Stuck.jsonl" in err and "notes.jsonl" in err


def test_quiet_is_quiet(trace, tmp_path, capsys):
    assert replay(trace, tmp_path / "q") == 0
    got = capsys.readouterr()
    assert got.out == "" and got.err == ""


def test_progress_lines_while_matching():
    s = io.StringIO()
    ui = Progress(stream=s, interval=0.0)
    ui.matching({"A": 100, "B": 50})
    ui.partition("A", 40, 3)
    ui.partition("A", 60, 2)
    ui.partition("B", 25, 7)
    assert ui.time_left() is not None and ui.time_left() >= 0
    ui.matched()
    text = s.getvalue()
    assert "A (1/2): 1 groups, 3 composites" in text and "left" in text
    assert "A: 2 groups, 5 composites" in text          # a phrase's line when it is done
    assert "B: 1 groups, 7 composites" in text
    quiet = io.StringIO()
    q = Progress(quiet=True, stream=quiet)
    q.matching({"A": 1})
    q.partition("A", 1, 1)
    q.matched()
    assert quiet.getvalue() == ""


def test_the_task_log_is_followed(tmp_path):
    log = tmp_path / "tasks.jsonl"
    log.write_text(json.dumps({"stage": "match", "phrase": "A", "events": 5, "rows": 1}) + "\n")  # before: not ours
    ui = Progress(stream=io.StringIO(), interval=1e9)
    ui.matching({"A": 30})
    with TaskLogTail(log, ui, every=0.01):
        with open(log, "a") as f:
            f.write(json.dumps({"stage": "ingest", "item": 0, "rows": 9}) + "\n")
            f.write(json.dumps({"stage": "match", "phrase": "A", "item": 0, "events": 10, "rows": 4}) + "\n")
            f.write(json.dumps({"stage": "match", "phrase": "A", "item": 1, "events": 20, "rows": 2}))  # half a line
    assert ui.status().startswith("  A (1/1): 1 groups, 4 composites")


@pytest.mark.slow
def test_spark_run_is_quiet_and_logs_to_the_output_folder(trace, tmp_path):
    """A fresh process (its own JVM): with --quiet nothing at all on the terminal; Spark's and
    the JVM's lines in out/_logs/spark.log, the tasks' in out/_logs/tasks.jsonl."""
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "spatec.cli.main", "replay", str(STUCK), "--events",
                        f"BusGPS={trace}", "--out", str(out), "--quiet", "--conf", "spark.ui.enabled=false"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == "" and r.stderr == ""
    log = (out / "_logs" / "spark.log").read_text()
    assert "log4j" in log or "WARN" in log            # what used to be on the terminal
    tasks = [json.loads(l) for l in (out / "_logs" / "tasks.jsonl").read_text().splitlines()]
    assert {"ingest", "match"} <= {t["stage"] for t in tasks}
    # each line: its time, CPU, kernel time and the worker's peak memory (a worker holds spatec)
    assert all(t["total_s"] >= 0 and t["cpu_s"] >= t["kernel_s"] >= 0 and t["peak_mb"] > 20 for t in tasks)
    m = json.loads((out / "_manifest.json").read_text())
    assert m["logs"] == ["_logs/spark.log", "_logs/tasks.jsonl"] and m["runner"] == "spark"


def test_the_live_console_shows_times_in_a_zone():
    from rich.console import Console

    from spatec.errors import DataError
    from spatec.sinks.alerts import open_sink

    sink = open_sink("console:?tz=Europe/London", None)
    assert sink.name == "console:"            # the delivered log knows it by name, whatever its zone
    buf = io.StringIO()
    sink.console = Console(file=buf, highlight=False, soft_wrap=True, color_system=None, width=200)
    alert = {"phrase": "Stuck", "id": "c1", "lo": "2019-10-01T07:59:38Z", "hi": "2019-10-01T08:00:38.500000Z",
             "hull": None, "events": {}, "vehicle": "2019-10-01", "since": "2019-10-01T07:59:38Z"}
    assert sink.deliver([alert]) == [alert]     # what is delivered (and logged) is unchanged
    line = buf.getvalue()
    assert "2019-10-01T08:59:38+01:00 .. 2019-10-01T09:00:38.500000+01:00" in line
    assert "since=2019-10-01T08:59:38+01:00" in line and "vehicle=2019-10-01 " in line
    with pytest.raises(DataError, match="not a time zone"):
        open_sink("console:?tz=Mars/Olympus", None)


def test_the_last_line_counts_every_group_the_log_holds(tmp_path):
    """Matching ends before the tail's next poll: the phrase's last line still counts the groups
    the tasks logged meanwhile (the README's command printed 9 groups, 14 composites of 12, 20)."""
    log = tmp_path / "tasks.jsonl"
    log.write_text("")
    s = io.StringIO()
    ui = Progress(stream=s, interval=1e9)
    ui.matching({"A": 30})
    with TaskLogTail(log, ui, every=3600):        # the thread's own polls never come in time
        with open(log, "a") as f:
            for i, n in enumerate((4, 1, 3)):
                f.write(json.dumps({"stage": "match", "phrase": "A", "item": i, "events": 10, "rows": n}) + "\n")
        ui.partition("A", 0, 0)                   # (one group seen before: the phrase is current)
        ui.matched()
    assert "A: 4 groups, 8 composites" in s.getvalue()
