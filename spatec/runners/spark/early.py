"""A job's items seen finishing while it runs: a phrase's parts of the output file handed
on (to be merged) as soon as its last item is done, rather than when the whole job is.

The tasks of a job that writes parts (:func:`~spatec.runners.spark.match.run_staged` with
``collect="jsonl"`` or ``"parquet"``) mark each item done (:func:`mark_done`: its group,
part and rows, in a file of the job's ``done`` folder, renamed in once whole). The
driver collects the job in a thread and meanwhile watches that folder
(:func:`collect_watching`, :class:`Finished`): a phrase whose items are all marked is
handed on at once, so its merge (the driver writing its output file, mostly waiting on
the disk) runs while the tasks match the other phrases. It also writes the order the
tasks take the phrases in (:func:`~spatec.runners.spark.scheduling.ranked_items`): the
phrase expected to write the most first, so the merge left after the job is the
smallest. Expected from what each phrase's finished items wrote per event.

The job's own result stays what counts: a phrase handed on early whose rows the job
returns otherwise (a retried task that wrote its part elsewhere) is handed on again.
"""
from __future__ import annotations

import json
import os
import threading
from typing import Callable

from spatec.runners.spark.scheduling import write_order

#: Seconds between two looks at the ``done`` folder while the job runs.
POLL = 0.05


def mark_done(done: str, item: int, kind: int, g: int, path: str, n: int) -> None:
    """In a task: ``item`` (of ``kind``) is done; its group ``g``'s part is ``path`` (``n`` rows)."""
    os.makedirs(done, exist_ok=True)
    tmp = os.path.join(done, f".{int(item)}.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump({"kind": int(kind), "g": int(g), "path": path, "n": int(n)}, f)
    os.replace(tmp, os.path.join(done, str(int(item))))


class Finished:
    """The driver's view of a job's ``done`` folder: which items are done, and each kind
    (phrase) whose items are all done, handed to ``complete(kind, rows)`` once (``rows``:
    ``(g, path, n)`` in ``g``'s order). ``kinds``, ``sizes``: each item's kind and events.
    With ``claims``, the order the tasks take the kinds in is written there (most bytes
    expected first, a kind with nothing done yet before the others)."""

    def __init__(self, done: str, kinds: list, sizes: list, complete: Callable[[int, list], None],
                 claims: str | None = None):
        self.done, self.kinds, self.sizes, self.complete, self.claims = done, kinds, sizes, complete, claims
        self.left = {k: sum(1 for x in kinds if x == k) for k in set(kinds)}
        self.events = {k: sum(s for x, s in zip(kinds, sizes) if x == k) for k in self.left}
        self.rows: dict = {k: [] for k in self.left}
        self.wrote = {k: [0, 0] for k in self.left}          # kind -> [bytes, events] of its items done
        self.seen: set = set()
        self.handed: dict = {}
        self.order: list | None = None

    def poll(self) -> None:
        """Take in the items marked since the last look; hand on the kinds now complete."""
        try:
            names = os.listdir(self.done)
        except FileNotFoundError:
            return
        new = [int(n) for n in names if n.isdigit() and int(n) not in self.seen]
        for item in sorted(new):
            try:
                with open(os.path.join(self.done, str(item))) as f:
                    mark = json.load(f)
                size = os.path.getsize(mark["path"])
            except (OSError, ValueError):
                continue                    # (looked at again next time)
            self.seen.add(item)
            k = mark["kind"]
            self.rows[k].append((mark["g"], mark["path"], mark["n"]))
            self.wrote[k][0] += size
            self.wrote[k][1] += self.sizes[item]
            self.left[k] -= 1
        if not new:
            return
        self._reorder()
        for k in sorted(self.left):
            if not self.left[k] and k not in self.handed:
                self.handed[k] = sorted(self.rows[k])
                self.complete(k, self.handed[k])

    def _reorder(self) -> None:
        if self.claims is None:
            return
        open_kinds = [k for k in sorted(self.left) if self.left[k]]

        def expected(k):
            b, e = self.wrote[k]
            return b / e * self.events[k] if e else float("inf")

        order = sorted(open_kinds, key=lambda k: (-expected(k), k))
        if order != self.order:
            self.order = order
            try:
                write_order(self.claims, order)
            except OSError:
                pass                        # (the tasks keep their order)


def collect_watching(spark, frame, finished: Finished | None) -> list:
    """``frame.collect()``, ``finished`` polled meanwhile (in this thread: what it hands on
    runs here) and once more at the end. A session whose tasks run in this process
    (``runs_here``) collects first. An error here cancels the job."""
    if finished is None or getattr(spark, "runs_here", False):
        got = frame.collect()
        if finished is not None:
            finished.poll()
        return got
    box: dict = {}

    def run():
        try:
            box["rows"] = frame.collect()
        except BaseException as e:          # (raised again in the driver's thread)
            box["error"] = e

    thread = threading.Thread(target=run, name="spatec-collect", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(POLL)
            finished.poll()
    except BaseException:
        spark.sparkContext.cancelAllJobs()
        thread.join()
        raise
    if "error" in box:
        raise box["error"]
    return box["rows"]
