"""Terminal display for long runs: stages, rows, progress while matching, a summary table.

Uses rich on a terminal (a live progress bar per phrase: groups done, composites
so far, time left); plain lines otherwise (logs, CI, tests), a status line at
most every :attr:`Progress.interval` seconds. ``quiet``: nothing at all (errors
are the CLI's, on standard error).

While a phrase is matched the runners report each group (a partition, or a
Spark task's group of partitions) as it is done: the local runner through
:meth:`Progress.partition`, the Spark runner through its task log, which
:class:`TaskLogTail` follows (every task appends a line per group it matched).
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time


class Progress:
    def __init__(self, quiet: bool = False, stream=None, interval: float = 10.0):
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.interval = interval
        self.rich = None
        if not quiet and self.stream.isatty():
            from rich.console import Console

            self.rich = Console(file=self.stream)
        self._parts: dict = {}
        self._lock = threading.RLock()
        self._totals: dict = {}
        self._bar = None
        self._tasks: dict = {}
        self._started = None
        self._last_line = 0.0
        self._current = None
        self.feeds: list = []      # callables that report what is still unread (TaskLogTail.poll)

    def _print(self, msg: str) -> None:
        if self.quiet:
            return
        if self.rich:
            self.rich.print(msg)
        else:
            print(msg, file=self.stream, flush=True)

    def stage(self, msg: str) -> None:
        self._print(f"[bold]»[/bold] {msg}" if self.rich else f"» {msg}")

    def ingested(self, type_name, path, read, used, rejected) -> None:
        self._print(f"  {type_name}: {read:,} rows read, {used:,} used, {rejected:,} rejected ({path})")

    # ------------------------------------------------------------------ matching

    def matching(self, totals: dict) -> None:
        """Matching begins: ``totals`` is phrase → the events it reads, in the order the
        phrases run (the measure of a phrase's work: time left is estimated from it)."""
        with self._lock:
            self._totals = {p: max(0, int(n)) for p, n in totals.items()}
            self._parts = {p: [0, 0, 0] for p in self._totals}
            self._started = time.monotonic()
            self._last_line = self._started
            if self.quiet or not self.rich:
                return
            from rich.progress import BarColumn, Progress as Bar, TextColumn, TimeRemainingColumn

            self._bar = Bar(TextColumn("  {task.description}"), BarColumn(),
                            TextColumn("{task.fields[groups]:>5,} groups  {task.fields[composites]:>9,} composites"),
                            TimeRemainingColumn(), console=self.rich, transient=False)
            n = len(self._totals)
            for i, (p, total) in enumerate(self._totals.items(), 1):
                self._tasks[p] = self._bar.add_task(f"{p} ({i}/{n})", total=max(total, 1), groups=0, composites=0)
            self._bar.start()

    def partition(self, phrase, n_events, n_matches) -> None:
        """One group of ``phrase`` done: ``n_events`` events read, ``n_matches`` composites found."""
        with self._lock:
            c = self._parts.setdefault(phrase, [0, 0, 0])
            c[0] += 1
            c[1] += n_events
            c[2] += n_matches
            if self.quiet or phrase not in self._totals:
                return
            if self._bar is not None:
                self._bar.update(self._tasks[phrase], completed=min(c[1], self._totals[phrase]),
                                 groups=c[0], composites=c[2])
                return
            if self._current not in (None, phrase):
                self._phrase_line(self._current)
            self._current = phrase
            now = time.monotonic()
            if now - self._last_line >= self.interval:
                self._last_line = now
                self._print(self.status())

    def status(self) -> str:
        """One line: the phrase being matched, its groups and composites so far, time left."""
        with self._lock:
            phrase = self._current or next(iter(self._totals), "")
            names = list(self._totals)
            g, _e, m = self._parts.get(phrase, (0, 0, 0))
            i = names.index(phrase) + 1 if phrase in names else 0
            left = self.time_left()
            when = f", about {_duration(left)} left" if left is not None else ""
            return f"  {phrase} ({i}/{len(names)}): {g:,} groups, {m:,} composites{when}"

    def time_left(self) -> float | None:
        """Seconds left, from the events matched so far and the time they took."""
        with self._lock:
            total = sum(self._totals.values())
            done = sum(min(self._parts.get(p, (0, 0))[1], t) for p, t in self._totals.items())
            if self._started is None or not done or not total:
                return None
            return (time.monotonic() - self._started) * (total - done) / done

    def _phrase_line(self, phrase) -> None:
        g, _e, m = self._parts.get(phrase, (0, 0, 0))
        self._print(f"  {phrase}: {g:,} groups, {m:,} composites")

    def matched(self) -> None:
        """Matching is over: what the feeds still hold is counted first, so the last line gives
        every group (outside the lock: a feed reports through :meth:`partition`)."""
        for feed in list(self.feeds):
            feed()
        with self._lock:
            if self._bar is not None:
                for p, task in self._tasks.items():
                    self._bar.update(task, completed=self._totals[p] or 1)
                self._bar.stop()
                self._bar = None
            elif self._current is not None:
                self._phrase_line(self._current)
            self._current = None

    # ------------------------------------------------------------------ end

    def note(self, msg: str) -> None:
        self._print(msg)

    def warn(self, msg: str) -> None:
        """A warning: shown unless quiet."""
        self._print(f"[yellow]warning:[/yellow] {msg}" if self.rich else f"warning: {msg}")

    def summary(self, result, elapsed: float) -> None:
        if self.quiet:
            return
        ing = getattr(result, "ingest", None)
        paths = getattr(result, "paths", {})
        rows = [(name, result.counts.get(name, 0), str(paths.get(name, ""))) for name in result.frames]
        if self.rich:
            from rich.table import Table

            t = Table(title=f"spatec replay — {elapsed:.1f} s, CRS {result.crs}")
            t.add_column("phrase")
            t.add_column("composites", justify="right")
            t.add_column("output")
            for r in rows:
                t.add_row(r[0], f"{r[1]:,}", r[2])
            self.rich.print(t)
            if ing is not None:
                self.rich.print(f"input: {ing.read:,} rows read = {ing.used:,} used + {ing.rejected:,} rejected")
        else:
            print(f"spatec replay: {elapsed:.1f} s, CRS {result.crs}", file=self.stream)
            for r in rows:
                print(f"  {r[0]}: {r[1]:,} composites -> {r[2]}", file=self.stream)
            if ing is not None:
                print(f"input: {ing.read:,} rows read = {ing.used:,} used + {ing.rejected:,} rejected",
                      file=self.stream)


def _duration(s: float) -> str:
    s = int(round(s))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class TaskLogTail:
    """Follows the Spark runner's task log (``spark.spatec.taskLog``) in a thread while a
    replay runs: each group a task matched becomes :meth:`Progress.partition`. Lines
    already in the file when it starts are not the run's and are skipped."""

    def __init__(self, path, ui: Progress, every: float = 0.5):
        self.path, self.ui, self.every = str(path), ui, every
        self._stop = threading.Event()
        try:
            self._offset = os.path.getsize(self.path)
        except OSError:
            self._offset = 0
        self._rest = b""
        self._poll_lock = threading.Lock()     # the thread's polls and the one matched() asks for
        self._thread = threading.Thread(target=self._run, name="spatec-progress", daemon=True)

    def __enter__(self):
        self.ui.feeds.append(self.poll)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.poll()
        if self.poll in self.ui.feeds:
            self.ui.feeds.remove(self.poll)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.poll()

    def poll(self) -> None:
        with self._poll_lock:
            self._poll()

    def _poll(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return
        self._offset += len(data)
        data = self._rest + data
        *lines, self._rest = data.split(b"\n")
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("stage") == "match" and "phrase" in rec:
                self.ui.partition(rec["phrase"], int(rec.get("events", 0)), int(rec.get("rows", 0)))
