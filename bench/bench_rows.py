"""In-process A/B of the per-composite output work of a Spark match task: the composites'
ids (:meth:`Matches.ids`), their events (:meth:`Matches.event_ids`), the output frame
(:func:`rows_frame`) and the JSON lines / GeoParquet part writers, on Stuck's matches
of the bench's bus-day (``bench_replay.bus_day(1)``).

The matches are captured once, from the match tasks of an in-process streamed replay
(``spatec.runners.serial.replay_streamed``). The old code is another tree's copies of the
modules this bench times (``--old``, default /work/main), loaded beside this tree's under
other names, the tree's own modules swapped in ``sys.modules`` while the old code loads and
runs (so its imports inside functions find the old copies too). Rounds alternate old and
new; each prints best-of-N seconds and new/old ratios, and checks the outputs are equal
(the same ids, the same bytes).

    .venv/bin/python bench/bench_rows.py [--rounds 5] [--old /work/main] [--phrase Stuck]
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

#: the modules whose old copies are loaded (in this order: each after those it imports)
SWAPPED = ["spatec.events.timefmt", "spatec.events.columns", "spatec.vector.vexpr", "spatec.vector.fastpath",
           "spatec.runtime.rows", "spatec.sinks.files"]
#: modules of this tree that the old copies may not have (new helpers): left as they are
EXTRA_NEW = ("spatec.vector.ids", "spatec.sinks.jsontext")


class OldTree:
    """Another tree's copies of :data:`SWAPPED`, loaded as ``old.<name>``."""

    def __init__(self, root: Path):
        import importlib

        self.new = {n: importlib.import_module(n) for n in SWAPPED}
        self.old: dict = {}
        for name in SWAPPED:
            path = root / (name.replace(".", "/") + ".py")
            spec = importlib.util.spec_from_file_location("old." + name, path)
            mod = importlib.util.module_from_spec(spec)
            with self.swapped():
                sys.modules[name] = sys.modules["old." + name] = mod
                spec.loader.exec_module(mod)
            self.old[name] = mod

    @contextlib.contextmanager
    def swapped(self):
        """The old copies in ``sys.modules`` (under the tree's names) meanwhile."""
        saved = {n: sys.modules.get(n) for n in SWAPPED}
        try:
            sys.modules.update({n: m for n, m in self.old.items()})
            yield
        finally:
            sys.modules.update(saved)


def capture(phrase: str):
    """The phrase's matches (their fields) and the output rows' columns fast_rows made of
    them, from the match tasks of a streamed replay of the bus-day (JSON lines parts)."""
    import shutil

    from bench_replay import bus_day
    from spatec.plan.program import compile_program
    from spatec.runners import serial
    from spatec.runtime import batch
    from spatec.vector import fastpath

    got = []
    ids0, rows0 = fastpath.Matches.ids, batch.fast_rows

    def ids(self):
        got.append([(self.fp, self.cols, dict(self.rows), self.lo, self.hi)])
        return ids0(self)

    def fast_rows(*args, **kw):
        rows = rows0(*args, **kw)
        if rows is not None and len(got) and len(got[-1]) == 1:
            got[-1].append(dict(rows.columns))
        return rows

    fastpath.Matches.ids, batch.fast_rows = ids, fast_rows
    out = tempfile.mkdtemp(prefix="bench-rows-")
    try:
        c = compile_program(ROOT / "bench" / "three_phrases.spatec")
        serial.replay_streamed(c, [("BusGPS", str(bus_day(1)))], Path(out), fmt="jsonl", phrases=[phrase])
    finally:
        fastpath.Matches.ids, batch.fast_rows = ids0, rows0
        shutil.rmtree(out, ignore_errors=True)
    return [g for g in got if len(g) == 2], c.timezone if hasattr(c, "timezone") else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--old", default="/work/main")
    ap.add_argument("--phrase", default="Stuck")
    ap.add_argument("--only", default="", help="comma-separated parts: ids,event_ids,frame,jsonl,parquet "
                    "(frame: ids, events and rows_frame; jsonl, parquet: those and the part written)")
    a = ap.parse_args()
    tree = OldTree(Path(a.old))
    t = time.perf_counter()
    got, _ = capture(a.phrase)
    n = sum(len(m[4]) for m, _ in got)
    print(f"captured {n} matches in {len(got)} tasks ({time.perf_counter() - t:.1f} s)", flush=True)

    def matches(side):
        mod = side["spatec.vector.fastpath"]
        return [mod.Matches(m[0], m[1], dict(m[2]), m[3], m[4]) for m, _ in got]

    def ids(side):
        return [m.ids() for m in matches(side)]

    def event_ids(side):
        return [event_ids_of(m) for m in matches(side)]     # (compared as Python values, untimed)

    def event_ids_of(m):
        """as fast_rows asks for them for a part (Arrow where the side can)"""
        try:
            return m.event_ids(arrow=True)
        except TypeError:
            return m.event_ids()

    def frames(side):
        """fast_rows' columns (ids and events made by the side's Matches), then rows_frame"""
        rows = side["spatec.runtime.rows"]
        out = []
        for m, (_, columns) in zip(matches(side), got):
            columns = {**columns, "id": m.ids(), "events": event_ids_of(m)}
            out.append(rows.rows_frame(m.fp.plan, rows.ColumnRows(columns)))
        return out

    def frame(side):
        return frames(side)

    tmp = tempfile.mkdtemp(prefix="bench-rows-w-")

    def written(side, tag, fmt):
        """the whole of a task's rows work: frames(), then the part written"""
        files, rows = side["spatec.sinks.files"], side["spatec.runtime.rows"]
        out = []
        for i, ((m, _), df) in enumerate(zip(got, frames(side))):
            p = os.path.join(tmp, f"{tag}{i}.{fmt}")
            tf = rows.time_fields(m[0].plan)
            keys = files.write_jsonl_part(df, p, tf, None) if fmt == "jsonl" else files.write_parquet_part(df, p, tf)
            out.append((Path(p).read_bytes(), keys))
        return out

    def jsonl(side, tag):
        return written(side, tag, "jsonl")

    def parquet(side, tag):
        return written(side, tag, "parquet")

    parts = {"ids": lambda s, tag: ids(s), "event_ids": lambda s, tag: event_ids(s),
             "frame": lambda s, tag: frame(s), "jsonl": jsonl, "parquet": parquet}
    chosen = [p for p in parts if not a.only or p in a.only.split(",")]
    best = {(p, side): float("inf") for p in chosen for side in ("old", "new")}
    for r in range(a.rounds):
        for p in chosen:
            for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
                ctx = tree.swapped() if side == "old" else contextlib.nullcontext()
                with ctx:
                    mods = tree.old if side == "old" else tree.new
                    t = time.perf_counter()
                    res = parts[p](mods, side)
                    best[(p, side)] = min(best[(p, side)], time.perf_counter() - t)
                if r == 0:
                    if side == "old":
                        ref = res
                    elif p == "frame":
                        for x, y in zip(ref, res):
                            assert list(x.columns) == list(y.columns)
                            for c in x.columns:
                                assert x[c].tolist() == y[c].tolist(), c
                                assert x[c].dtype == y[c].dtype or c == "events", c
                    elif p in ("jsonl", "parquet"):
                        assert [b for b, _ in ref] == [b for b, _ in res], p
                        assert all(k1.equals(k2, check_metadata=True) for (_, k1), (_, k2) in zip(ref, res)), p
                    else:
                        py = [e.to_pylist() if hasattr(e, "to_pylist") else e for e in res]
                        assert [e.to_pylist() if hasattr(e, "to_pylist") else e for e in ref] == py, p
        print(f"round {r + 1}: " + ", ".join(f"{p} {best[(p, 'new')] / best[(p, 'old')]:.3f}" for p in chosen),
              flush=True)
    print(f"best of {a.rounds} (s), {n} composites, uptime: {os.popen('uptime').read().strip()}")
    for p in chosen:
        o, w = best[(p, "old")], best[(p, "new")]
        print(f"  {p:10s} old {o:7.3f}  new {w:7.3f}  new/old {w / o:.3f}  ({1e6 * (o - w) / n:.2f} µs/composite saved)")


if __name__ == "__main__":
    main()
