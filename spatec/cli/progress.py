"""Terminal display for long runs: stages, rows, matches, and a summary table.

Uses rich on a terminal; plain lines otherwise (logs, CI, tests).
"""
from __future__ import annotations

import sys


class Progress:
    def __init__(self, quiet: bool = False, stream=None):
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.rich = None
        if not quiet and self.stream.isatty():
            from rich.console import Console

            self.rich = Console(file=self.stream)
        self._parts: dict = {}

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

    def partition(self, phrase, n_events, n_matches) -> None:
        c = self._parts.setdefault(phrase, [0, 0, 0])
        c[0] += 1
        c[1] += n_events
        c[2] += n_matches

    def note(self, msg: str) -> None:
        self._print(msg)

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
