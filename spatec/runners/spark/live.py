"""Live detection on Spark Structured Streaming (``spatec live --runner spark``).

The query::

    spatec_feed source (one per --source)          offsets = poll sequence numbers
      └─ fan-out (in the source's read): canonical events → run-time events, one
         row per (phrase, bucket, event), the event encoded (:mod:`spatec.automata.codec`)
          └─ withWatermark(event time = hi, allowed lateness)
              └─ groupBy(phrase, bucket).transformWithStateInPandas(LiveProcessor,
                 EventTime; a ListState per bucket: key → encoded RunState, the
                 broadcast buffer, the keys waiting and the timer; RocksDB)
                  └─ foreachBatch: alerts to the sinks (each id once), late events to
                     ``<out>/late/<TYPE>.jsonl``

**Source.** :class:`FeedDataSource` (``spatec_feed``) is a Python streaming data
source. Its reader lives in one Python process beside the driver for the
query's life: ``latestOffset`` takes what the live source has (up to
``maxPolls`` polls of an HTTP feed, or new files of a directory — the sources
of :mod:`spatec.feeds.sources`), ingests it there with the ids seen so far (the same
readers, rejects and duplicate rule as every runner; rejects are written to
``<out>/_rejects/``), and writes each poll's canonical events to its spool as
``<seq>.arrow`` before returning ``seq``: so a restart replays the planned
batch from the spool, and nothing fetched is lost. ``commit`` deletes what
Spark has committed and saves the reader's cursor (the live source's own
offset, counters); the ids seen are appended to a log (``_seen.<n>.log``)
rather than rewritten at every commit, and the log is rewritten with the ids
still kept only once most of it is forgotten.

**State groups.** The state is grouped by (phrase, bucket), a bucket being a
hash of the key (:func:`bucket_of`, :data:`BUCKETS` per phrase, fixed for the
life of a checkpoint and kept in it): one call of the processor per bucket and
micro-batch, not per key. A bucket's state is one value (a ListState, cut
in rows of a MiB: Spark 4.0.1 may read a large ValueState update only in
part, SPARK-53870, where a ListState's rows travel as Arrow): each key's run
state, encoded (a batch decodes and encodes again only the keys it
touches), its broadcast buffer, its keys waiting for a decision (key → the
watermark that decides the first, :func:`spatec.automata.step.next_decision`)
and the one event-time timer registered for the earliest of them. One read
and one write of the state store per bucket and batch: every call of the
state API is a round trip to the JVM (about a millisecond), so a MapState
entry per key, or a group per key, costs more than pickling.

**Broadcast types** (an event type without the phrase's key, e.g. rain gauge
readings for a phrase per vehicle) are treated as the local runner treats them
(see :mod:`spatec.runners.live_local`): the fan-out sends such an event to
every bucket of the phrase; there it goes to every key the bucket holds, and
to a buffer, pruned by the watermark after the phrase's span bound plus its
longest absence window, that a key first seen later is given first. A late
broadcast event is reported once (by bucket 0), and a composite of broadcast
events only, found in several buckets, is delivered once.

**Watermark and late events.** The watermark is declared on ``hi`` and the
column is dropped before the stateful operator: Spark still advances the
watermark but no longer drops rows behind it before the processor sees them
— the processor compares each event with the watermark and hands late ones
to the late output (Spark would drop them silently). Spark's watermark during
a batch is the one computed at the end of the batch before (largest ``hi``
so far less the lateness), which is what the local runner uses to judge
lateness.

**Decisions.** Every call runs :func:`spatec.automata.step.step` with that
watermark on the keys with new events and on the keys whose first decision
the watermark has reached. A bucket whose keys wait for a decision has an
event-time timer at the earliest: it is called again once the watermark gets
there, with or without new data for it.

**End of input** (``until_idle``). The driver flags every source's spool;
each reader then emits an end marker whose event time is ``END_BASE`` plus
the last event time it saw, which drags Spark's watermark past ``END_BASE``;
the timers fire and each waiting key decides with ``final=True`` at the
watermark of the end of input (the last event time, decoded from the
watermark: whole milliseconds, as Spark keeps them), like a batch replay at
its end. The query then stops; its checkpoint is finished (its watermark is
past every real time).

**Settings** (:data:`STREAMING_CONF`, set on the session): the RocksDB state
store with changelog checkpointing (a commit writes the batch's changes), 20
state versions kept (Spark's default 100 makes the checkpoint grow), and —
set when this module makes the session — ``spark.sql.shuffle.partitions`` =
the number of cores, not 200: a stateful query keeps its number of state
partitions for the life of its checkpoint, and each is a task in every
micro-batch.
"""
from __future__ import annotations

import io
import json
import logging
import os
import threading
import time
from collections import Counter, deque
from collections.abc import MutableMapping
from pathlib import Path
from typing import Sequence

import msgpack
import pandas as pd
import pyarrow as pa

from spatec.errors import UnsupportedError
from spatec.plan import data
from spatec.plan.support import require_derived_only
from spatec.runtime.checkpoint import CheckpointError
from spatec.storage.atomic import atomic_bytes, write_synced

log = logging.getLogger("spatec.live.spark")

SOURCE_NAME = "spatec_feed"
END_BASE = 4_102_444_800_000_000      # µs, 2100-01-01: end markers carry END_BASE + last event time
END_FLAG = "_end"
CURSOR = "_cursor.mp"
CURSOR_MAGIC = b"SPCU\x01"
FANOUT_SCHEMA = ("phrase string, bucket int, key string, id string, hi long, arrived double, ev binary, "
                 "type string, x double, y double, r double")
#: the columns the processor reads (the others are for the leaf pre-filter: :func:`prefiltered`)
FANOUT_COLUMNS = ("phrase", "bucket", "key", "id", "hi", "arrived", "ev")
OUT_SCHEMA = "kind string, phrase string, id string, hi long, arrived double, payload string"
STATE_SCHEMA = "state binary"
META_MAGIC = b"SPSG\x01"        # a state group: its keys' states, broadcast buffer, keys due, timer
BUCKETS = 16          # state groups per phrase (fixed for the life of a checkpoint)
STATE_CHUNK = 1 << 20  # bytes per row of a bucket's state
STREAMING_CONF = {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    # a commit writes the changes of the batch, not a new RocksDB checkpoint
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # versions of the state kept for recovery: Spark's default 100 makes the checkpoint grow
    "spark.sql.streaming.minBatchesToRetain": "20",
}


# ------------------------------------------------------------------------------ the source

def _range(first: int, last: int):
    """A Spark input partition: spooled polls ``first..last`` (inclusive)."""
    from pyspark.sql.datasource import InputPartition

    return InputPartition((first, last))


def _spool_dir(ck_spool: str, source_url: str) -> Path:
    from spatec.storage.atomic import safe_name

    return Path(ck_spool) / ("spark-" + safe_name(source_url))


def _reader_class():
    from pyspark.sql.datasource import DataSourceStreamReader

    class FeedStreamReader(DataSourceStreamReader):
        """Polls a live source; every poll ingested and spooled before its offset is returned."""

        def __init__(self, options):
            from spatec.events.read import wanted_columns
            from spatec.feeds.sources import open_source, parse_source

            self.opts = dict(options)
            self.compiled = load_program(self.opts["program"])    # the program and its plans, as data
            self.spec = parse_source(self.opts["source"])
            self.decl = self.compiled.program.events[self.spec.type]
            self.dir = _spool_dir(self.opts["spool"], self.opts["source"])
            self.dir.mkdir(parents=True, exist_ok=True)
            self.out = Path(self.opts["out"])
            self.max_polls = int(self.opts.get("maxPolls", "200"))
            self.lateness = int(self.opts.get("lateness", "0"))
            self.src = open_source(self.spec, self.dir / "raw", wanted_columns(self.decl))
            if hasattr(self.src, "settle"):
                self.src.settle = float(self.opts.get("settle", "2"))
            cur = self._load_cursor()
            self.committed, self.counts, self.max_hi = cur["seq"], cur["counts"], cur["max_hi"]
            self.seen_gen = cur.get("seen_gen", 0)
            self.seen = self._load_seen(cur)             # event id → hi: every id taken so far
            self.seen_set = set(self.seen)
            self.seen_batches = deque([(max(self.seen.values()), list(self.seen))] if self.seen else [])
            self.logged = len(self.seen)                  # entries in the seen log (live or not)
            self.unlogged: dict = {}                      # seq → ids of polls planned, not committed
            source_offset = cur["source"]
            self.seq = self.committed
            for seq in self._spooled():
                if seq > self.committed:
                    meta = self._read(seq)[1]
                    self._take(seq, meta["ids"])
                    source_offset = meta["source"]
                    self.max_hi = max(self.max_hi, meta["last_hi"])
                    self.seq = seq
            self.src.restore(source_offset)
            self.ended = False

        # Spark pickles a reader for the tasks that run `read`: they need the spool, and the
        # program and options for the fan-out
        def __getstate__(self):
            return {"dir": self.dir, "opts": self.opts, "compiled": self.compiled}

        def __setstate__(self, state):
            self.__dict__.update(state)

        # -- ids seen: an append-only log (``_seen.<generation>.log``, MessagePack maps of id → hi,
        # one per commit; the cursor says how many bytes of it are committed), rewritten with
        # only the ids still kept once most of it is forgotten
        def _seen_path(self, gen: int) -> Path:
            return self.dir / f"_seen.{gen}.log"

        def _load_seen(self, cur) -> dict:
            seen = dict(cur.get("seen", {}))
            p = self._seen_path(self.seen_gen)
            if p.exists():
                with open(p, "rb") as f:
                    data = f.read(cur.get("seen_bytes", 0))
                seen.update(_read_log(data))
            return seen

        def _take(self, seq: int, ids: dict) -> None:
            self.seen.update(ids)
            self.seen_set.update(ids)
            self.unlogged[seq] = ids

        # -- spool
        def _spooled(self) -> list[int]:
            return sorted(int(p.stem) for p in self.dir.glob("*.arrow") if p.stem.isdigit())

        def _load_cursor(self) -> dict:
            p = self.dir / CURSOR
            if p.exists():
                return _read_cursor(p)
            return {"seq": -1, "seen": {}, "counts": Counter(), "max_hi": -(1 << 62), "source": None,
                    "seen_gen": 0, "seen_bytes": 0}

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
            from spatec.events.read import write_rejects
            from spatec.feeds.ingest import MAX_AHEAD, live_events

            seen_set = self.seen_set
            got = 0
            frames, ids, taken = [], {}, []
            while got < self.max_polls:
                items = self.src.poll()
                if not items:
                    break
                for it in items:
                    res = live_events(it, self.decl, self.compiled.program.timezone, seen_set,
                                      int(self.opts.get("maxAhead", MAX_AHEAD)))
                    for k in ("read", "used", "rejected", "duplicates"):
                        self.counts[k] += getattr(res, k)
                    if res.rejected:
                        write_rejects(res.rejects, self.out, append=True)
                    ids.update(zip(res.events["_id"].tolist(), res.events["_hi"].tolist()))
                    if res.used:
                        self.max_hi = max(self.max_hi, int(res.events["_hi"].max()))
                        frames.append(res.events.assign(_arrived=float(it.arrived)))
                    self.src.commit([it])
                    taken.append(it)
                    got += 1
            if taken:
                # what this call took, in one spool file (one fsync): the polls' events, each row
                # with the time its poll arrived
                self.seq += 1
                self._take(self.seq, ids)
                events = pd.concat(frames, ignore_index=True) if frames else None
                self._write(self.seq, events, taken[-1].arrived,
                            {"ids": ids, "source": self.src.offset(), "last_hi": self.max_hi, "end": False})
                self.src.release()
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
            """The partition's spooled polls fanned out (:func:`_fanout`): one row per
            (phrase, bucket, event), made here rather than in a ``mapInPandas`` after the
            source, which would cost every micro-batch one more Python worker hop."""
            names = [n for n in self.opts.get("phrases", "").split(",") if n]
            fan = _fanout(self.compiled, self.opts["crs"], names, int(self.opts["buckets"]))
            cols = ("seq", "arrived", "events", "last_hi")
            rows = list(self._polls(partition))
            if not rows:
                return
            pdf = pd.DataFrame(rows, columns=list(cols))
            for out in fan([pdf]):
                yield from out.itertuples(index=False, name=None)

        def _polls(self, partition):
            first, last = partition.value
            for seq in range(first, last + 1):
                table, meta = self._read(seq)
                if meta["end"]:
                    yield (seq, meta["arrived"], b"", int(meta["last_hi"]))
                    continue
                if table.num_rows == 0:
                    continue
                if "_arrived" not in table.column_names:
                    yield (seq, meta["arrived"], _ipc(table), None)
                    continue
                arrived = table.column("_arrived").to_numpy()
                table = table.drop_columns(["_arrived"])
                for a in dict.fromkeys(arrived.tolist()):     # one row per poll, in order
                    yield (seq, a, _ipc(table.filter(pa.array(arrived == a))), None)

        def commit(self, end):
            seq = int(end["seq"])
            source = self.src.offset()
            for sq in self._spooled():
                if sq <= seq:
                    (self.dir / f"{sq}.arrow").unlink(missing_ok=True)
            self.committed = seq
            new: dict = {}
            for sq in sorted(self.unlogged):
                if sq <= seq:
                    new.update(self.unlogged.pop(sq))
            if new:
                self.seen_batches.append((max(new.values()), list(new)))
            keep = self.max_hi - self.lateness - max(self.lateness, 600_000_000)
            while self.seen_batches and self.seen_batches[0][0] < keep:
                for i in self.seen_batches.popleft()[1]:
                    if self.seen.pop(i, None) is not None:
                        self.seen_set.discard(i)
            log_path = self._seen_path(self.seen_gen)
            size = log_path.stat().st_size if log_path.exists() else 0
            if self.logged + len(new) > 2 * len(self.seen) + 50_000:
                # most of the log is forgotten: a new generation with only the ids kept
                gen = self.seen_gen + 1
                committed = {i: hi for i, hi in self.seen.items() if all(i not in u for u in self.unlogged.values())}
                size = write_synced(self._seen_path(gen), _log_entry(committed), "wb")
                old, self.seen_gen, self.logged = log_path, gen, len(committed)
            else:
                old = None
                if new:
                    size += write_synced(log_path, _log_entry(new), "ab", at=size)
                    self.logged += len(new)
            cur = {"seq": seq, "counts": dict(self.counts), "max_hi": self.max_hi,
                   "source": sorted(source) if isinstance(source, (set, frozenset)) else source,
                   "seen_gen": self.seen_gen, "seen_bytes": size}
            atomic_bytes(self.dir / CURSOR, CURSOR_MAGIC + msgpack.packb(cur, use_bin_type=True))
            if old is not None:
                old.unlink(missing_ok=True)

    return FeedStreamReader


def _ipc(table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


def _log_entry(ids: dict) -> bytes:
    return msgpack.packb(ids, use_bin_type=True)


def _read_log(data: bytes) -> dict:
    """The ids of a seen log's committed bytes (whole MessagePack maps, one per commit)."""
    out: dict = {}
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(data)
    try:
        for entry in unpacker:
            out.update(entry)
    except (ValueError, msgpack.FormatError, msgpack.StackError):
        pass    # a write cut by a crash, past the committed length
    return out


def _read_cursor(path: Path) -> dict:
    data = path.read_bytes()
    if data[:len(CURSOR_MAGIC)] != CURSOR_MAGIC:
        raise CheckpointError(f"{path}: not a spatec live reader's cursor (an older spatec's: "
                              f"use a new checkpoint directory)")
    cur = msgpack.unpackb(data[len(CURSOR_MAGIC):], raw=False, strict_map_key=False)
    cur["counts"] = Counter(cur.get("counts", {}))
    return cur


def _jsonable(v):
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    return str(v)


def _data_source_class():
    from pyspark.sql.datasource import DataSource

    class FeedDataSource(DataSource):
        """``spark.readStream.format("spatec_feed")``: options ``program`` (its file, :func:`load_program`), ``source`` (TYPE=URL),
        ``spool``, ``out``, ``lateness`` (µs), ``maxPolls``."""

        @classmethod
        def name(cls):
            return SOURCE_NAME

        def schema(self):
            return FANOUT_SCHEMA

        def streamReader(self, schema):
            return _reader_class()(self.options)

    return FeedDataSource


# ------------------------------------------------------------------------------ fan-out

def _fanout(compiled, crs: str, phrase_names: Sequence[str], buckets: int):
    """``mapInPandas`` function: spooled polls → one row per (phrase, bucket, event): an event
    of a keyed type in its key's bucket (:func:`~spatec.runtime.routing.route`, the one
    hash :func:`~spatec.runtime.routing.bucket_of`), an event of a broadcast type in every
    bucket of the phrase (key ""), every event of a phrase without a key in bucket 0."""
    from spatec.automata.codec import encode_events
    from spatec.runtime.events import to_evs
    from spatec.runtime.routing import bucket_of, route
    from spatec.spatial.crs import Projector

    plans = [p for p in compiled.plans if p.name in phrase_names]
    readers: dict = {}
    for p in plans:
        for t in p.physical.types:
            readers.setdefault(t, []).append(p)

    def fn(batches):
        proj = Projector(crs)
        cols = ("phrase", "bucket", "key", "id", "hi", "arrived", "ev", "type", "x", "y", "r")
        for pdf in batches:
            out = {c: [] for c in cols}

            def add(phrase, bucket, key, ev, blob, arrived):
                out["phrase"].append(phrase)
                out["bucket"].append(bucket)
                out["key"].append(key)
                out["id"].append(ev.id)
                out["hi"].append(int(ev.hi))
                out["arrived"].append(arrived)
                out["ev"].append(blob)
                out["type"].append(ev.type)
                xy = ev.loc.xy          # (a disc: what the leaf pre-filter can test)
                out["x"].append(xy[0] if xy is not None else None)
                out["y"].append(xy[1] if xy is not None else None)
                out["r"].append(ev.loc.r if xy is not None else None)

            for blob, arrived, last_hi in zip(pdf["events"], pdf["arrived"], pdf["last_hi"]):
                arrived = float(arrived)
                if last_hi is not None and not pd.isna(last_hi):
                    for c, v in zip(cols, ("", 0, "", "", END_BASE + int(last_hi), arrived, b"", "", None, None,
                                           None)):
                        out[c].append(v)
                    continue
                df = pa.ipc.open_stream(blob).read_all().to_pandas()
                for t, part in df.groupby("_type", sort=False):
                    evs = to_evs(part.reset_index(drop=True), compiled.program, proj)
                    blobs = {}
                    for p in readers.get(t, ()):
                        by_key, bcast = route(p.physical, {t: evs})
                        keys = list(by_key)
                        bks = bucket_of(keys, buckets) if p.physical.key else [0] * len(keys)
                        for k, bk in zip(keys, bks):
                            text = json.dumps(list(k), default=str)
                            for ev in by_key[k]:
                                data = blobs.get(id(ev))
                                if data is None:
                                    data = blobs[id(ev)] = encode_events([ev])
                                add(p.name, bk, text, ev, data, arrived)
                        for ev in bcast:
                            data = blobs.get(id(ev))
                            if data is None:
                                data = blobs[id(ev)] = encode_events([ev])
                            for bk in range(buckets):
                                add(p.name, bk, "", ev, data, arrived)
            yield pd.DataFrame(out, columns=list(cols))

    return fn


# ------------------------------------------------------------------------------ the processor

def end_time(wm_us: int, lateness: int) -> int:
    """The last event time of the input, from a watermark the end markers dragged past
    END_BASE (a marker's time is END_BASE plus the last event time its reader saw)."""
    return wm_us - END_BASE + lateness


#: The program and its plans, as plan data, in the checkpoint: what the readers and the state
#: processors read (a function Spark sends to its workers carries the file's name, not the
#: program: Spark hands a pickled function over 1 MiB through a broadcast variable, which its
#: transformWithState driver runner cannot read: the plan data of a 400-level chain is more).
PROGRAM_FILE = "program.json"


def save_program(compiled, checkpoint: Path) -> str:
    """Write ``compiled`` as plan data to the checkpoint (atomically); the file's path."""
    path = Path(checkpoint) / PROGRAM_FILE
    atomic_bytes(path, data.dumps(compiled).encode("utf-8"))
    return str(path)


def load_program(path: str):
    """The compiled program :func:`save_program` wrote."""
    return data.loads(Path(path).read_text(encoding="utf-8"))


def _processor(program_file: str, crs: str, lateness: int):
    from pyspark.sql.streaming import StatefulProcessor

    class LiveProcessor(StatefulProcessor):
        """One (phrase, bucket), its state in one ListState (its bytes cut in rows of
        STATE_CHUNK): each key's run state in the automaton's codec (only the keys a batch
        touches are decoded and encoded again), the bucket's broadcast buffer, its keys
        waiting for a decision (key → the watermark that decides the first) and its timer,
        stepped by the keyed runtime (:mod:`spatec.runtime.keyed`). One read and one write
        of the state store per bucket and batch: a round trip to the JVM's state server
        costs more than encoding a key's state."""

        def init(self, handle):
            self.handle = handle
            # a ListState, not a ValueState: ListState.put sends its rows to the JVM as Arrow, where
            # ValueState.update sends one message that Spark 4.0.1 may read only in part when it is
            # large (SPARK-53870: "invalid pickle opcode" at a few hundred kB)
            self.bucket = handle.getListState("bucket", STATE_SCHEMA)
            self.phrases = None

        def _phrase(self, name):
            if self.phrases is None:
                from spatec.runtime.keyed import KeyedPhrase
                from spatec.spatial.crs import Projector

                compiled = load_program(program_file)
                self.proj = Projector(crs)
                self.phrases = {p.name: KeyedPhrase(p, compiled.program, self.proj) for p in compiled.plans}
                consumed = {t for p in compiled.plans for t in p.physical.derived}
                for ph in self.phrases.values():
                    ph.consumed = ph.name in consumed
            return self.phrases[name]

        def _watermark(self, timer_values):
            from spatec.automata.machine import NEG_INF

            wm = timer_values.getCurrentWatermarkInMs()
            if wm <= 0:
                return NEG_INF, False
            wm_us = wm * 1000
            if wm_us >= END_BASE:
                return end_time(wm_us, lateness), True
            return wm_us, False

        def _run(self, key, evs, arrival, timer_values, fired: bool = False):
            from spatec.runtime.keyed import KeyedState, advance, late_record, late_text
            from spatec.sinks.encoding import hulls_wkt

            phrase, bucket = key[0], int(key[1])
            rows = {c: [] for c in ("kind", "phrase", "id", "hi", "arrived", "payload")}
            if phrase == "":
                return _out_frame(rows)
            ph = self._phrase(phrase)
            wm_ms = timer_values.getCurrentWatermarkInMs()
            wm, final = self._watermark(timer_values)
            got_meta = b"".join(c for (c,) in self.bucket.get())
            meta = _meta_back(got_meta)
            if fired:
                meta["timer"] = None      # Spark deletes the timer that fired
            store = _Store(meta["keys"])
            ks = KeyedState(store, meta["bcast"], meta["due"])
            by_key: dict = {}
            bnew = []
            for k, e in evs:
                if e.hi < wm:
                    if k or bucket == 0:  # a broadcast event comes to every bucket: report it once
                        _row(rows, "late", phrase, e.id, e.hi, arrival.get(e.id),
                             late_text(late_record(e, wm)))
                elif k:
                    by_key.setdefault(k, []).append(e)
                else:
                    bnew.append(e)
            done = advance(ph, ks, by_key, bnew, wm, True, final=final, drop_empty=True)
            for e in done.late:
                _row(rows, "late", phrase, e.id, e.hi, arrival.get(e.id), late_text(late_record(e, wm)))
            if done.found:
                for (c, row), h in zip(done.found, hulls_wkt([c for c, _ in done.found], self.proj)):
                    row["hull"] = h
                    t = max((arrival[e.id] for e in c.events if e.id in arrival), default=None)
                    _row(rows, "alert", phrase, c.id, int(c.hi), t, json.dumps(row, default=str))
            if ph.consumed:
                _hand_on(rows, ph, bucket, store, ks, done, meta, wm, final, arrival)
            # one timer for the bucket: at its first decision
            due = ks.due
            want = None
            if due:
                first = min(due.values())
                want = max(-(-first // 1000), max(wm_ms, 0) + 1)
            if want != meta["timer"]:
                if meta["timer"] is not None:
                    self.handle.deleteTimer(meta["timer"])
                if want is not None:
                    self.handle.registerTimer(want)
                meta["timer"] = want
            blobs = store.encoded()
            if blobs or ks.bcast or due or meta["timer"] is not None:
                data = _meta_data(blobs, ks.bcast, due, meta["timer"], meta["held"])
                self.bucket.put([(data[i:i + STATE_CHUNK],) for i in range(0, len(data), STATE_CHUNK)])
            elif got_meta:
                self.bucket.clear()
            return _out_frame(rows)

        def handleInputRows(self, key, rows, timerValues):
            from spatec.automata.codec import decode_events

            evs, arrival = [], {}
            for pdf in rows:
                for k, i, a, b in zip(pdf["key"], pdf["id"], pdf["arrived"], pdf["ev"]):
                    if b:
                        evs.append((k, decode_events(b)[0]))
                        arrival[i] = float(a)
            yield self._run(key, evs, arrival, timerValues)

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            yield self._run(key, [], {}, timerValues, fired=True)

        def close(self):
            pass

    return LiveProcessor()


class _Store(MutableMapping):
    """A state group's keys: key → run state, each decoded (:mod:`spatec.automata.codec`) when
    first read; :meth:`encoded` gives back the bytes of every key, those read encoded again."""

    def __init__(self, blobs: dict):
        self.blobs, self.live = blobs, {}

    def __getitem__(self, k):
        rs = self.live.get(k)
        if rs is None:
            from spatec.automata.codec import decode_state

            rs = self.live[k] = decode_state(self.blobs[k])
        return rs

    def __setitem__(self, k, rs):
        self.live[k] = rs

    def __delitem__(self, k):
        found = self.live.pop(k, None) is not None
        if self.blobs.pop(k, None) is None and not found:
            raise KeyError(k)

    def __iter__(self):
        return iter(set(self.blobs) | set(self.live))

    def __len__(self):
        return len(set(self.blobs) | set(self.live))

    def encoded(self) -> dict:
        from spatec.automata.codec import encode_state

        for k, rs in self.live.items():
            self.blobs[k] = encode_state(rs)
        self.live = {}
        return self.blobs


def _meta_data(blobs: dict, bcast: list, due: dict, timer, held: dict) -> bytes:
    from spatec.automata.codec import encode_events

    return META_MAGIC + msgpack.packb({"keys": list(blobs.items()), "bcast": encode_events(bcast),
                                       "due": list(due.items()), "timer": timer,
                                       "held": list(held.items())}, use_bin_type=True)


def _meta_back(data: bytes) -> dict:
    from spatec.automata.codec import decode_events

    if not data:
        return {"keys": {}, "bcast": [], "due": {}, "timer": None, "held": {}}
    if data[:len(META_MAGIC)] != META_MAGIC:
        raise CheckpointError("a Spark live state group of another spatec version; use a new checkpoint directory")
    m = msgpack.unpackb(data[len(META_MAGIC):], raw=False, strict_map_key=False)
    return {"keys": dict(m["keys"]), "bcast": decode_events(m["bcast"]), "due": dict(m["due"]), "timer": m["timer"],
            "held": dict(m.get("held", ()))}


def _hand_on(rows, ph, bucket: int, store, ks, done, meta, wm: int, final: bool, arrival: dict) -> None:
    """A producer's bucket (another phrase reads its composites, SPEC §8): its decided
    composites as events, and what its state still holds back (per key, cached in the
    bucket's state for the keys this call did not read), for the driver's phrases over
    phrases (:mod:`spatec.runners.spark.live_flows`)."""
    from spatec.runners.spark.live_flows import NOTHING, bucket_low, event_payload
    from spatec.runtime.derived import held_low

    for (c, _row_out), e in zip(done.found, done.events):     # (in step: one event per composite)
        t = max((arrival[x.id] for x in c.events if x.id in arrival), default=None)
        _row(rows, "event", ph.name, e.id, e.hi, t, event_payload(e))
    held = meta["held"]
    for k in done.dropped:
        held.pop(k, None)
    if final:
        low = bucket_low(ph.am, [store[k] for k in list(store)], ks.bcast, True)
    else:
        for k, rs in store.live.items():
            held[k] = held_low([rs], (), NOTHING)
        low = min([held_low((), ks.bcast, NOTHING)] + [v for k, v in held.items() if k in store.blobs or k in store.live])
    _row(rows, "low", ph.name, str(bucket), low, None, f"{wm}:{int(final)}")


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


# ------------------------------------------------------------------------------ the driver

def check_streamable(compiled, phrases=None) -> list:
    """The plans to run: the phrases asked for and every phrase whose composites they read,
    in flow order (broadcast types go to every bucket of their phrase; a phrase over phrases
    runs on the driver, :mod:`spatec.runners.spark.live_flows`, and is refused when it also
    reads input events, :func:`~spatec.plan.support.require_derived_only`)."""
    from spatec.runtime.derived import needed

    run = needed(compiled, phrases)
    plans = [p for p in compiled.plans if p.name in run]
    require_derived_only(plans, "Spark live")
    return plans


class SparkLive:
    """A running live query and what its batches delivered."""

    def __init__(self, spark, compiled, sources: Sequence[str], sinks, checkpoint: Path, out: Path,
                 lateness: int, trigger: float = 1.0, crs: str | None = None, phrases=None,
                 max_polls: int = 200, on_batch=None, buckets: int | None = None, settle: float | None = None):
        from pyspark.sql import functions as F

        from spatec.feeds.sources import parse_source
        from spatec.runtime.rows import time_fields
        from spatec.spatial.crs import choose_crs

        self.spark, self.compiled, self.sinks = spark, compiled, sinks
        self.ck, self.out, self.lateness = Path(checkpoint), Path(out), int(lateness)
        self.plans = check_streamable(compiled, phrases)
        self.report = {p.name for p in self.plans if not phrases or p.name in phrases}
        #: the phrases the query runs; the phrases over phrases run on the driver
        self.streamed = [p for p in self.plans if not p.physical.derived]
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
        # the number of state groups per phrase is fixed for the life of the checkpoint
        buckets_file = self.ck / "buckets"
        if buckets_file.exists():
            buckets = int(buckets_file.read_text().strip())
        self.buckets = int(buckets or BUCKETS)
        buckets_file.write_text(f"{self.buckets}\n")
        self.counts = Counter()
        self.last_input = time.monotonic()
        self._last_input_batch = None

        for k, v in STREAMING_CONF.items():
            spark.conf.set(k, v)
        spark.dataSource.register(_data_source_class())
        program_file = save_program(compiled, self.ck)    # the program and its plans, for the workers
        streams = []
        for s in self.sources:
            streams.append(spark.readStream.format(SOURCE_NAME)
                           .option("program", program_file)
                           .option("source", s).option("spool", str(self.ck / "spool"))
                           .option("out", str(self.out)).option("lateness", str(self.lateness))
                           .option("maxPolls", str(max_polls))
                           .option("settle", str(2.0 if settle is None else settle))
                           .option("crs", self.crs).option("buckets", str(self.buckets))
                           .option("phrases", ",".join(p.name for p in self.streamed)).load())
        events = streams[0]
        for s in streams[1:]:
            events = events.unionByName(s)
        # the watermark on hi; hi_ts is dropped again so that Spark does not drop late rows
        # itself before the processor can report them
        events = (events.withColumn("hi_ts", F.timestamp_micros("hi"))
                  .withWatermark("hi_ts", f"{self.lateness // 1000} milliseconds").drop("hi_ts"))
        # (after the watermark: what the pre-filter drops still moves event time, as without it)
        events = self._prefiltered(events).select(*FANOUT_COLUMNS)
        self.flows = None
        self._lock = threading.Lock()
        if len(self.streamed) < len(self.plans):
            from spatec.runners.spark.live_flows import DriverFlows
            from spatec.spatial.crs import Projector

            self.proj = Projector(self.crs)
            self.flows = DriverFlows(compiled, self.plans, {p.name for p in self.streamed}, self.report,
                                     self.proj, self.ck)
        out = events.groupBy("phrase", "bucket").transformWithStateInPandas(
            _processor(program_file, self.crs, self.lateness), OUT_SCHEMA, "Append", "EventTime")
        self.query = (out.writeStream.foreachBatch(self._batch)
                      .option("checkpointLocation", str(self.ck / "spark"))
                      .trigger(processingTime=f"{max(trigger, 0):g} seconds")
                      .queryName(f"spatec-live-{os.getpid()}").start())

    def _prefiltered(self, events):
        """The leaf pre-filter of each micro-batch (``spark.spatec.prefilter``, on by default):
        a streamed phrase's events that cannot meet any place its leaves need dropped by a
        Sedona broadcast index join against those places (:func:`~spatec.runners.spark.sedona.
        live_prefilter`), the batch runner's rule; without Sedona on the session, all kept."""
        from spatec.exec.context import PREFILTER_KEY
        from spatec.exec.prefilter import prefilter_regions
        from spatec.runners.spark.session import spatial_engine

        self.prefilter: dict = {}
        #: the Sedona joins of the micro-batches' plan (``{"spatial_joins": [...]}`` once seen)
        self.joins: dict = {}
        if str(self.spark.conf.get(PREFILTER_KEY, "on")).lower() in ("off", "false"):
            return events
        if spatial_engine(self.spark) != "sedona-spark":
            return events
        from spatec.spatial.engines import SedonaSparkEngine

        if not SedonaSparkEngine.available(self.spark):
            return events
        for p in self.streamed:
            if p.physical.prefilter:
                for t, regions in prefilter_regions(p, self.compiled.program, self.crs).items():
                    if regions:
                        self.prefilter[(p.name, t)] = list(regions.values())
        if not self.prefilter:
            return events
        from spatec.runners.spark.sedona import live_prefilter

        return live_prefilter(events, self.prefilter)

    def _batch(self, df, batch_id: int) -> None:
        if self.prefilter and "spatial_joins" not in self.joins and getattr(self, "query", None) is not None:
            from spatec.runners.spark.executor import SPATIAL_JOINS

            # (once: the micro-batches share one plan; the batch's own frame shows none of it)
            plan = self.query._jsq.streamingQuery().lastExecution().executedPlan().toString()
            self.joins["spatial_joins"] = [j for j in SPATIAL_JOINS if j in plan]
        rows = [r.asDict() for r in df.collect()]
        alerts, his, trig = {}, {}, {}
        late, handed = [], []
        for r in rows:
            if r["kind"] == "alert":
                if r["id"] in his or r["phrase"] not in self.report:
                    continue    # a composite of broadcast events only, found in several buckets
                alerts.setdefault(r["phrase"], []).append(json.loads(r["payload"]))
                his[r["id"]] = r["hi"]
                trig[r["id"]] = r["arrived"]
            elif r["kind"] == "late":
                late.append(r)
            else:               # "event", "low": what a producer hands on to the driver
                handed.append(r)
        if self.flows is not None:
            with self._lock:
                self._derived(self.flows.batch(batch_id, handed), alerts, his, trig)
        delivered = self._deliver(alerts, his)
        if late:
            self.counts["late"] += len(late)
            self._write_late(late)
        if self.on_batch is not None:
            self.on_batch(batch_id, delivered, trig)

    def _derived(self, found, alerts: dict, his: dict, trig: dict) -> None:
        """Composites the driver's phrases over phrases decided, as alerts."""
        from spatec.sinks.encoding import hulls_wkt

        for (ph, c, row, t), h in zip(found, hulls_wkt([f[1] for f in found], self.proj)):
            if c.id in his:
                continue
            row["hull"] = h
            alerts.setdefault(ph.name, []).append(json.loads(json.dumps(row, default=str)))
            his[c.id] = int(c.hi)
            trig[c.id] = t

    def _deliver(self, alerts: dict, his: dict) -> list:
        """Phrase → alert rows, to the sinks (each id once, by the delivered log)."""
        from spatec.sinks.alerts import alert_json

        delivered = []
        for phrase, rs in alerts.items():
            delivered.extend(alert_json(rs, self.time_fields[phrase]))
        self.counts["alerts"] += len(delivered)
        self.sinks.deliver(delivered, his)
        return delivered

    def _finish_derived(self, wm_us: int) -> None:
        """The end of input reached every bucket: the phrases over phrases decide at the end."""
        if self.flows is None:
            return
        alerts, his, trig = {}, {}, {}
        with self._lock:
            self._derived(self.flows.finish(end_time(wm_us, self.lateness)), alerts, his, trig)
        delivered = self._deliver(alerts, his)
        if self.on_batch is not None:
            self.on_batch(None, delivered, trig)

    def _write_late(self, late) -> None:
        from spatec.runtime.keyed import write_late

        by_type: dict = {}
        for r in late:
            by_type.setdefault(r["id"].split(":", 1)[0], []).append(r["payload"])
        for t, lines in by_type.items():
            write_late(self.out, t, lines)

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
            c.update(_read_cursor(cur)["counts"])
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
                self._finish_derived(pd.Timestamp(wm).value // 1000)
                return
            time.sleep(0.2)
        raise TimeoutError("the end of input did not reach every key in time")

    def stop(self) -> None:
        self.query.stop()
        self.sinks.close()


def run_live_spark(compiled, sources, sink_urls, checkpoint, out, lateness: int, trigger: float = 1.0,
                   until_idle: float | None = None, crs=None, phrases=None, master=None,
                   stop: threading.Event | None = None, webhook=None, quiet=False, spark=None,
                   max_polls: int = 200, on_batch=None) -> Counter:
    """``spatec live --runner spark``: run until ``stop`` is set, or (``until_idle``) idle that long.
    ``on_batch(batch_id, delivered, arrived)`` after each micro-batch (``batch_id`` None: the end
    of input's decisions of the phrases over phrases)."""
    import tempfile

    from spatec.runners.spark.session import get_or_create
    from spatec.sinks.alerts import DeliveredLog, SinkSet, open_sink

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
                     max_polls, on_batch)
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
    # the phrase types the micro-batches pre-filtered by a Sedona join against their places
    if live.joins.get("spatial_joins"):
        counts["prefiltered"] = len({p for p, _ in live.prefilter})
    return counts
