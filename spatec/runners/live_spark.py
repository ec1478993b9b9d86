"""Live detection on Spark Structured Streaming (``spatec live --runner spark``).

The query::

    spatec_feed source (one per --source)          offsets = poll sequence numbers
      └─ fan-out (mapInPandas): canonical events → run-time events, one row per
         (phrase, key) that reads them, the event pickled
          └─ withWatermark(event time = hi, allowed lateness)
              └─ groupBy(phrase, key).transformWithStateInPandas(LiveProcessor,
                 EventTime; ValueState = the key's pickled RunState; RocksDB)
                  └─ foreachBatch: alerts to the sinks (each id once), late events to
                     ``<out>/late/<TYPE>.jsonl``

**Source.** :class:`FeedDataSource` (``spatec_feed``) is a Python streaming data
source. Its reader lives in one Python process beside the driver for the
query's life: ``latestOffset`` takes what the live source has (up to
``maxPolls`` polls of an HTTP feed, or new files of a directory — the sources
of :mod:`spatec.io.feeds`), ingests it there with the ids seen so far (the same
readers, rejects and duplicate rule as every runner; rejects are written to
``<out>/_rejects/``), and writes each poll's canonical events to its spool as
``<seq>.arrow`` before returning ``seq``: so a restart replays the planned
batch from the spool, and nothing fetched is lost. ``commit`` deletes what
Spark has committed and saves the reader's cursor (ids seen, the live
source's own offset, counters).

**Watermark and late events.** The watermark is declared on ``hi`` and the
column is dropped before the stateful operator: Spark still advances the
watermark but no longer drops rows behind it before the processor sees them
— the processor compares each event with the watermark and hands late ones
to the late output (Spark would drop them silently). Spark's watermark during
a batch is the one computed at the end of the batch before (largest ``hi``
so far less the lateness), which is what the local runner uses to judge
lateness.

**Decisions.** Every call runs :func:`spatec.automata.step.step` with that
watermark. A key whose state waits for a decision registers an event-time
timer just past the watermark, so it is called again whenever the watermark
moves, with or without new data for it.

**End of input** (``until_idle``). The driver flags every source's spool;
each reader then emits an end marker whose event time is ``END_BASE`` plus
the last event time it saw, which drags Spark's watermark past ``END_BASE``;
the timers fire and each key decides with ``final=True`` at the watermark of
the end of input (the last event time, decoded from the watermark: whole
milliseconds, as Spark keeps them), like a batch replay at its end. The query
then stops; its checkpoint is finished (its watermark is past every real time).

**Not supported here** (:class:`~spatec.errors.UnsupportedError`): phrases that
read an event type without the phrase's key (broadcast types: Spark's groups
cannot be handed an event for every key, including keys still to come — use
the local runner).
"""
from __future__ import annotations

import io
import json
import logging
import os
import pickle
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Sequence

import pandas as pd
import pyarrow as pa

from spatec.errors import UnsupportedError

log = logging.getLogger("spatec.live.spark")

SOURCE_NAME = "spatec_feed"
END_BASE = 4_102_444_800_000_000      # µs, 2100-01-01: end markers carry END_BASE + last event time
END_FLAG = "_end"
CURSOR = "_cursor.pkl"
ROWS_SCHEMA = "seq long, arrived double, events binary, last_hi long"
FANOUT_SCHEMA = "phrase string, key string, id string, hi long, arrived double, ev binary"
OUT_SCHEMA = "kind string, phrase string, id string, hi long, arrived double, payload string"
STATE_SCHEMA = "state binary"


# ------------------------------------------------------------------------------ the source

def _range(first: int, last: int):
    """A Spark input partition: spooled polls ``first..last`` (inclusive)."""
    from pyspark.sql.datasource import InputPartition

    return InputPartition((first, last))


def _spool_dir(ck_spool: str, source_url: str) -> Path:
    from spatec.io.feeds import _safe

    return Path(ck_spool) / ("spark-" + _safe(source_url))


def _reader_class():
    from pyspark.sql.datasource import DataSourceStreamReader

    class FeedStreamReader(DataSourceStreamReader):
        """Polls a live source; every poll ingested and spooled before its offset is returned."""

        def __init__(self, options):
            from spatec.io.feeds import open_source, parse_source
            from spatec.runners.common import compile_program

            self.opts = dict(options)
            self.compiled = compile_program(self.opts["program"])
            self.spec = parse_source(self.opts["source"])
            self.decl = self.compiled.program.events[self.spec.type]
            self.dir = _spool_dir(self.opts["spool"], self.opts["source"])
            self.dir.mkdir(parents=True, exist_ok=True)
            self.out = Path(self.opts["out"])
            self.max_polls = int(self.opts.get("maxPolls", "200"))
            self.lateness = int(self.opts.get("lateness", "0"))
            self.src = open_source(self.spec, self.dir / "raw", [a.name for a in self.decl.attrs])
            if hasattr(self.src, "settle"):
                self.src.settle = float(self.opts.get("settle", "2"))
            cur = self._load_cursor()
            self.committed, self.seen, self.counts, self.max_hi = (cur["seq"], cur["seen"], cur["counts"],
                                                                   cur["max_hi"])
            source_offset = cur["source"]
            self.seq = self.committed
            for seq in self._spooled():
                if seq > self.committed:
                    meta = self._read(seq)[1]
                    self.seen.update(meta["ids"])
                    source_offset = meta["source"]
                    self.max_hi = max(self.max_hi, meta["last_hi"])
                    self.seq = seq
            self.src.restore(source_offset)
            self.ended = False

        # -- spool
        def _spooled(self) -> list[int]:
            return sorted(int(p.stem) for p in self.dir.glob("*.arrow") if p.stem.isdigit())

        def _load_cursor(self) -> dict:
            p = self.dir / CURSOR
            if p.exists():
                with open(p, "rb") as f:
                    return pickle.load(f)
            return {"seq": -1, "seen": {}, "counts": Counter(), "max_hi": -(1 << 62), "source": None}

        def _write(self, seq: int, events: pd.DataFrame, arrived: float, meta: dict) -> None:
            table = pa.Table.from_pandas(events, preserve_index=False) if events is not None else pa.table({})
            table = table.replace_schema_metadata({b"spatec": json.dumps(
                {**meta, "arrived": arrived}, default=_jsonable).encode()})
            tmp = self.dir / f".{seq}.tmp"
            with pa.OSFile(str(tmp), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
                w.write_table(table)
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.dir / f"{seq}.arrow")

        def _read(self, seq: int):
            with pa.memory_map(str(self.dir / f"{seq}.arrow")) as m:
                table = pa.ipc.open_file(m).read_all()
            return table, json.loads(table.schema.metadata[b"spatec"])

        # -- Spark's calls
        def initialOffset(self):
            return {"seq": -1}

        def latestOffset(self):
            from spatec.io.canonical import to_events
            from spatec.io.sources import write_rejects

            seen_set = set(self.seen)
            got = 0
            while got < self.max_polls:
                items = self.src.poll()
                if not items:
                    break
                for it in items:
                    res = to_events(it.batches, self.decl, self.compiled.program.timezone, seen_set)
                    for k in ("read", "used", "rejected", "duplicates"):
                        self.counts[k] += getattr(res, k)
                    if res.rejected:
                        write_rejects(res.rejects, self.out, append=True)
                    ids = dict(zip(res.events["_id"].tolist(), res.events["_hi"].tolist()))
                    self.seen.update(ids)
                    last = int(res.events["_hi"].max()) if res.used else self.max_hi
                    self.max_hi = max(self.max_hi, last)
                    self.src.commit([it])
                    self.seq += 1
                    self._write(self.seq, res.events, it.arrived,
                                {"ids": ids, "source": self.src.offset(), "last_hi": self.max_hi, "end": False})
                    self.src.release()
                    got += 1
            if not got and not self.ended and (self.dir / END_FLAG).exists():
                self.ended = True
                self.seq += 1
                self._write(self.seq, None, time.time(), {"ids": {}, "source": self.src.offset(),
                                                          "last_hi": self.max_hi, "end": True})
            return {"seq": self.seq}

        def partitions(self, start, end):
            a, b = int(start["seq"]) + 1, int(end["seq"])
            return [_range(a, b)] if b >= a else []

        def read(self, partition):
            first, last = partition.value
            for seq in range(first, last + 1):
                table, meta = self._read(seq)
                if meta["end"]:
                    yield (seq, meta["arrived"], b"", int(meta["last_hi"]))
                    continue
                if table.num_rows == 0:
                    continue
                sink = io.BytesIO()
                with pa.ipc.new_stream(sink, table.schema) as w:
                    w.write_table(table)
                yield (seq, meta["arrived"], sink.getvalue(), None)

        def commit(self, end):
            seq = int(end["seq"])
            source = self.src.offset()
            for s in self._spooled():
                if s <= seq:
                    (self.dir / f"{s}.arrow").unlink(missing_ok=True)
            self.committed = seq
            keep = self.max_hi - self.lateness - max(self.lateness, 600_000_000)
            self.seen = {i: hi for i, hi in self.seen.items() if hi >= keep}
            cur = {"seq": seq, "seen": self.seen, "counts": self.counts, "max_hi": self.max_hi, "source": source}
            tmp = self.dir / f".{CURSOR}.tmp"
            with open(tmp, "wb") as f:
                pickle.dump(cur, f, protocol=pickle.HIGHEST_PROTOCOL)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.dir / CURSOR)

    return FeedStreamReader


def _jsonable(v):
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    return str(v)


def _data_source_class():
    from pyspark.sql.datasource import DataSource

    class FeedDataSource(DataSource):
        """``spark.readStream.format("spatec_feed")``: options ``program``, ``source`` (TYPE=URL),
        ``spool``, ``out``, ``lateness`` (µs), ``maxPolls``."""

        @classmethod
        def name(cls):
            return SOURCE_NAME

        def schema(self):
            return ROWS_SCHEMA

        def streamReader(self, schema):
            return _reader_class()(self.options)

    return FeedDataSource


# ------------------------------------------------------------------------------ fan-out

def _fanout(compiled, crs: str, phrase_names: Sequence[str]):
    """``mapInPandas`` function: spooled polls → one row per (phrase, key, event)."""
    from spatec.runners.common import phrase_types, to_evs
    from spatec.runners.live_local import _StatePickler
    from spatec.spatial.crs import Projector

    plans = [p for p in compiled.plans if p.name in phrase_names]
    routes = {}
    for p in plans:
        types = phrase_types(p, compiled.program)
        for t in types:
            routes.setdefault(t, []).append(p)

    def dumps(ev) -> bytes:
        b = io.BytesIO()
        _StatePickler(b, protocol=pickle.HIGHEST_PROTOCOL).dump(ev)
        return b.getvalue()

    def fn(batches):
        proj = Projector(crs)
        for pdf in batches:
            out = {c: [] for c in ("phrase", "key", "id", "hi", "arrived", "ev")}
            for blob, arrived, last_hi in zip(pdf["events"], pdf["arrived"], pdf["last_hi"]):
                if last_hi is not None and not pd.isna(last_hi):
                    out["phrase"].append("")
                    out["key"].append("")
                    out["id"].append("")
                    out["hi"].append(END_BASE + int(last_hi))
                    out["arrived"].append(float(arrived))
                    out["ev"].append(b"")
                    continue
                df = pa.ipc.open_stream(blob).read_all().to_pandas()
                for t, part in df.groupby("_type", sort=False):
                    evs = to_evs(part.reset_index(drop=True), compiled.program, proj)
                    for p in routes.get(t, ()):
                        for ev in evs:
                            k = tuple(ev.attrs.get(a) for a in p.key)
                            if any(v is None for v in k):
                                continue
                            out["phrase"].append(p.name)
                            out["key"].append(json.dumps(k, default=str))
                            out["id"].append(ev.id)
                            out["hi"].append(int(ev.hi))
                            out["arrived"].append(float(arrived))
                            out["ev"].append(dumps(ev))
            yield pd.DataFrame(out)

    return fn


# ------------------------------------------------------------------------------ the processor

def _processor(compiled, crs: str, lateness: int):
    from pyspark.sql.streaming import StatefulProcessor

    class LiveProcessor(StatefulProcessor):
        """One (phrase, key): its RunState in a ValueState; ``step`` at Spark's watermark."""

        def init(self, handle):
            self.handle = handle
            self.value = handle.getValueState("run", STATE_SCHEMA)
            self.phrases = None

        def _phrase(self, name):
            if self.phrases is None:
                from spatec.runners.live_local import _Phrase
                from spatec.spatial.crs import Projector

                self.proj = Projector(crs)
                self.phrases = {p.name: _Phrase(p, compiled.program, self.proj) for p in compiled.plans}
            return self.phrases[name]

        def _load(self):
            from spatec.automata.machine import RunState

            if self.value.exists():
                return pickle.loads(self.value.get()[0])
            return RunState()

        def _save(self, rs):
            if rs.size() == 0:
                # an empty state is a fresh one (keyed types only): nothing to keep
                self.value.clear()
                return
            b = io.BytesIO()
            from spatec.runners.live_local import _StatePickler

            _StatePickler(b, protocol=pickle.HIGHEST_PROTOCOL).dump(rs)
            self.value.update((b.getvalue(),))

        def _watermark(self, timer_values):
            from spatec.automata.machine import NEG_INF

            wm = timer_values.getCurrentWatermarkInMs()
            if wm <= 0:
                return NEG_INF, False
            wm_us = wm * 1000
            if wm_us >= END_BASE:
                return wm_us - END_BASE + lateness, True
            return wm_us, False

        def _timer(self, rs, final):
            for t in list(self.handle.listTimers()):
                self.handle.deleteTimer(t)
            if rs.pending and not final:
                wm = self._wm_ms
                self.handle.registerTimer(max(wm, 0) + 1)

        def _run(self, key, evs, arrival, timer_values):
            phrase = key[0]
            if phrase == "":
                return _out_frame({c: [] for c in ("kind", "phrase", "id", "hi", "arrived", "payload")})
            ph = self._phrase(phrase)
            self._wm_ms = timer_values.getCurrentWatermarkInMs()
            wm, final = self._watermark(timer_values)
            rs = self._load()
            rows = {c: [] for c in ("kind", "phrase", "id", "hi", "arrived", "payload")}
            ok = []
            for e in evs:
                if e.hi < wm:
                    _row(rows, "late", phrase, e.id, e.hi, arrival.get(e.id), _late_record(e, wm))
                else:
                    ok.append(e)
            from spatec.automata.step import step
            from spatec.runners.common import event_order, output_row

            ok.sort(key=event_order)
            got, late = step(ph.am, rs, ok, watermark=wm, final=final)
            for e in late:
                _row(rows, "late", phrase, e.id, e.hi, arrival.get(e.id), _late_record(e, wm))
            for c in got:
                row = output_row(ph.am, c, self.proj, rs)
                t = max((arrival[e.id] for e in c.events if e.id in arrival), default=None)
                _row(rows, "alert", phrase, c.id, int(c.hi), t, json.dumps(row, default=str))
            self._save(rs)
            self._timer(rs, final)
            return _out_frame(rows)

        def handleInputRows(self, key, rows, timerValues):
            evs, arrival = [], {}
            for pdf in rows:
                for i, a, b in zip(pdf["id"], pdf["arrived"], pdf["ev"]):
                    if b:
                        evs.append(pickle.loads(b))
                        arrival[i] = float(a)
            yield self._run(key, evs, arrival, timerValues)

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            yield self._run(key, [], {}, timerValues)

        def close(self):
            pass

    return LiveProcessor()


def _out_frame(rows) -> pd.DataFrame:
    import numpy as np

    return pd.DataFrame({
        "kind": pd.Series(rows["kind"], dtype=object), "phrase": pd.Series(rows["phrase"], dtype=object),
        "id": pd.Series(rows["id"], dtype=object), "hi": pd.Series(rows["hi"], dtype="int64"),
        "arrived": pd.Series([np.nan if a is None else a for a in rows["arrived"]], dtype="float64"),
        "payload": pd.Series(rows["payload"], dtype=object)})


def _row(rows, kind, phrase, cid, hi, arrived, payload):
    rows["kind"].append(kind)
    rows["phrase"].append(phrase)
    rows["id"].append(cid)
    rows["hi"].append(int(hi))
    rows["arrived"].append(arrived)
    rows["payload"].append(payload)


def _late_record(e, wm) -> str:
    from spatec.io.timefmt import format_time

    return json.dumps({"_id": e.id, "_source": e.source, "_t": format_time(e.t), "_lo": format_time(e.lo),
                       "_hi": format_time(e.hi), **{k: v for k, v in e.attrs.items()},
                       "watermark": format_time(wm)}, default=str)


# ------------------------------------------------------------------------------ the driver

def check_streamable(compiled, phrases=None) -> list:
    """The plans to run; an :class:`UnsupportedError` for a phrase Spark live cannot run."""
    from spatec.runners.common import keyed_types, phrase_types

    plans = [p for p in compiled.plans if not phrases or p.name in phrases]
    for p in plans:
        types = phrase_types(p, compiled.program)
        broadcast = sorted(types - keyed_types(p, compiled.program, types))
        if p.key and broadcast:
            raise UnsupportedError(f"phrase {p.name} reads {', '.join(broadcast)} (no {'/'.join(p.key)} "
                                   "attribute: broadcast to every key)", "Spark live",
                                   "use --runner local")
    return plans


class SparkLive:
    """A running live query and what its batches delivered."""

    def __init__(self, spark, compiled, sources: Sequence[str], sinks, checkpoint: Path, out: Path,
                 lateness: int, trigger: float = 1.0, crs: str | None = None, phrases=None,
                 max_polls: int = 200, on_batch=None):
        from pyspark.sql import functions as F

        from spatec.io.feeds import parse_source
        from spatec.runners.common import choose_crs, time_fields

        self.spark, self.compiled, self.sinks = spark, compiled, sinks
        self.ck, self.out, self.lateness = Path(checkpoint), Path(out), int(lateness)
        self.plans = check_streamable(compiled, phrases)
        self.time_fields = {p.name: time_fields(p) for p in self.plans}
        self.sources = list(sources)
        self.on_batch = on_batch
        for s in self.sources:
            spec = parse_source(s)
            if spec.type not in compiled.program.events:
                raise UnsupportedError(f"--source {s!r}: no event type {spec.type}", "Spark live")
        crs_file = self.ck / "crs"
        if crs is None and crs_file.exists():
            crs = crs_file.read_text().strip()
        self.crs = crs or compiled.program.crs or choose_crs(compiled.program, {})
        self.ck.mkdir(parents=True, exist_ok=True)
        crs_file.write_text(self.crs + "\n")
        self.counts = Counter()
        self.last_input = time.monotonic()
        self._last_input_batch = None

        spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                       "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
        spark.dataSource.register(_data_source_class())
        streams = []
        for s in self.sources:
            streams.append(spark.readStream.format(SOURCE_NAME)
                           .option("program", os.path.abspath(compiled.program.root))
                           .option("source", s).option("spool", str(self.ck / "spool"))
                           .option("out", str(self.out)).option("lateness", str(self.lateness))
                           .option("maxPolls", str(max_polls)).load())
        raw = streams[0]
        for s in streams[1:]:
            raw = raw.unionByName(s)
        names = [p.name for p in self.plans]
        events = raw.mapInPandas(_fanout(compiled, self.crs, names), FANOUT_SCHEMA)
        # the watermark on hi; hi_ts is dropped again so that Spark does not drop late rows
        # itself before the processor can report them
        events = (events.withColumn("hi_ts", F.timestamp_micros("hi"))
                  .withWatermark("hi_ts", f"{self.lateness // 1000} milliseconds").drop("hi_ts"))
        out = events.groupBy("phrase", "key").transformWithStateInPandas(
            _processor(compiled, self.crs, self.lateness), OUT_SCHEMA, "Append", "EventTime")
        self.query = (out.writeStream.foreachBatch(self._batch)
                      .option("checkpointLocation", str(self.ck / "spark"))
                      .trigger(processingTime=f"{max(trigger, 0):g} seconds")
                      .queryName(f"spatec-live-{os.getpid()}").start())

    def _batch(self, df, batch_id: int) -> None:
        from spatec.io.alert_sinks import alert_json

        rows = [r.asDict() for r in df.collect()]
        alerts, his, trig = {}, {}, {}
        late = []
        for r in rows:
            if r["kind"] == "alert":
                alerts.setdefault(r["phrase"], []).append(json.loads(r["payload"]))
                his[r["id"]] = r["hi"]
                trig[r["id"]] = r["arrived"]
            elif r["kind"] == "late":
                late.append(r)
        delivered = []
        for phrase, rs in alerts.items():
            delivered.extend(alert_json(rs, self.time_fields[phrase]))
        self.counts["alerts"] += len(delivered)
        self.sinks.deliver(delivered, his)
        if late:
            self.counts["late"] += len(late)
            self._write_late(late)
        if self.on_batch is not None:
            self.on_batch(batch_id, delivered, trig)

    def _write_late(self, late) -> None:
        by_type: dict = {}
        for r in late:
            by_type.setdefault(r["id"].split(":", 1)[0], []).append(r["payload"] + "\n")
        for t, lines in by_type.items():
            p = self.out / "late" / f"{t}.jsonl"
            p.parent.mkdir(parents=True, exist_ok=True)
            with open(p, "a", encoding="utf-8") as f:
                f.write("".join(lines))

    # -- driving it
    def idle_for(self) -> float:
        """Seconds since the last batch that read input."""
        for p in reversed(self.query.recentProgress or []):
            if p.get("numInputRows"):
                if p["batchId"] != self._last_input_batch:
                    self._last_input_batch = p["batchId"]
                    self.last_input = time.monotonic()
                break
        return time.monotonic() - self.last_input

    def input_counts(self) -> Counter:
        """Counters of the sources' readers (read, used, rejected, duplicates), as last committed."""
        c = Counter()
        for cur in (self.ck / "spool").glob(f"spark-*/{CURSOR}"):
            with open(cur, "rb") as f:
                c.update(pickle.load(f)["counts"])
        return c

    def end_input(self, timeout: float = 600.0) -> None:
        """Take the input as over: end markers in, wait until every key has decided at the end."""
        for s in self.sources:
            d = _spool_dir(str(self.ck / "spool"), s)
            d.mkdir(parents=True, exist_ok=True)
            (d / END_FLAG).touch()
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.query.exception() is not None:
                raise self.query.exception()
            p = self.query.lastProgress
            wm = (p or {}).get("eventTime", {}).get("watermark")
            if wm is not None and pd.Timestamp(wm).value // 1000 >= END_BASE:
                return
            time.sleep(0.2)
        raise TimeoutError("the end of input did not reach every key in time")

    def stop(self) -> None:
        self.query.stop()
        self.sinks.close()


def run_live_spark(compiled, sources, sink_urls, checkpoint, out, lateness: int, trigger: float = 1.0,
                   until_idle: float | None = None, crs=None, phrases=None, master=None,
                   stop: threading.Event | None = None, webhook=None, quiet=False, spark=None,
                   max_polls: int = 200) -> Counter:
    """``spatec live --runner spark``: run until ``stop`` is set, or (``until_idle``) idle that long."""
    import tempfile

    from spatec.io.alert_sinks import DeliveredLog, SinkSet, open_sink
    from spatec.runners.spark_session import get_or_create

    if checkpoint is None:
        checkpoint = Path(tempfile.mkdtemp(prefix="spatec-live-spark-"))
    checkpoint, out = Path(checkpoint), Path(out or checkpoint)
    stop = stop or threading.Event()
    sinks = SinkSet([open_sink(u, checkpoint, **(webhook or {})) for u in sink_urls],
                    DeliveredLog(checkpoint / "delivered.jsonl"))
    if spark is None:
        # a stateful query keeps its number of state partitions for life: one per core, not
        # Spark's 200 (each is a task with a Python worker in every micro-batch)
        spark = get_or_create(master, {"spark.sql.shuffle.partitions": str(max(2, os.cpu_count() or 2))})
    live = SparkLive(spark, compiled, sources, sinks, checkpoint, out, lateness, trigger, crs, phrases,
                     max_polls)
    try:
        while not stop.wait(0.2):
            if live.query.exception() is not None:
                raise live.query.exception()
            if until_idle is not None and live.query.lastProgress is not None \
                    and live.idle_for() >= until_idle:
                live.end_input()
                break
    finally:
        live.stop()
    counts = live.input_counts()
    counts.update(live.counts)
    return counts
