"""The task log (``spark.spatec.taskLog``): a JSON lines file every task appends a line to,
one per split it typed (``stage: ingest``) and per item it matched (``stage: match``, with
the phrase, the events read and the composites found); default off.

It is for one machine: the path is the executors' own, so a cluster's tasks would each write
their machine's file. The command line turns it on for a local master (``_logs/tasks.jsonl``)
and follows it for its progress display (:class:`~spatec.cli.progress.TaskLogTail`); on a
cluster, Spark's own UI and event log tell the same story."""
from __future__ import annotations

import json
import os
import resource
import time


class TaskClock:
    """In a task: the wall time of its steps (:meth:`step`), its CPU and kernel time, and its
    process's peak resident memory so far (``peak_mb``: a Python worker runs many tasks),
    appended as one JSON line to the task log (:meth:`done`); nothing without a log."""

    def __init__(self, log: str | None, stage: str, **what):
        self.log, self.line = log, {"stage": stage, **what}
        if log:
            self._usage = resource.getrusage(resource.RUSAGE_SELF)
            self._start = self._at = time.perf_counter()
            self.line.update(pid=os.getpid(), start=time.time(), seconds={})

    def step(self, name: str) -> None:
        if self.log:
            now = time.perf_counter()
            self.line["seconds"][name] = round(now - self._at, 6)
            self._at = now

    def done(self, **more) -> None:
        if not self.log:
            return
        u = resource.getrusage(resource.RUSAGE_SELF)
        self.line.update(more, total_s=round(time.perf_counter() - self._start, 6),
                         cpu_s=round(u.ru_utime + u.ru_stime - self._usage.ru_utime - self._usage.ru_stime, 6),
                         kernel_s=round(u.ru_stime - self._usage.ru_stime, 6),
                         peak_mb=round(u.ru_maxrss / 1024, 1))
        data = (json.dumps(self.line) + "\n").encode()
        try:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError:
            return              # (a log that cannot be written loses the line, not the run)
        try:
            os.write(fd, data)          # one write in append mode: lines of tasks do not mix
        finally:
            os.close(fd)
