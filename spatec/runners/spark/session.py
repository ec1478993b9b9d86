"""The SparkSession spatec runs on: local by default, any master by URL.

One place decides the settings every spatec job needs (UTC session time,
Arrow transfer, the spatial engine for leaf space patterns, Sedona's jar), so
the CLI, the Python API and the tests get the same behaviour.

Spark's web UI is off and the driver listens on 127.0.0.1 only, unless the
master is on another machine (its executors must reach the driver) or the
settings given say otherwise: a replay on a laptop opens no port to the network.
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from urllib.parse import urlparse

ENGINE_KEY = "spark.spatec.spatial.engine"

#: Where scripts/setup_jars.sh puts the Java libraries of scripts/jars.lock (the
#: environment's ``SPATEC_JARS`` names another folder).
JARS = Path(__file__).resolve().parents[3] / "jars"

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")

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


def jars_dir() -> Path:
    return Path(os.environ.get("SPATEC_JARS") or JARS)


def sedona_jar() -> str | None:
    """The path of Sedona's shaded Spark jar fetched by ``scripts/setup.sh``, None when absent."""
    found = sorted(jars_dir().glob("sedona-spark-shaded-*.jar"))
    return str(found[-1]) if found else None


def sedona_missing() -> str | None:
    """Why Sedona's Spark jar is not there (None: it is): what ``scripts/setup_jars.sh``
    wrote when Maven could not fetch it, or that setup has not run."""
    if sedona_jar() is not None:
        return None
    note = jars_dir() / "UNAVAILABLE"
    if note.exists():
        return note.read_text().strip()
    return f"Sedona's Spark jar is not in {jars_dir()}: run scripts/setup.sh (it fetches it with Maven)"


def local_master(master: str) -> bool:
    """Whether the master runs its executors on this machine (``local[...]``, or a
    cluster manager on the loopback interface)."""
    if master.startswith("local"):
        return True
    host = urlparse(master.split(",")[0]).hostname or ""
    return host in LOOPBACK


def network_settings(master: str) -> dict:
    """The UI off, and with a master on this machine the driver bound to 127.0.0.1."""
    out = {"spark.ui.enabled": "false"}
    if local_master(master):
        out.update({"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"})
    return out


#: The JVM of a ``local`` master, which runs the executor too: its just-in-time compiler's
#: first tier only. Spark's Java code there moves small rows between spatec's Python tasks,
#: and the second tier's compiling cost more than it saved (4 bus-days, three phrases: the
#: JVM's CPU 16.8-18.0 -> 8.3 s in a session's first replay, 7.3-8.5 -> 4.4-5.7 s in the next).
#: A cluster's executors keep the JVM's default; ``conf`` may set its own options.
LOCAL_JVM = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}

#: The local JVM's pages of Spark's own memory (``spark.buffer.pageSize``), for an aggregate's
#: hash map, a sort's buffer: 4 MB. Spark's default is the executor's memory over its cores and
#: 16, at most 64 MB — 64 MB for a local session of 2 GB or more — and each page is a new array
#: on the JVM's heap, so a session's first tasks grow the heap by 64 MB each. A virtual machine
#: whose host takes back the memory its guest leaves free pays for every page touched afresh
#: (here ~2.5 s of kernel time a GiB; the same GiB touched again costs 0.1 s). Measured (4
#: bus-days, three phrases, local[2], two interleaved rounds, a first and a warm replay each):
#: first replays 16.4 / 17.9 s -> 13.6 / 14.0 s, their kernel CPU 9.0 / 9.3 -> 6.0 / 5.3 s; warm
#: replays 11.7 / 13.6 -> 11.6 / 12.5 s. With 4 MB pages a task can hold 8,192 x 4 MB = 32 GB.
LOCAL_PAGES = {"spark.buffer.pageSize": "4m"}

#: Where Linux says when a process gets transparent huge pages (``[madvise]``: when it asks).
THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"
#: The local JVM's heap in transparent huge pages, where the kernel gives them on request:
#: in 4 kB pages it faulted in 150,000-320,000 pages in a session's first replay (4 bus-days,
#: three phrases, a 2-core VM), 11,000-15,000 in huge pages. One interleaved harness (two
#: rounds, a first and two warm replays each, ``/proc/stat``): the warm replays' kernel CPU
#: 9.7-12.8 s -> 4.2-6.2 s, their time 26.3-39.9 s -> 23.5-26.6 s; a second one, with the
#: Parquet reading of :func:`spatec.exec.splits.rows_of` too, within the machine's spread
#: (warm means 24.8 -> 23.6 s). (Python's allocator on malloc, ``PYTHONMALLOC=malloc``, cut
#: the workers' faults tenfold but not their time: not set.)
THP_JVM = "-XX:+UseTransparentHugePages"


def thp_on_request(mode_file: str = THP_MODE) -> bool:
    """Whether the kernel gives transparent huge pages to a process that asks for them
    (``madvise``; with ``always`` every process has them, and with ``never`` or elsewhere
    than Linux the JVM would print a warning for the option)."""
    try:
        with open(mode_file) as f:
            return "[madvise]" in f.read()
    except OSError:
        return False


def jvm_settings(master: str, mode_file: str = THP_MODE) -> dict:
    """:data:`LOCAL_JVM` and :data:`LOCAL_PAGES` for a ``local`` master (with :data:`THP_JVM`
    where :func:`thp_on_request`), nothing for a cluster's."""
    if not master.startswith("local"):
        return {}
    out = {**LOCAL_JVM, **LOCAL_PAGES}
    if thp_on_request(mode_file):
        key = "spark.driver.extraJavaOptions"
        out[key] = f"{out[key]} {THP_JVM}"
    return out


def with_jar(conf: dict, jar: str | None) -> dict:
    """``conf`` with ``jar`` added to ``spark.jars`` (unless Sedona is configured already)."""
    if jar is None or _sedona_jars(conf):
        return conf
    jars = [j for j in str(conf.get("spark.jars", "")).split(",") if j.strip()]
    return {**conf, "spark.jars": ",".join(jars + [jar])}


def get_or_create(master: str | None = None, conf: dict | None = None, app_name: str = "spatec",
                  log_dir=None):
    """A SparkSession for spatec jobs (the active one is reused, with its settings).

    ``master`` defaults to ``local[*]``; ``conf`` overrides :data:`DEFAULTS`,
    :func:`network_settings` and :func:`jvm_settings`. Sedona's jar (:func:`sedona_jar`) goes on
    ``spark.jars``; its functions are registered (``SedonaContext.create``) when a
    Sedona join is first planned (:func:`spatec.runners.spark.sedona.sedona_session`),
    not here: a job without one does not pay for it. :data:`ENGINE_KEY` is
    ``sedona-spark`` when Sedona's jar is there, else ``sedonadb`` (in-process, in
    the Python workers).

    ``log_dir``: a JVM started here writes everything it prints (Spark's log lines, the
    JVM's warnings, the Python workers' stderr) to ``log_dir/spark.log`` instead of the
    terminal (:func:`logging_to`), and keeps Spark's warnings there.
    """
    from pyspark.sql import SparkSession

    quiet_python_loggers()
    conf = dict(conf or {})
    # the Python workers must run the driver's interpreter (the venv that has spatec)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or "local[*]"
    b = SparkSession.builder.appName(app_name).master(master)
    # executors (also on a standalone cluster on this machine) run the same interpreter
    settings = {**DEFAULTS, **network_settings(master), **jvm_settings(master), "spark.pyspark.python": sys.executable,
                **conf}
    settings = with_jar(settings, sedona_jar())
    settings.setdefault(ENGINE_KEY, "sedona-spark" if _sedona_jars(settings) else "sedonadb")
    for k, v in settings.items():
        b = b.config(k, v)
    if log_dir is not None and SparkSession.getActiveSession() is None:
        with logging_to(log_dir), watched_start():
            spark = b.getOrCreate()
    else:
        with watched_start():
            spark = b.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    if spark.conf.get(ENGINE_KEY, None) is None:
        spark.conf.set(ENGINE_KEY, settings[ENGINE_KEY])
    return spark


@contextlib.contextmanager
def watched_start():
    """Spark's JVM started so that it never outlives this process: launched (by pyspark's
    ``launch_gateway``) with the kernel's parent-death signal set (SIGTERM when the thread that
    started it ends: only from the main thread, which ends with the process), and killed at
    once if the start is interrupted (Ctrl-C while the JVM starts: it would otherwise run on,
    its stdin watch not started yet). Once the SparkContext exists, pyspark's own SIGINT handler
    takes a Ctrl-C and the start fails with a Py4J error instead of ``KeyboardInterrupt``: a
    start that fails after a SIGINT (seen on Python's wakeup fd, whoever's handler ran) still
    ends as interrupted, not with that error."""
    import signal
    import threading

    import pyspark.java_gateway as jg

    launched: list = []
    real = jg.Popen
    main = threading.current_thread() is threading.main_thread()
    # every signal that comes meanwhile, whoever's handler takes it (pyspark's context sets one
    # of its own for SIGINT), is written to this pipe by Python's C handler
    seen_r = seen_w = None
    old_wakeup = -1
    if main:
        seen_r, seen_w = os.pipe()
        os.set_blocking(seen_w, False)
        os.set_blocking(seen_r, False)
        old_wakeup = signal.set_wakeup_fd(seen_w, warn_on_full_buffer=False)

    def interrupted() -> bool:
        if seen_r is None:
            return False
        try:
            return signal.SIGINT in os.read(seen_r, 4096)
        except BlockingIOError:
            return False

    def popen(cmd, **kw):
        before = kw.get("preexec_fn")

        def preexec():
            if before is not None:
                before()
            if main:
                _die_with_parent()

        kw["preexec_fn"] = preexec
        proc = real(cmd, **kw)
        launched.append(proc)
        return proc

    jg.Popen = popen
    try:
        yield launched
    except BaseException:
        for proc in launched:
            _end(proc)
        if interrupted():
            raise KeyboardInterrupt from None
        raise
    finally:
        jg.Popen = real
        if seen_r is not None:
            signal.set_wakeup_fd(old_wakeup)
            os.close(seen_r)
            os.close(seen_w)


def _die_with_parent() -> None:
    """In a child before it runs its program: SIGTERM when its parent thread ends (Linux)."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)       # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _end(proc) -> None:
    """End a JVM this process launched: SIGTERM (its shutdown hooks clean up), SIGKILL after 5 s."""
    import subprocess

    if proc.poll() is not None:
        return
    try:
        proc.terminate()
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
    except OSError:
        pass


#: PySpark's own Python loggers, which print a failed query's JSON (a Java stack trace) on
#: standard error: spatec reports the failure in one line (:mod:`spatec.runners.spark.errors`).
PYSPARK_LOGGERS = ("DataFrameQueryContextLogger", "PySparkLogger", "py4j", "py4j.java_gateway", "py4j.clientserver")


def quiet_python_loggers() -> None:
    import logging

    for name in PYSPARK_LOGGERS:
        log = logging.getLogger(name)
        log.setLevel(logging.CRITICAL + 1)
        log.propagate = False


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


def on_this_machine(spark) -> bool:
    """Whether Spark's executors run on this machine (a ``local`` master, or a cluster manager
    on the loopback interface): they see its files."""
    return local_master(spark.sparkContext.master)
