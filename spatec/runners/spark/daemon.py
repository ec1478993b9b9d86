"""The Python worker daemon of spatec's Spark sessions (``spark.python.daemon.module``).

Spark puts its own archives first on its Python workers' path: ``pyspark.zip``
and py4j's zip from ``$SPARK_HOME/python/lib``, and Spark's core jar. Where
pyspark is an installed package (pip, as in spatec's environment) they are
copies of it, and on Python 3.11 they cost every task:

- each task's ``importlib.invalidate_caches()`` (pyspark's
  ``setup_spark_files``) re-reads the directory of every zip on the path — the
  3 MB pyspark.zip and the jar's thousands of entries;
- a module imported from a zip has no bytecode cache, so every new worker
  compiles what it imports from source.

Profiled with py-spy on a live micro-batch: about a fifth of the Python
workers' time. Six trivial ``mapInPandas`` tasks on two cores took 1.2–1.4 s
with them on the path, 0.4–0.5 s without (issue 4's note).

This daemon removes those entries when the same packages import from the
environment, then runs pyspark's own daemon unchanged. An archive that is not
a copy of an installed package (``--py-files``, a cluster's own layout) is
left alone.
"""
from __future__ import annotations

import os
import sys


def _spark_archive(entry: str) -> bool:
    name = os.path.basename(entry)
    return (name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith(".zip"))
            or (name.startswith("spark-core") and name.endswith(".jar")))


def clean_path(path: list) -> list:
    """``path`` without Spark's archives, if pyspark and py4j import without them."""
    kept = [p for p in path if not _spark_archive(p)]
    if len(kept) == len(path):
        return path
    import importlib.machinery

    for pkg in ("pyspark", "py4j"):
        if importlib.machinery.PathFinder.find_spec(pkg, kept) is None:
            return path
    return kept


def main() -> None:
    kept = clean_path(sys.path)
    if kept is not sys.path:
        for p in set(sys.path) - set(kept):
            sys.path_importer_cache.pop(p, None)
        sys.path[:] = kept
        if os.environ.get("PYTHONPATH"):
            os.environ["PYTHONPATH"] = os.pathsep.join(
                p for p in os.environ["PYTHONPATH"].split(os.pathsep) if not _spark_archive(p))
    from spatec.runners.memory import keep_freed, keep_freed_malloc

    keep_freed()            # (before pyarrow loads: what a task frees stays for its next arrays)
    keep_freed_malloc()     # (the workers forked from here inherit it)
    preload()
    import gc

    # what the daemon loaded lives as long as its workers: kept out of their collections
    # (a full collection walked every module's objects: 2-4 % of a replay's samples), and
    # their pages are not written by the collector, so the forked workers share them
    gc.freeze()
    from pyspark import daemon

    daemon.manager()


#: What every spatec task imports, loaded once in the daemon: the workers it forks inherit
#: them instead of each importing them anew (a second or two of a worker's first task).
PRELOAD = ("numpy", "pandas", "pyarrow", "pyarrow.compute", "pyarrow.parquet", "shapely", "pyproj",
           "spatec.exec.tasks", "spatec.exec.prefilter", "spatec.runtime.batch", "spatec.vector.fastpath",
           "spatec.vector.chains", "spatec.vector.runs", "spatec.sinks.files",
           # SedonaDB, the in-task pre-filter's engine for many candidates: ~2 s to import, and
           # its runtime starts only at connect (in the worker, after the fork)
           "sedonadb", "spatec.spatial.engines")


def preload() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:         # (a cluster's worker without one of them: its task will say)
            pass


if __name__ == "__main__":
    main()
