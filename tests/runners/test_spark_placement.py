"""Rows to the partitions spatec chooses, through Spark's own shuffle: the hash is Spark's,
an item's rows land in its partition, and few rows are grouped through few partitions."""
from __future__ import annotations

import re

from pyspark.sql import functions as F

from spatec.runners.spark.placement import few_groups, murmur3_int, placed, placing
from spatec.runners.spark.sedona import executed_plan

VALUES = [0, 1, -1, 2, 7, 42, 1000, -123456, 2**31 - 1, -(2**31)]


def test_the_hash_is_sparks_own(spark):
    df = spark.createDataFrame([(v,) for v in VALUES], "v int")
    theirs = [r["h"] for r in df.select(F.hash("v").alias("h")).collect()]
    assert murmur3_int(VALUES).tolist() == theirs


def test_each_items_rows_land_in_its_partition(spark):
    n = 5
    to = placing(n)
    assert len(set(to)) == n and min(to) >= 0
    rows = [(item, to[item], k) for item in range(n) for k in range(3)]
    df = placed(spark.createDataFrame(rows, "item int, _to int, k int"), n)
    parts = df.rdd.glom().collect()
    assert len(parts) == n
    for i, part in enumerate(parts):
        assert sorted(r["item"] for r in part) == [i] * 3


def test_few_rows_are_grouped_through_one_shuffle_of_the_partitions_asked(spark):
    """One exchange, into the partitions asked for (not ``spark.sql.shuffle.partitions``), and
    the groups a plain ``groupBy`` finds."""
    df = spark.range(0, 500, numPartitions=7).select(
        (F.col("id") % 6).alias("k"), (F.col("id") % 4).alias("j"), F.col("id").alias("v"))
    got = few_groups(df, ["k", "j"], 3).agg(F.sum("v").alias("s"), F.count("*").alias("n"))
    plan = executed_plan(got)
    exchanges = re.findall(r"Exchange hashpartitioning\(([^)]*)\)", plan)
    assert len(exchanges) == 1 and re.fullmatch(r"k#\d+L?, j#\d+L?, 3", exchanges[0]), plan
    assert got.rdd.getNumPartitions() == 3
    plain = df.groupBy("k", "j").agg(F.sum("v").alias("s"), F.count("*").alias("n"))
    assert sorted(map(tuple, got.collect())) == sorted(map(tuple, plain.collect()))
    assert sum(r["n"] for r in got.collect()) == 500
