"""Errors of Spark jobs as one line: which step failed, why, and where Spark's log is.

A job spatec runs is wrapped in :func:`spark_step` (on the driver): a task that failed
(a Python error, a Java one), a memory limit, a lost executor or a result too large becomes
a :class:`SparkJobError` naming the step (and so the phrase), the reason in a line, and the
path of Spark's log — never a Java stack trace. An error spatec raises on purpose inside a
task (a file unusable as a whole: :class:`~spatec.errors.DataError`) is marked there
(:func:`in_task`) and raised again on the driver as itself.
"""
from __future__ import annotations

import contextlib
import re

from spatec.errors import DataError, OutputError, SpatecError

#: How a task marks an error spatec raised on purpose (found again in the job's error).
MARK = "SPATEC-ERROR["
_MARKED = re.compile(r"SPATEC-ERROR\[(\w+)\]<<(.*?)>>", re.S)
_KINDS = {"DataError": DataError, "OutputError": OutputError}


class SparkJobError(SpatecError):
    """A Spark job of a replay failed (see the module)."""


@contextlib.contextmanager
def in_task(what: str):
    """In a task: an error spatec raised on purpose, marked so the driver raises it again."""
    try:
        yield
    except SpatecError as e:
        raise RuntimeError(f"{MARK}{type(e).__name__}]<<{e}>>") from None
    except OSError as e:
        if e.errno == 28:       # ENOSPC: a full disk where the task writes
            raise RuntimeError(f"{MARK}OutputError]<<{e.filename or what}: no space left on the device "
                               f"while {what}>>") from None
        raise


@contextlib.contextmanager
def spark_step(step: str, log=None):
    """Run a step's Spark jobs; their failure as one :class:`SparkJobError` (see the module)."""
    try:
        yield
    except SpatecError:
        raise
    except KeyboardInterrupt:
        raise
    except Exception as e:          # noqa: BLE001 (py4j's and pyspark's errors have no common base)
        if not _from_spark(e):
            raise
        text = _text(e)
        marked = _MARKED.search(text)
        if marked:
            raise _KINDS.get(marked.group(1), SpatecError)(marked.group(2).strip()) from None
        where = f"; Spark's log: {log}" if log else ""
        raise SparkJobError(f"{step} failed on Spark: {reason(text)}{where}") from None


def _from_spark(e: BaseException) -> bool:
    mod = type(e).__module__ or ""
    return mod.startswith(("pyspark", "py4j")) or "Py4J" in type(e).__name__


def _text(e: BaseException) -> str:
    parts = [str(e)]
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            parts.append(str(java.toString()))
        except Exception:  # noqa: BLE001 (the JVM may be gone)
            pass
    return "\n".join(parts)


#: Known causes, as a user can act on them.
_CAUSES = (
    (r"OutOfMemoryError", "a task ran out of Java memory: give the executors more (spark.executor.memory) "
                          "or make groups smaller (spark.spatec.bucketRows)"),
    (r"Python worker exited unexpectedly|worker crashed|Connection reset",
     "a Python worker died (often out of memory): give the executors more memory or make groups smaller "
     "(spark.spatec.bucketRows)"),
    (r"ExecutorLostFailure|Executor heartbeat timed out|executor lost",
     "an executor was lost (killed, or out of memory) and the task could not be run again"),
    (r"maxResultSize", "a result was too large for the driver (spark.driver.maxResultSize)"),
    (r"No space left on device", "no space left on a device the job writes to"),
)


def reason(text: str) -> str:
    """The one line that says why a job failed."""
    for pattern, said in _CAUSES:
        if re.search(pattern, text):
            return said
    # a Python error in a task: the line after its traceback's frames ("ValueError: ...")
    python = python_error(text)
    if python:
        return _short(python)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith(("org.", "java.", "py4j.")) or "Exception" in ln:
            m = re.search(r"(?:Exception|Error): (.*)", ln)
            return _short(m.group(1) if m else ln)
    return _short(lines[0] if lines else "unknown error")


def python_error(text: str) -> str | None:
    """The exception line of the first Python traceback in ``text`` (None: there is none)."""
    raw = text.splitlines()
    for i, ln in enumerate(raw):
        if ln.strip().startswith("Traceback (most recent call last)"):
            for nxt in raw[i + 1:]:
                if not nxt.strip() or nxt.startswith((" ", "\t")):
                    continue            # a frame, its source line or its carets
                return nxt.strip()
    return None


def _short(line: str, limit: int = 300) -> str:
    line = re.sub(r"\s+", " ", line)
    return line if len(line) <= limit else line[:limit - 1] + "…"
