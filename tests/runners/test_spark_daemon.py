"""spatec's Python worker daemon: Spark's copies of pyspark leave the workers' path
only when the installed packages can take their place."""
from __future__ import annotations

import os

import pyspark
import pytest

from spatec.runners.spark.daemon import clean_path


def test_spark_archives_leave_the_path_when_pyspark_is_installed():
    site = os.path.dirname(os.path.dirname(pyspark.__file__))
    lib = os.path.join(os.path.dirname(pyspark.__file__), "python", "lib")
    path = [os.path.join(lib, "pyspark.zip"), os.path.join(lib, "py4j-0.10.9.9-src.zip"),
            "/opt/spark/jars/spark-core_2.13-4.0.1.jar", "/work/extra.zip", site]
    assert clean_path(path) == ["/work/extra.zip", site]


def test_nothing_leaves_without_an_installed_pyspark(tmp_path):
    path = [str(tmp_path / "pyspark.zip"), str(tmp_path / "py4j-0.10.9.9-src.zip"), str(tmp_path)]
    assert clean_path(path) is path


def test_workers_run_the_daemon_without_the_archives(spark):
    """In a task: no Spark archive on the path, and pyspark imported from the package."""
    def probe(batches):
        import sys

        import pandas as pd
        import pyspark as p

        from spatec.runners.spark.daemon import _spark_archive

        for _ in batches:
            yield pd.DataFrame({"zips": [sum(_spark_archive(e) for e in sys.path)],
                                "pyspark": [p.__file__]})

    got = spark.range(1, numPartitions=1).mapInPandas(probe, "zips long, pyspark string").collect()[0]
    assert spark.conf.get("spark.python.daemon.module") == "spatec.runners.spark.daemon"
    assert got.zips == 0
    assert got.pyspark == pyspark.__file__


def test_workers_keep_what_arrow_frees(spark):
    """The daemon sets mimalloc's purge delay before pyarrow loads, so every worker it forks
    keeps freed memory (spatec.runners.memory); a value the environment has is kept."""
    from spatec.runners.memory import PURGE_DELAY, keep_freed

    def probe(batches):
        import os

        import pandas as pd
        import pyarrow as pa

        for _ in batches:
            yield pd.DataFrame({"delay": [os.environ.get("MIMALLOC_PURGE_DELAY", "")],
                                "pool": [pa.default_memory_pool().backend_name]})

    got = spark.range(1, numPartitions=1).mapInPandas(probe, "delay string, pool string").collect()[0]
    assert got["delay"] == (os.environ.get("MIMALLOC_PURGE_DELAY") or PURGE_DELAY)
    env = {"MIMALLOC_PURGE_DELAY": "250"}
    keep_freed(env)
    assert env == {"MIMALLOC_PURGE_DELAY": "250"}
    env = {}
    keep_freed(env)
    assert env == {"MIMALLOC_PURGE_DELAY": "-1"}


def test_workers_keep_what_malloc_frees_and_collect_only_their_own_objects(spark):
    """The daemon's workers take large blocks from malloc's heap (none mapped afresh and
    unmapped, spatec.runners.memory.keep_freed_malloc), and what the daemon loaded is frozen
    out of their collections (gc.freeze)."""
    from spatec.runners.memory import mapped_bytes

    if mapped_bytes() is None:
        pytest.skip("this C library has no mallinfo2 (not glibc 2.33+): nothing is set there")

    def probe(batches):
        import gc

        import numpy as np
        import pandas as pd

        from spatec.runners.memory import mapped_bytes

        for _ in batches:
            big = np.ones(64 << 17)            # 64 MB: a block of its own by malloc's defaults
            got = mapped_bytes()
            del big
            yield pd.DataFrame({"mapped": [got], "frozen": [gc.get_freeze_count()]})

    got = spark.range(1, numPartitions=1).mapInPandas(probe, "mapped long, frozen long").collect()[0]
    assert got.mapped < 64 << 20
    assert got.frozen > 10_000
    # (and in a fresh process without it, the same array is mapped on its own; with it, not)
    import subprocess
    import sys

    probe = ("import numpy as np; from spatec.runners import memory as m; {}; "
             "big = np.ones(64 << 17); print(m.mapped_bytes())")
    plain = subprocess.run([sys.executable, "-c", probe.format("pass")], capture_output=True, text=True, check=True)
    kept = subprocess.run([sys.executable, "-c", probe.format("m.keep_freed_malloc()")], capture_output=True,
                          text=True, check=True)
    assert int(plain.stdout) >= 64 << 20 and int(kept.stdout) < 64 << 20
