"""Fixtures of the live tests: the recorded Cambridge feed, a combined program, the batch
reference (``replay_frames`` on the same events) and reading what sinks received."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
POLLS = SHARED / "datasets" / "cambridge" / "sirivm_polls_2019-10-01.tar.gz"
EXAMPLES = REPO / "examples"
CRS = "EPSG:32631"
PROGRAMS = {
    "silent": EXAMPLES / "silent" / "silent.spatec",
    "bunching": EXAMPLES / "bunching" / "bunching.spatec",
    "stuck": EXAMPLES / "stuck" / "stuck.spatec",
    "hospital": EXAMPLES / "hospital_to_station" / "hospital_to_station.spatec",
    "episodes": EXAMPLES / "episodes" / "episodes.spatec",
    "dwell": EXAMPLES / "dwell_at_stops" / "dwell_at_stops.spatec",
}
MIN = 60_000_000


def program_of(tmp_path: Path, *names: str) -> Path:
    """A program that includes the named example programs (absolute includes)."""
    p = tmp_path / ("_".join(names) + ".spatec")
    p.write_text("".join(f'include "{PROGRAMS[n]}"\n' for n in names))
    return p


@pytest.fixture(scope="session")
def recording():
    from spatec.feeds.recording import load_recording

    if not POLLS.exists():
        pytest.skip(f"the Cambridge polls are not at {POLLS}")
    return load_recording(POLLS)


def minutes(polls, n: float, start: float = 0.0):
    t0 = polls[0].received + start * 60
    return [p for p in polls if t0 <= p.received <= t0 + n * 60]


@pytest.fixture(scope="session")
def polls10(recording):
    return minutes(recording, 10)


@pytest.fixture(scope="session")
def polls5(recording):
    return minutes(recording, 5)


def feed_events(compiled, polls, fmt: str = "sirivm", type_name: str = "BusGPS") -> pd.DataFrame:
    """The canonical events a live run reads from ``polls`` served as ``fmt`` (same dedupe)."""
    from spatec.events.canonical import to_events
    from spatec.feeds.gtfsrt import encode_gtfsrt
    from spatec.feeds.recording import poll_records
    from spatec.feeds.sources import feed_batch

    decl = compiled.program.events[type_name]
    seen: set = set()
    out = []
    for p in polls:
        data = p.data if fmt == "sirivm" else encode_gtfsrt(poll_records(p.data), p.received)
        out.append(to_events([feed_batch(fmt, p.name, data, p.received)], decl, compiled.program.timezone,
                             seen).events)
    return pd.concat(out, ignore_index=True)


def late_ids(out_dir: Path, type_name: str = "BusGPS") -> set:
    f = Path(out_dir) / "late" / f"{type_name}.jsonl"
    if not f.exists():
        return set()
    return {json.loads(line)["_id"] for line in f.read_text().splitlines() if line.strip()}


def batch_alerts(compiled, events: pd.DataFrame, exclude=(), type_name: str = "BusGPS") -> dict:
    """phrase → alerts (JSON dicts) of a batch replay of ``events`` less the ids in ``exclude``."""
    from spatec.runners.local import replay_frames
    from spatec.runtime.rows import time_fields
    from spatec.sinks.alerts import alert_json

    if exclude:
        events = events[~events["_id"].isin(set(exclude))].reset_index(drop=True)
    res = replay_frames(compiled, {type_name: events}, crs=CRS)
    return {p.name: alert_json(res.frames[p.name].to_dict("records"), time_fields(p)) for p in compiled.plans}


def sink_alerts(directory: Path, compiled) -> dict:
    """phrase → alerts a JSON lines sink directory holds."""
    out = {}
    for p in compiled.plans:
        f = Path(directory) / f"{p.name}.jsonl"
        out[p.name] = [json.loads(x) for x in f.read_text().splitlines() if x.strip()] if f.exists() else []
    return out


def assert_same_alerts(got: dict, want: dict) -> None:
    """Same phrases, same ids (each once), same rows."""
    for phrase, rows in want.items():
        ids = [r["id"] for r in got.get(phrase, [])]
        assert len(ids) == len(set(ids)), f"{phrase}: an alert delivered twice"
        g = sorted(got.get(phrase, []), key=lambda r: r["id"])
        w = sorted(rows, key=lambda r: r["id"])
        missing = {r["id"] for r in w} - set(ids)
        extra = set(ids) - {r["id"] for r in w}
        assert not missing and not extra, f"{phrase}: {len(missing)} missing, {len(extra)} extra"
        assert g == w, f"{phrase}: same ids, different rows"
