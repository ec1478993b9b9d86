"""The Python API: compile a program once, replay it in-process or on Spark.

Results come as GeoPandas expects them: one :class:`geopandas.GeoDataFrame`
per phrase, ``hull`` its geometry (EPSG:4326, lon/lat), ``lo``, ``hi`` and
the emit fields of type ``time`` as time-zone-aware datetimes (the program's
zone unless ``tz`` says otherwise), durations in seconds as in the files. The
local and the Spark runner give the same frames. Inputs are, by event type,
pandas or Spark DataFrames or paths of files the CLI reads; a row the program
cannot use is never dropped silently: it is in ``.rejects`` with its reason,
and ``read == used + rejected``.

>>> import spatec, pandas as pd
>>> prog = spatec.compile("examples/stuck/stuck.spatec")
>>> prog.phrases
['Stuck', 'StuckOnRoad']
>>> fixes = pd.DataFrame({"vehicle": "V1", "line": "4", "operator": "SCCM", "direction": "INBOUND",
...                       "lon": 0.1300, "lat": 52.2000,
...                       "ts": ["2019-10-01T09:00:00+01:00", "2019-10-01T09:00:20+01:00",
...                              "2019-10-01T09:00:40+01:00", "2019-10-01T09:01:00+01:00",
...                              "yesterday"]})
>>> out = prog.replay_local({"BusGPS": fixes}, phrases=["Stuck"])
>>> stuck = out["Stuck"]
>>> type(stuck).__name__, stuck.geometry.name, str(stuck.crs)
('GeoDataFrame', 'hull', 'EPSG:4326')
>>> stuck[["vehicle", "lo", "until"]].to_dict("records")      # doctest: +NORMALIZE_WHITESPACE
[{'vehicle': 'V1', 'lo': Timestamp('2019-10-01 08:59:30+0100', tz='Europe/London'),
  'until': Timestamp('2019-10-01 09:01:00+0100', tz='Europe/London')}]
>>> out.read, out.used, out.rejected
(5, 4, 1)
>>> out.rejects[["type", "row", "reason"]].to_dict("records")
[{'type': 'BusGPS', 'row': 5, 'reason': 'ts: cannot parse "yesterday" as a time'}]
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

import pandas as pd

from spatec.plan.program import Compiled, compile_program
from spatec.runtime.rows import STD_COLUMNS, time_fields

#: Spark SQL type of each emit field's type word
SPARK_TYPES = {"str": "string", "bool": "boolean", "time": "timestamp"}
#: The coordinate reference system of every hull: lon/lat (OGC:CRS84 axis order).
CRS = "EPSG:4326"


class _Answer(Mapping):
    """Phrase → frame, with the input's ``rejects`` and counts (``inputs``: type, input,
    read, used, rejected per input; ``read``/``used``/``rejected`` summed over them)."""

    def __init__(self, frames: dict, rejects: pd.DataFrame, counts: list):
        self._frames, self.rejects, self.inputs = frames, rejects, counts

    def __getitem__(self, phrase):
        return self._frames[phrase]

    def __iter__(self):
        return iter(self._frames)

    def __len__(self):
        return len(self._frames)

    @property
    def read(self) -> int:
        return sum(c[2] for c in self.inputs)

    @property
    def used(self) -> int:
        return sum(c[3] for c in self.inputs)

    @property
    def rejected(self) -> int:
        return sum(c[4] for c in self.inputs)


class Results(_Answer):
    """A replay's composites: phrase → :class:`geopandas.GeoDataFrame` (in ``(lo, hi, id)``
    order), and what became of the input: ``read``, ``used``, ``rejected`` (counts, summed
    over the inputs) and ``rejects`` (a frame of the rows not used: ``type``, ``file``,
    ``row``, ``reason``, ``record``); ``crs`` is the metric CRS distances were measured in."""

    def __init__(self, frames: dict, rejects: pd.DataFrame, counts: list, crs: str):
        super().__init__(frames, rejects, counts)
        self.crs = crs

    def __repr__(self):
        phrases = ", ".join(f"{p}: {len(df):,}" for p, df in self._frames.items())
        return f"<spatec Results {{{phrases}}}; {self.read:,} rows read = {self.used:,} used + {self.rejected:,} rejected>"


class SparkResults(_Answer):
    """:meth:`Program.replay`'s answer: phrase → lazy Spark DataFrame, with the input's
    ``rejects`` and counts as in :class:`Results`."""


def geodataframe(df: pd.DataFrame, plan, tz: str = "UTC"):
    """A runner's output rows (``lo``/``hi``/time fields as int µs, ``hull`` WKT) as a
    GeoDataFrame: ``hull`` the geometry (:data:`CRS`), times tz-aware in ``tz``."""
    import geopandas as gpd
    import shapely

    out = pd.DataFrame(index=pd.RangeIndex(len(df)))
    times = {"lo", "hi"} | time_fields(plan)
    columns = list(STD_COLUMNS) + [n for n, _ in plan.schema]
    for c in columns:
        s = df[c] if c in df.columns else pd.Series([None] * len(df), dtype=object)
        s = s.reset_index(drop=True)
        if c in times:
            out[c] = _datetimes(s, tz)
        elif c == "hull":
            wkt = s.astype(object).where(s.notna(), None).to_numpy(dtype=object)
            out[c] = gpd.GeoSeries(shapely.from_wkt(wkt), crs=CRS)
        elif c == "events":
            out[c] = [dict(v) if isinstance(v, dict) else {} for v in s.tolist()]
        else:
            out[c] = s
    return gpd.GeoDataFrame(out, geometry="hull", crs=CRS)


def _datetimes(s: pd.Series, tz: str) -> pd.Series:
    us = pd.array(pd.to_numeric(s, errors="coerce"), dtype="Int64")
    stamps = pd.to_datetime(us.to_numpy(dtype="float64", na_value=float("nan")), unit="us", utc=True) \
        if us.isna().any() else pd.to_datetime(us.to_numpy(dtype="int64"), unit="us", utc=True)
    return pd.Series(stamps.as_unit("us")).dt.tz_convert(tz)


class Program:
    """A checked, planned program: its phrases replayed on Spark or in-process."""

    def __init__(self, compiled: Compiled):
        self.compiled = compiled

    @property
    def phrases(self) -> list[str]:
        return [p.name for p in self.compiled.plans]

    @property
    def timezone(self) -> str:
        return self.compiled.program.timezone

    def schema(self, phrase: str) -> str:
        """The output schema of one phrase, as a Spark DDL string."""
        plan = self.compiled.plan(phrase)
        emit = ", ".join(f"`{n}` {SPARK_TYPES.get(t, 'double')}" for n, t in plan.schema)
        fixed = "phrase string, id string, lo timestamp, hi timestamp, hull string, events map<string,string>"
        return fixed + (", " + emit if emit else "")

    def _tz(self, tz: str | None) -> str:
        if tz is None or str(tz).lower() == "program":
            return self.timezone
        return tz

    def read(self, inputs: dict):
        """Inputs by event type (pandas or Spark DataFrames, or paths of files) → canonical
        event frames by type, the rejects (one frame) and the counts of each input, through
        the same readers, rejects and duplicate rule as the CLI."""
        from spatec.exec.executor import replay  # noqa: F401  (the same steps as a replay's)
        from spatec.exec.inprocess import InProcess

        ctx = self._context(inputs, None, None)
        from spatec.exec.splits import plan_splits

        got = InProcess().ingest(ctx, plan_splits(ctx.program, list(ctx.inputs), ctx.settings.split_rows, 1))
        counts = [(t, p if isinstance(p, (str, os.PathLike)) else f"<{t} DataFrame>", *rest)
                  for t, p, *rest in got.summary.rows]
        return got.events, got.rejected["frame"], counts

    def events(self, frames: dict) -> dict:
        """Inputs by type → canonical event frames (rejects: :meth:`read`)."""
        return self.read(frames)[0]

    def replay_local(self, inputs: dict, crs: str | None = None, phrases=None, tz: str | None = None) -> Results:
        """Every phrase (or ``phrases``) over ``inputs`` in-process (the reference runner):
        :class:`Results`, times in ``tz`` (default: the program's time zone)."""
        from spatec.exec.executor import replay
        from spatec.exec.inprocess import InProcess

        return self._results(replay(self._context(inputs, crs, phrases), InProcess()), tz)

    def replay_spark(self, inputs: dict, spark=None, crs: str | None = None, phrases=None,
                     tz: str | None = None) -> Results:
        """The same on Spark (``spark``: a session, default :func:`~spatec.runners.spark.session.get_or_create`):
        the same :class:`Results`, brought back to the driver."""
        from spatec.exec.executor import replay
        from spatec.runners.spark.batch import context
        from spatec.runners.spark.executor import SparkExecutor
        from spatec.runners.spark.session import get_or_create

        spark = spark or get_or_create()
        self._check(inputs)
        ctx = context(spark, self.compiled, list(inputs.items()), None, None, None, crs, phrases)
        return self._results(replay(ctx, SparkExecutor(spark)), tz)

    def _check(self, inputs: dict) -> None:
        program = self.compiled.program
        for type_name in inputs:
            if type_name not in program.events:
                known = ", ".join(sorted(program.events))
                raise KeyError(f"the program declares no event type {type_name} (declared: {known})")

    def _context(self, inputs: dict, crs, phrases):
        from spatec.exec.context import RunContext

        self._check(inputs)
        return RunContext(self.compiled, tuple(inputs.items()), None, None, None, crs,
                          tuple(phrases) if phrases else None)

    def _results(self, res, tz) -> Results:
        from spatec.events.canonical import empty_rejects

        zone = self._tz(tz)
        out = {name: geodataframe(df, self.compiled.plan(name), zone) for name, df in res.frames.items()}
        counts = [tuple(r) for r in (res.ingest.rows if res.ingest is not None else [])]
        counts = [(t, p if isinstance(p, (str, os.PathLike)) else f"<{t} DataFrame>", *rest) for t, p, *rest in counts]
        rejects = res.rejects if res.rejects is not None else empty_rejects()
        return Results(out, rejects, counts, res.crs)

    def replay(self, spark, inputs: dict, crs: str | None = None, phrases=None, out=None) -> SparkResults:
        """Run the phrases over ``inputs`` (Spark or pandas DataFrames, or paths) by event type
        on Spark: one lazy Spark DataFrame per phrase, with the columns of the output files
        (lo/hi timestamps, events a map, hull WKT, then the emit fields), read by Spark from
        the JSON lines parts the executors wrote under ``out`` (a folder every executor and
        the driver can reach; default a temporary one, for a session on this machine), and
        the input's rejects and counts."""
        import tempfile
        from pathlib import Path

        from spatec.exec.executor import replay
        from spatec.runners.spark.batch import context
        from spatec.runners.spark.executor import SparkExecutor

        self._check(inputs)
        folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="spatec-replay-"))
        ctx = context(spark, self.compiled, list(inputs.items()), folder, "jsonl", None, crs, phrases)
        ctx = dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, output="dataset"))
        res = replay(ctx, SparkExecutor(spark))
        frames = {}
        for name, path in res.paths.items():
            frames[name] = spark.read.schema(self.schema(name)).json(str(Path(path) / "*.jsonl")) \
                if any(Path(path).glob("*.jsonl")) \
                else spark.createDataFrame(spark.sparkContext.emptyRDD(), self.schema(name))  # (no task)
        counts = [tuple(r) for r in res.ingest.rows]
        rejects = res.rejects
        if rejects is None:
            from spatec.events.canonical import empty_rejects
            from spatec.events.read import read_reject_files

            rejects = read_reject_files(folder) if (folder / "_rejects").is_dir() else empty_rejects()
        return SparkResults(frames, rejects, counts)


def compile(path, text: str | None = None) -> Program:  # noqa: A001 - the API's verb
    """Parse, check and plan a ``.spatec`` program (``CheckError`` lists every problem)."""
    return Program(compile_program(path, text))
