"""How a phrase's work is cut and dealt to Spark tasks: how many groups, stretches of
time for phrases local in time, groups dealt to the cores by size, tasks taking each
other's unbegun groups (claims), and the task log."""
from __future__ import annotations

import json
import os
import resource
import time

import pandas as pd

from spatec.plan.nodes import PhrasePlan

#: Setting: the shortest stretch of time (seconds) that a phrase without a key is
#: cut into for Spark (:func:`time_window`); default an hour.
TIME_WINDOW_KEY = "spark.spatec.timeWindow"


TIME_WINDOW = 3600


def time_window(spark, plan: PhrasePlan) -> int | None:
    """Stretches of time (µs) that a phrase without a key can be matched in, apart:
    when every match lies within ``span_bound`` and depends on its own events only
    (no absence, no ``successive``), the matches that start in ``[g W, (g + 1) W)``
    are exactly those among the events that start in ``[g W, (g + 1) W + span]``.
    At least :data:`TIME_WINDOW_KEY` long (an hour: an event starting less than a
    span into a stretch is in the one before too, and few are), and two spans (so
    that no event is in three). None for a phrase with a key, or not so bounded: it
    is one group."""
    if plan.physical.key or not plan.physical.local_in_time:
        return None
    least = int(float(spark.conf.get(TIME_WINDOW_KEY, str(TIME_WINDOW))) * 1_000_000)
    return max(least, 2 * plan.span_bound, 1)


def split_in_time(groups: list, plan: PhrasePlan, cores: int, most: int | None = None) -> list:
    """Groups of a phrase with a key (specs of :func:`merge_stages`) with one or a few keys
    holding much more than their share of the events, each cut into stretches of time
    matched apart, when the phrase is local in time (``plan.physical.local_in_time``): a stretch's spec reports the
    matches that start in it (``own``) from the events that start in it or up to a span
    after (``lo_range``, :func:`staged_fn`). Keys cannot be cut, but their matches can:
    Bunching's lines, one of which held 29% of its bus-day's matching, a core's tail.
    A group of more than one and a half ``share`` is cut into ``ceil(rows / share)``
    stretches of equal time, ``share`` being what :data:`GROUPS_PER_CORE` groups a core
    would hold, and at most ``most`` events (:data:`BUCKET_ROWS_KEY`): a key's events
    grow with the days replayed while the keys do not (Bunching's lines), and a task
    holds its stretch's events, so this bounds a task's memory whatever the input's size
    (Bunching over 16 bus-days: 2.3 GB a worker before)."""
    if not plan.physical.key or not groups or not plan.physical.local_in_time:
        return groups
    share = sum(spec["rows"] for spec in groups) / max(1, cores * GROUPS_PER_CORE)
    if most:
        share = min(share, most)
    span = int(plan.span_bound)
    out = []
    for spec in groups:
        lo0, lo1 = spec.get("lo", (0, 0))
        k = -int(-spec["rows"] // max(share, 1)) if spec["rows"] > 1.5 * share else 1
        k = min(k, (lo1 - lo0) // max(2 * span, 1))         # stretches at least two spans long
        if k < 2 or "own" in spec:
            out.append(spec)
            continue
        cuts = [lo0 + (lo1 + 1 - lo0) * i // k for i in range(k + 1)]
        for t0, t1 in zip(cuts[:-1], cuts[1:]):
            out.append({**spec, "rows": spec["rows"] // k, "own": (t0, t1), "lo_range": (t0, t1 + span)})
    return out


#: Setting: a JSON lines file every task appends its timings to (one line per ingest
#: chunk and per matched group: stage, phrase, item, process, seconds per step, CPU
#: and kernel seconds, rows); default off. For profiling a run: which group is the
#: slowest, how much of a task is matching, writing, or the kernel's.
TASK_LOG_KEY = "spark.spatec.taskLog"


def task_log(spark) -> str | None:
    """The task log's path (:data:`TASK_LOG_KEY`), None when off."""
    path = spark.conf.get(TASK_LOG_KEY, "").strip()
    if not path or path.lower() == "off":
        return None
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return os.path.abspath(path)


class TaskClock:
    """In a task: the wall time of its steps (:meth:`step`), and its CPU and kernel time,
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
                         kernel_s=round(u.ru_stime - self._usage.ru_stime, 6))
        data = (json.dumps(self.line) + "\n").encode()
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, data)          # one write in append mode: lines of tasks do not mix
        finally:
            os.close(fd)


def dealt(spark, sizes: list):
    """Work items of these sizes dealt to the cores (:func:`balance`): a DataFrame of one
    number (column ``g``) per task, in a partition of its own, and the items (positions
    in ``sizes``) that each number stands for. A Python task costs a tenth of a second
    or more to start, so a task works through several items rather than one each."""
    tasks = balance(sizes, max(1, spark.sparkContext.defaultParallelism))
    seeds = spark.range(len(tasks), numPartitions=max(1, len(tasks))).withColumnRenamed("id", "g")
    return seeds, tasks


def items_of(pdf: pd.DataFrame, tasks: list, claims: str | None = None):
    """In a task: the items its seeds (:func:`dealt`) stand for, in the order dealt
    (largest first). With ``claims``, a directory every task sees, then also the items
    dealt to other tasks that none has begun yet, each from the end of its task's list
    (the smallest, which that task would come to last): a task that is done early takes
    work from one still busy, so the stage ends when the work does rather than when the
    task whose groups were slower than their sizes said does (Stuck's bus-day: one core
    was idle 0.4 s of 3.4 s, with groups dealt evenly by events).

    An item is claimed (:func:`claim`) before it is begun; a task skips one another has
    claimed. Items come lazily: each claim is made when the item before it is done. On a
    file system without symbolic links every task does its own items, as without claims."""
    seeds = pdf["g"].tolist()
    for seed in seeds:
        for i in tasks[seed]:
            if claims is not None:
                try:
                    if not claim(claims, i, seed):
                        continue
                except _NoClaims:
                    claims = None
            yield i
    if claims is None or not seeds:
        return
    mine = set(seeds)
    queues = [list(reversed(tasks[s])) for s in range(len(tasks)) if s not in mine]
    while any(queues):
        for q in queues:
            if q:
                i = q.pop(0)
                try:
                    if claim(claims, i, seeds[0]):
                        yield i
                except _NoClaims:
                    return


def ranked_items(pdf: pd.DataFrame, tasks: list, claims: str | None, kinds: list, sizes: list):
    """In a task: the items of a job whose items are of several kinds (a kind each,
    ``kinds``; one job's phrases), taken in the order the driver wants them done rather
    than as dealt: first each kind's smallest item (a probe: what its items cost and
    write), then kind by kind, each kind's items largest first, the kinds in the order of
    the claims directory's :data:`ORDER_FILE` (:func:`write_order`; before it is written,
    as numbered). A kind's items are then all done early (its output can be merged while
    the others' are matched) and the last kind's small items fill the stage's tail.

    Every task takes the first unclaimed item in that order (:func:`claim`; a retry of a
    task redoes the items it claimed); the order file is read again after each item.
    Without claims (no symbolic links), a task does its own items (:func:`dealt`) in that
    order, as :func:`items_of` does."""
    seeds = pdf["g"].tolist()
    if not seeds:
        return
    mine = {i for seed in seeds for i in tasks[seed]}
    probes: dict = {}
    for i in sorted(range(len(kinds)), key=lambda i: (sizes[i], -i)):
        probes.setdefault(kinds[i], i)
    first = [probes[k] for k in sorted(probes)]
    by_kind: dict = {}
    for i in sorted(set(range(len(kinds))) - set(first), key=lambda i: (-sizes[i], i)):
        by_kind.setdefault(kinds[i], []).append(i)
    gone: set = set()          # items done here or claimed by another task
    while True:
        rank = [k for k in (read_order(claims) if claims is not None else []) if k in by_kind]
        order = first + [i for k in rank + sorted(set(by_kind) - set(rank)) for i in by_kind[k]]
        for i in order:
            if i in gone:
                continue
            gone.add(i)
            if claims is not None:
                try:
                    if claim(claims, i, seeds[0]):
                        break
                    continue
                except _NoClaims:
                    claims = None
            if i in mine:
                break
        else:
            return
        yield i


#: The file in a job's claims directory naming the order of its kinds (:func:`ranked_items`).
ORDER_FILE = "order"


def write_order(claims: str, kinds: list) -> None:
    """The driver's order of the kinds (best first), for the tasks of :func:`ranked_items`."""
    tmp = os.path.join(claims, f".{ORDER_FILE}.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(" ".join(str(int(k)) for k in kinds))
    os.replace(tmp, os.path.join(claims, ORDER_FILE))


def read_order(claims: str) -> list:
    """The kinds' order :func:`write_order` wrote, empty before it is written."""
    try:
        with open(os.path.join(claims, ORDER_FILE)) as f:
            return [int(k) for k in f.read().split()]
    except (OSError, ValueError):
        return []


class _NoClaims(Exception):
    """The claims' directory cannot hold a symbolic link."""


def claim(claims: str, item: int, seed: int) -> bool:
    """Whether the task of ``seed`` is to match ``item``: it is the first to claim it, or
    the one that did (a retry of a task that failed after claiming: its items are done
    again, as a task's output is all or nothing). A claim is a symbolic link named after
    the item whose target is the seed, made at once with its content (``symlink`` fails
    when the name exists, also on a shared file system). :class:`_NoClaims` where the
    file system has no symbolic links: no task can claim anything there (they all see
    the one directory), so each does its own items."""
    path = os.path.join(claims, str(int(item)))
    try:
        os.symlink(str(int(seed)), path)
        return True
    except FileExistsError:
        return os.readlink(path) == str(int(seed))
    except OSError as e:
        raise _NoClaims(str(e)) from e


def balance(sizes: list, tasks: int) -> list:
    """Groups (by position) dealt to at most ``tasks`` tasks so that each task's events
    add up about the same (largest first, each to the least loaded task); a task's
    groups largest first. A group's work grows with its events, and the slowest task is
    the stage's time.

    >>> balance([5, 1, 1, 4, 3], 2)
    [[0, 1, 2], [3, 4]]
    >>> balance([1, 2, 3], 1)
    [[2, 1, 0]]
    """
    load = [0] * max(1, min(tasks, len(sizes)))
    dealt: list = [[] for _ in load]
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        k = min(range(len(load)), key=lambda k: (load[k], k))
        load[k] += sizes[i]
        dealt[k].append(i)
    return [d for d in dealt if d]


#: Setting: about how many events one Spark group (one pandas frame in a Python
#: worker) holds; the number of groups is a multiple of the default parallelism.
BUCKET_ROWS_KEY = "spark.spatec.bucketRows"


BUCKET_ROWS = 400_000


#: Groups per core at least: keys differ in size, and several groups a core let
#: :func:`balance` even the tasks out (Bunching's lines: 60/40 with one a core).
GROUPS_PER_CORE = 6


def bucket_count(spark, rows: int) -> int:
    """How many groups a phrase's events are hashed into: enough for every core to
    have :data:`GROUPS_PER_CORE`, and groups of about :data:`BUCKET_ROWS_KEY` events."""
    par = max(1, spark.sparkContext.defaultParallelism)
    per = int(spark.conf.get(BUCKET_ROWS_KEY, str(BUCKET_ROWS)))
    rounds = max(GROUPS_PER_CORE, -(-rows // (par * max(1, per))))
    return par * rounds
