"""One far-away fix must not change everyone's results (issue 16): the CRS is the UTM zone
of the median position, which both runners find from counts per cell (the Spark ingest
adds up its splits' counts), and positions too far from it to be measured within 0.1 m
are warned about."""
from __future__ import annotations

import logging

import pandas as pd
import pytest
from tests.runners.conftest import REPO

from spatec.plan.program import compile_program
from spatec.runners.replay import replay_local
from spatec.exec.context import SPLIT_ROWS_KEY as INGEST_ROWS_KEY

STUCK = REPO / "examples" / "stuck" / "stuck.spatec"


def with_strays(src, dst, strays):
    df = pd.read_csv(src)
    extra = df.iloc[: len(strays)].copy()
    extra["vehicle"] = [f"STRAY-{i}" for i in range(len(strays))]
    extra["lon"] = [s[0] for s in strays]
    extra["lat"] = [s[1] for s in strays]
    pd.concat([df, extra]).to_csv(dst, index=False)
    return dst


@pytest.mark.slow
def test_strays_move_neither_runners_crs(spark, slice10, tmp_path, caplog):
    from spatec.runners.spark.batch import replay_spark

    c = compile_program(STUCK)
    base = replay_local(c, [("BusGPS", str(slice10))], tmp_path / "base")
    strayed = with_strays(slice10, tmp_path / "strays.csv", [(179.5, -60.0), (100.0, 10.0)])
    with caplog.at_level(logging.WARNING, logger="spatec.crs"):
        local = replay_local(c, [("BusGPS", str(strayed))], tmp_path / "local")
    assert local.crs == base.crs == "EPSG:32630"
    assert base.counts["Stuck"] == local.counts["Stuck"] > 0
    assert [r.message.split(" positions")[0] for r in caplog.records if r.name == "spatec.crs"] == \
        [f"1 of {base.ingest.used + 2:,}"]          # (100, 10) only: 179.5 E 60 S is measurable in UTM 30
    old = spark.conf.get(INGEST_ROWS_KEY, None)
    spark.conf.set(INGEST_ROWS_KEY, "1000")         # many chunks, each with its own counts
    try:
        remote = replay_spark(c, [("BusGPS", str(strayed))], tmp_path / "spark", spark=spark)
    finally:
        spark.conf.unset(INGEST_ROWS_KEY) if old is None else spark.conf.set(INGEST_ROWS_KEY, old)
    assert remote.crs == local.crs and remote.counts == local.counts
