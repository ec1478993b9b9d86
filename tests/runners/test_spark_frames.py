"""Small tables made on the driver reach the JVM as Arrow: no RDD, so no Python task and no
second pool of Python workers started for them (a session's first costs 1.5 s)."""
from __future__ import annotations

from spatec.runners.spark.executor import PLACES
from spatec.runners.spark.frames import local_frame
from spatec.runners.spark.sedona import PLACE_SHAPES, executed_plan


def test_a_local_frame_holds_its_rows_in_its_types(spark):
    df = local_frame(spark, [(3, 0, 17), (5, 1, None)], PLACES)
    assert df.schema.simpleString() == "struct<_ig:int,_item:int,_to:int>"
    assert [tuple(r) for r in df.orderBy("_item").collect()] == [(3, 0, 17), (5, 1, None)]
    shapes = local_frame(spark, [("Stuck", "BusGPS", b"\x01\x02")], PLACE_SHAPES)
    assert [tuple(r) for r in shapes.collect()] == [("Stuck", "BusGPS", bytearray(b"\x01\x02"))]


def test_an_empty_local_frame_has_its_schema(spark):
    df = local_frame(spark, [], PLACES)
    assert df.columns == ["_ig", "_item", "_to"] and df.count() == 0


def test_a_local_frame_is_a_local_table_not_a_python_rdd(spark):
    """Spark scans it in the JVM; the list the same rows came from before is an RDD that a
    Python worker re-serialises (the plan shows which)."""
    rows = [(1, 0, 2)]
    ours = executed_plan(local_frame(spark, rows, PLACES))
    theirs = executed_plan(spark.createDataFrame(rows, "_ig int, _item int, _to int"))
    assert "LocalTableScan" in ours and "ExistingRDD" not in ours
    assert "ExistingRDD" in theirs
