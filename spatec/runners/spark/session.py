"""The SparkSession spatec runs on: local by default, any master by URL.

One place decides the settings every spatec job needs (UTC session time,
Arrow transfer, the spatial engine for leaf space patterns), so the CLI, the
Python API and the tests get the same behaviour.
"""
from __future__ import annotations

import contextlib
import os
import sys

ENGINE_KEY = "spark.spatec.spatial.engine"

DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    "spark.sql.execution.pythonUDF.arrow.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "2g",
    "spark.executor.memory": "1g",
    "spark.ui.showConsoleProgress": "false",
    # pyspark's daemon without Spark's copies of pyspark on the workers' path (see the module)
    "spark.python.daemon.module": "spatec.runners.spark.daemon",
}


def _sedona_jars(conf: dict) -> bool:
    return "sedona" in str(conf.get("spark.jars.packages", "")).lower() or \
        "sedona" in str(conf.get("spark.jars", "")).lower()


def get_or_create(master: str | None = None, conf: dict | None = None, app_name: str = "spatec",
                  log_dir=None):
    """A SparkSession for spatec jobs (the active one is reused, with its settings).

    ``master`` defaults to ``local[*]``; ``conf`` overrides :data:`DEFAULTS`.
    :data:`ENGINE_KEY` is ``sedona-spark`` when Sedona's jars are configured
    through ``spark.jars.packages``, else ``sedonadb`` (in-process, in the
    Python workers).

    ``log_dir``: a JVM started here writes everything it prints (Spark's log lines, the
    JVM's warnings, the Python workers' stderr) to ``log_dir/spark.log`` instead of the
    terminal (:func:`logging_to`), and keeps Spark's warnings there.
    """
    from pyspark.sql import SparkSession

    conf = dict(conf or {})
    # the Python workers must run the driver's interpreter (the venv that has spatec)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    b = SparkSession.builder.appName(app_name).master(master or "local[*]")
    # executors (also on a standalone cluster on this machine) run the same interpreter
    settings = {**DEFAULTS, "spark.pyspark.python": sys.executable, **conf}
    settings.setdefault(ENGINE_KEY, "sedona-spark" if _sedona_jars(settings) else "sedonadb")
    for k, v in settings.items():
        b = b.config(k, v)
    if log_dir is not None and SparkSession.getActiveSession() is None:
        with logging_to(log_dir):
            spark = b.getOrCreate()
    else:
        spark = b.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    if spark.conf.get(ENGINE_KEY, None) is None:
        spark.conf.set(ENGINE_KEY, settings[ENGINE_KEY])
    return spark


@contextlib.contextmanager
def logging_to(log_dir):
    """Standard error (file descriptor 2) sent to ``log_dir/spark.log`` while the JVM starts:
    the JVM inherits it, so what it and its children print goes there for good, while
    Python's own standard error is given back at once."""
    os.makedirs(log_dir, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(os.path.join(log_dir, "spark.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def spatial_engine(spark) -> str:
    """The configured spatial engine name (see :mod:`spatec.spatial.engines`)."""
    return spark.conf.get(ENGINE_KEY, "sedonadb")
