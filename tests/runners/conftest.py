"""Fixtures of the Spark runner tests: the Cambridge hour and slices of it (the SparkSession is tests/conftest.py's)."""
from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[3] / "shared"
HOUR = SHARED / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
REPO = Path(__file__).resolve().parents[2]

BUS = SHARED / "spec" / "examples" / "bus.spatec"

#: positive leaves only (no negation, no successive): BusGPS can be pre-filtered
FILTERABLE = f'''
include "{BUS}"
phrase CentreThenHospital per vehicle =
    (BusGPS -> A and at centre) ; (BusGPS -> B and (at hospital or within 300 m of station))
  within 40 min
  emit vehicle = A.vehicle, minutes = duration(A, B) / 1 min
'''


@pytest.fixture(scope="session")
def hour_path():
    if not HOUR.exists():
        pytest.skip(f"the Cambridge hour is not at {HOUR}")
    return HOUR


def slice_minutes(src: Path, dst: Path, minutes: float) -> Path:
    """The first ``minutes`` of the hour (by fix time), written as CSV."""
    import pandas as pd

    df = pd.read_csv(src)
    t = pd.to_datetime(df["ts"], utc=True, errors="coerce") if df["ts"].dtype == object \
        else pd.to_datetime(df["ts"], unit="s", utc=True)
    df[t <= t.min() + pd.Timedelta(minutes=minutes)].to_csv(dst, index=False)
    return dst


@pytest.fixture(scope="session")
def slice10(hour_path, tmp_path_factory):
    return slice_minutes(hour_path, tmp_path_factory.mktemp("data") / "cambridge_10min.csv", 10)


@pytest.fixture(scope="session")
def slice20(hour_path, tmp_path_factory):
    return slice_minutes(hour_path, tmp_path_factory.mktemp("data") / "cambridge_20min.csv", 20)


def outputs(result) -> dict:
    """A replay's output files by name (a folder of parts: its parts put end to end), as bytes."""
    out = {}
    for name, path in sorted(result.paths.items()):
        path = Path(path)
        if path.is_dir():
            out[name] = b"".join(p.read_bytes() for p in sorted(path.glob("part-*")))
        else:
            out[path.name] = path.read_bytes()
    return out


def on_spark(spark, compiled, inputs, out, conf: dict | None = None, **kw):
    """``spatec replay`` on the shared session, with some settings for this replay only."""
    from spatec.runners.spark.batch import replay_spark

    old = {k: spark.conf.get(k, None) for k in (conf or {})}
    for k, v in (conf or {}).items():
        spark.conf.set(k, v)
    try:
        return replay_spark(compiled, inputs, out, spark=spark, **kw)
    finally:
        for k, v in old.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
