"""The Python API: compile a program once, replay it from an existing SparkSession.

>>> import spatec
>>> prog = spatec.compile("examples/silent/silent.spatec")     # doctest: +SKIP
>>> out = prog.replay(spark, {"BusGPS": positions_df})         # doctest: +SKIP
>>> out["Silent"].show()                                        # doctest: +SKIP
"""
from __future__ import annotations

from spatec.plan.program import Compiled, compile_program
from spatec.runtime.rows import time_fields

#: Spark SQL type of each emit field's type word
SPARK_TYPES = {"str": "string", "bool": "boolean", "time": "timestamp"}


class Program:
    """A checked, planned program: its phrases replayed on Spark or in-process."""

    def __init__(self, compiled: Compiled):
        self.compiled = compiled

    @property
    def phrases(self) -> list[str]:
        return [p.name for p in self.compiled.plans]

    def schema(self, phrase: str) -> str:
        """The output schema of one phrase, as a Spark DDL string."""
        plan = self.compiled.plan(phrase)
        emit = ", ".join(f"`{n}` {SPARK_TYPES.get(t, 'double')}" for n, t in plan.schema)
        fixed = "phrase string, id string, lo timestamp, hi timestamp, hull string, events map<string,string>"
        return fixed + (", " + emit if emit else "")

    def events(self, frames: dict) -> dict:
        """Input Spark (or pandas) DataFrames by type → canonical event frames, through the
        same canonicalisation as the file readers (records that would be rejected are dropped)."""
        import pyarrow as pa

        from spatec.events.canonical import to_events
        from spatec.events.raw import RawBatch

        program = self.compiled.program
        out = {}
        for type_name, df in frames.items():
            if type_name not in program.events:
                known = ", ".join(sorted(program.events))
                raise KeyError(f"the program declares no event type {type_name} (declared: {known})")
            if hasattr(df, "toArrow"):
                table = df.toArrow()
            else:
                table = pa.Table.from_pandas(df, preserve_index=False)
            batch = RawBatch.of(f"<{type_name} DataFrame>", table)
            res = to_events([batch], program.events[type_name], tz=program.timezone)
            out[type_name] = res.events
        return out

    def replay(self, spark, frames: dict, crs: str | None = None, phrases=None) -> dict:
        """Run the phrases over Spark DataFrames by event type; one Spark DataFrame per
        phrase, with the columns of the output files (lo/hi timestamps, events a map,
        hull WKT, then the emit fields)."""
        from pyspark.sql import functions as F

        from spatec.runners.spark.batch import raw_outputs

        raw, _crs = raw_outputs(spark, self.compiled, self.events(frames), crs, phrases)
        out = {}
        for name, df in raw.items():
            plan = self.compiled.plan(name)
            emit_schema = ", ".join(f"`{n}` {'long' if t == 'time' else SPARK_TYPES.get(t, 'double')}"
                                    for n, t in plan.schema) or "_none string"
            parsed = F.from_json("emit", emit_schema)
            cols = [F.col("phrase"), F.col("id"), F.timestamp_micros("lo").alias("lo"),
                    F.timestamp_micros("hi").alias("hi"), F.col("hull"),
                    F.from_json("events", "map<string,string>").alias("events")]
            times = time_fields(plan)
            for n, _t in plan.schema:
                c = parsed.getField(n)
                cols.append((F.timestamp_micros(c) if n in times else c).alias(n))
            out[name] = df.select(*cols)
        return out

    def replay_local(self, frames: dict, crs: str | None = None, phrases=None) -> dict:
        """The same, in-process (the reference runner): pandas frames of output rows."""
        from spatec.runners.local import replay_frames

        return replay_frames(self.compiled, self.events(frames), crs=crs, phrases=phrases).frames


def compile(path, text: str | None = None) -> Program:  # noqa: A001 - the API's verb
    """Parse, check and plan a ``.spatec`` program (``CheckError`` lists every problem)."""
    return Program(compile_program(path, text))
