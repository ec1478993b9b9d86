"""What a task does, over Arrow: the functions an executor's tasks run (Spark's
``mapInArrow``), written once and runnable anywhere.

Events travel between tasks as Arrow: each row a task hands on holds a *blob*, the Arrow
IPC stream of many events (or of many composites' lines), so a shuffle moves a few large
values rather than one row per event, and no event is ever a row of the JVM.

- :func:`typed_rows`: one split read and typed; its events cut by each :class:`Keying`'s
  groups into blobs, its rejects into one, and small rows that the driver's aggregates
  decide by (:data:`TYPED`: counts, positions' cells, sources' time spans, the groups'
  sizes and spans, the starts' histogram).
- :func:`recut`: blobs of a grouping's groups cut into its items' (a group cut into
  stretches of time, a keyless phrase's stretches), copies across splits left out, history
  flagged.
- :func:`match_rows`: each item's blobs matched (:func:`~spatec.exec.match.match_item`), each
  phrase's composites rendered (:func:`~spatec.exec.parts.render`) and cut into its output
  ranges: a blob per (phrase, range), placed in its part's partition; for a phrase others
  read, its composites as events and the least ``lo`` it left undecided.
- :func:`part_table`: a part's blobs put together, in ``(lo, hi, id)`` order, each
  composite once.
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from spatec.exec.decide import cell_keys
from spatec.exec.groups import Grouping, group_of, item_rows
from spatec.exec.match import CANONICAL, MatchJob, event_dtypes, frames_of, match_item, prefixed
from spatec.exec.tasklog import TaskClock
from spatec.runtime.events import attribute_names

#: Kinds of a typing task's rows (:data:`TYPED`).
SUMMARY, CELL, SPAN, GSTAT, HIST, BLOB, REJECTS = range(7)
TYPED = pa.schema([pa.field("kind", pa.int8()), pa.field("split", pa.int32()), pa.field("keying", pa.int32()),
                   pa.field("g", pa.int32()), pa.field("n", pa.int64()), pa.field("m", pa.int64()),
                   pa.field("a", pa.int64()), pa.field("b", pa.int64()), pa.field("source", pa.string()),
                   pa.field("type", pa.string()), pa.field("value", pa.binary())])
#: Kinds of a match task's rows (:data:`MATCHED`).
LINES, EVENTS, LOW = 0, 1, 2
MATCHED = pa.schema([pa.field("_kind", pa.int8()), pa.field("_to", pa.int32()), pa.field("_phrase", pa.int32()),
                     pa.field("_range", pa.int32()), pa.field("n", pa.int64()), pa.field("low", pa.int64()),
                     pa.field("size", pa.int64()), pa.field("value", pa.binary())])
#: A blob's rows on their way to an item (:func:`recut`).
ITEMS = pa.schema([pa.field("_to", pa.int32()), pa.field("_item", pa.int32()), pa.field("type", pa.string()),
                   pa.field("hist", pa.bool_()), pa.field("value", pa.binary())])
#: Microseconds per bin of the starts' histogram (the outputs' ranges are cut from it).
HIST_BIN = 60_000_000

_ARROW = {"object": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "Int64": pa.int64(),
          "boolean": pa.bool_(), "bool": pa.bool_()}


@dataclass(frozen=True)
class Keying:
    """How a type's events are cut into groups as they are typed, before any item is known:
    by a key's hash into ``buckets`` (keyless: one group), with the columns every grouping
    that cuts so reads. A keyed grouping's broadcast types go to group -2 (every group)."""

    index: int
    key: tuple
    buckets: int
    keyed: tuple            # types cut by the key (the others: group -2)
    columns: tuple          # ((type, (attribute, ...)), ...)

    def reads(self, t: str) -> bool:
        return t in dict(self.columns)


def keyings(groups: list, program, plans: dict) -> tuple[list, dict]:
    """The :class:`Keying` of each grouping that reads input events (groupings alike share
    one), and grouping → its keying's index."""
    from spatec.exec.match import wanted

    out: list = []
    of: dict = {}
    found: dict = {}
    cols: dict = {}
    for g in groups:
        if g.derived:
            continue
        sig = (g.key, g.buckets, g.keyed if g.key else ())
        if sig not in found:
            found[sig] = len(out)
            out.append(None)
            cols[found[sig]] = {}
        k = found[sig]
        of[g.index] = k
        for t in g.types:
            mine = cols[k].setdefault(t, set())
            mine.update(wanted(program, [plans[p] for p in g.phrases], t))
    for sig, k in found.items():
        key, buckets, keyed = sig
        columns = tuple((t, tuple(a for a in attribute_names(program, t) if a in attrs))
                        for t, attrs in cols[k].items())
        out[k] = Keying(k, key, buckets, keyed, columns)
    return out, of


def blob_schema(program, t: str, attrs: tuple, tracked: bool) -> pa.Schema:
    """The columns of a blob of type ``t``'s events: the canonical ones but ``_type``, the
    attributes read (as ``<type>__<attr>``), and where each came from when copies across
    splits are possible (``tracked``)."""
    dt = event_dtypes(program, t)
    fields = [pa.field(c, _ARROW[dt[c]]) for c in CANONICAL[1:]]
    fields += [pa.field(prefixed(t, a), _ARROW[dt[a]]) for a in attrs]
    if tracked:
        fields += [pa.field("_split", pa.int32()), pa.field("_batch", pa.int32()), pa.field("_row", pa.int64()),
                   pa.field("_file", pa.string())]
    return pa.schema(fields)


def typed_rows(split, program, keys: list, tracked: bool, store: Store | None = None) -> list:
    """One split read and typed (:func:`~spatec.exec.splits.read_split`) as record batches of
    :data:`TYPED` (see the module). ``tracked``: events say where they came from (the type has
    other splits, so copies across them are possible)."""
    from spatec.exec.inprocess import batch_order
    from spatec.exec.splits import read_split

    res = read_split(split, program)
    t = split.type
    ev = res.events
    rej = res.rejects
    n, i = len(ev), split.index
    rows: list = []

    def row(kind, keying=-1, g=-1, n=0, m=0, a=None, b=None, source=None, value=None):
        rows.append((kind, i, keying, g, n, m, a, b, source, t, value))

    max_hi = int(ev["_hi"].max()) if n else None
    row(SUMMARY, n=n, m=len(rej), a=res.read, b=max_hi)
    if n:
        c0, c1 = cell_keys(ev)
        cells = np.concatenate([c0, c1[c1 >= 0]])
        cells = cells[cells >= 0]
        for c, k in zip(*np.unique(cells, return_counts=True)):
            row(CELL, a=int(c), n=int(k))
        lo = ev["_lo"].to_numpy(np.int64)
        for c, k in zip(*np.unique(np.floor_divide(lo, HIST_BIN), return_counts=True)):
            row(HIST, a=int(c), n=int(k))
        if tracked and program.events[t].source is not None:
            tt = ev["_t"].to_numpy(np.int64)
            spans = pd.DataFrame({"s": ev["_source"].astype(object), "t": tt}).groupby("s", sort=False)["t"] \
                .agg(["min", "max"])
            for s, a, b in zip(spans.index.tolist(), spans["min"].tolist(), spans["max"].tolist()):
                row(SPAN, source=s, a=int(a), b=int(b))
        table = None
        for k in keys:
            if not k.reads(t):
                continue
            attrs = dict(k.columns)[t]
            schema = blob_schema(program, t, attrs, tracked)
            if table is None or set(schema.names) - set(table.column_names):
                table = _events_table(ev, res, program, t, attrs, tracked, split, batch_order)
            mine = table.select(schema.names)
            if k.key and t in k.keyed:
                grp = group_of(Grouping(0, (), (t,), k.key, k.keyed, k.buckets), ev, t)
            elif k.key:
                grp = np.full(n, -2, dtype=np.int64)
            else:
                grp = np.zeros(n, dtype=np.int64)
            order = np.argsort(grp, kind="stable")
            sorted_g = grp[order]
            cuts = np.flatnonzero(np.diff(sorted_g)) + 1
            taken = mine.take(pa.array(order))
            for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, n].tolist()):
                g = int(sorted_g[a])
                if g == -1:
                    continue            # no key value: it relates to nothing
                part = taken.slice(a, b - a)
                if g >= 0:
                    plo = part.column("_lo")
                    row(GSTAT, keying=k.index, g=g, n=b - a, a=pc.min(plo).as_py(), b=pc.max(plo).as_py())
                row(BLOB, keying=k.index, g=g, n=b - a, value=ipc(part, store))
    if len(rej):
        r = rej.assign(_batch=batch_order(split, rej["file"]).astype(np.int32))
        row(REJECTS, n=len(rej), value=ipc(pa.Table.from_pandas(r, preserve_index=False), store))
    cols = list(zip(*rows))
    return [pa.RecordBatch.from_arrays([pa.array(list(c), f.type) for c, f in zip(cols, TYPED)], schema=TYPED)]


def _events_table(ev: pd.DataFrame, res, program, t: str, attrs: tuple, tracked: bool, split, batch_order) -> pa.Table:
    schema = blob_schema(program, t, attribute_names(program, t), tracked)
    cols = {}
    for c in CANONICAL[1:]:
        cols[c] = arrow_column(ev[c], schema.field(c).type, res.texts.get(c))
    for a in attribute_names(program, t):
        cols[prefixed(t, a)] = arrow_column(ev[a], schema.field(prefixed(t, a)).type, res.texts.get(a))
    if tracked:
        cols["_split"] = pa.array(np.full(len(ev), split.index, np.int32))
        cols["_batch"] = pa.array(batch_order(split, ev["_file"]).astype(np.int32))
        cols["_row"] = pa.array(ev["_row"].to_numpy(np.int64))
        cols["_file"] = arrow_column(ev["_file"], pa.string())
    return pa.table({f.name: cols[f.name] for f in schema})     # (text columns of few values: dictionaries)


def arrow_column(s, typ: pa.DataType, given=None) -> pa.Array:
    """A frame's column as the Arrow array a blob holds: ``given`` (the reader's own text
    column, when it is the frame's), else converted; text of few values as a dictionary."""
    if typ == pa.string():
        if given is not None and len(given) == len(s):
            arr = given
        else:
            arr = pa.array(np.asarray(s, dtype=object), pa.string(), from_pandas=True)
        return _small(arr)
    if isinstance(s, pd.Series):
        return pa.Array.from_pandas(s, type=typ)
    return pa.array(s, typ)


def _small(arr: pa.Array) -> pa.Array:
    """A text column of few distinct values (a kind of place, vehicles, lines) as a dictionary
    array: moved and taken as small integers (its texts are the same)."""
    if len(arr) < 4096:
        return arr
    if pc.count_distinct(arr.slice(0, 4096)).as_py() * 4 > 4096:
        return arr          # (many values in the first 4,096 already: ids, times as texts)
    enc = arr.dictionary_encode()
    return enc if len(enc.dictionary) * 4 <= len(arr) else arr


def plain(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary columns as the plain columns they stand for."""
    if not any(pa.types.is_dictionary(f.type) for f in table.schema):
        return table
    return pa.table({n: (c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c)
                     for n, c in zip(table.column_names, table.columns)})


def ipc(table: pa.Table, store: "Store | None" = None) -> bytes:
    """A table as the bytes of an Arrow IPC stream — or, with a :class:`Files` store, as a
    reference to the file it was written to."""
    if store is not None:
        return store.table(table)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_IPC) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


#: How blobs are written: their buffers as LZ4 frames. A blob is written once and read once or
#: twice, and compressing costs less than the bytes it saves written to disk or through Spark's
#: shuffle on a cluster: the three-phrase program's blobs on 4 bus-days, 2.27 GB -> 0.73 GB
#: written by the tasks.
_IPC = pa.ipc.IpcWriteOptions(compression="lz4")
#: How blobs are written to a memory file system (:class:`Files`): as they are.
_IPC_PLAIN = pa.ipc.IpcWriteOptions()


def unipc(value) -> pa.Table:
    """The table of a blob (:func:`ipc`): its bytes, or the file a reference names."""
    return pa.ipc.open_stream(loaded(value)).read_all()


# --------------------------------------------------------------------------- where blobs live

#: How a blob that is a file's reference starts (an IPC stream never does).
FILE_MARK = b"\x00spatec-file\x00"


class Store:
    """Where a task's blobs go on their way to the next stage: in the rows it hands on
    (Spark's shuffle moves them: any cluster)."""

    kind = "shuffle"

    def put(self, data: bytes) -> bytes:
        return data

    def table(self, table: pa.Table) -> bytes:
        """A table as a blob (:func:`ipc`)."""
        return ipc(table)


class Files(Store):
    """Blobs as files in a folder every executor mounts (this machine; a shared mount): the
    rows Spark moves hold only their names, so no blob crosses the JVM. A retried task writes
    files of its own; only those of the attempt Spark keeps are named. ``memory``: the
    folder's twin in a memory file system, where each file goes while the machine has room
    for it (:mod:`spatec.storage.scratch`)."""

    kind = "files"

    def __init__(self, root: str, memory: str | None = None):
        self.root, self.memory = root, memory

    def _paths(self) -> tuple:
        import os
        import uuid

        name = f"{uuid.uuid4().hex}.arrow"
        os.makedirs(self.root, exist_ok=True)
        return os.path.join(self.root, name), os.path.join(self.memory, name) if self.memory else None

    def put(self, data: bytes) -> bytes:
        from spatec.storage.scratch import written

        def write(path):
            with open(path, "wb") as f:
                f.write(data)

        return FILE_MARK + written(*self._paths(), len(data), write)[1].encode()

    def table(self, table: pa.Table) -> bytes:
        """A table's IPC stream written straight to its file (never whole in memory)."""
        from spatec.storage.scratch import written

        def write(path):
            # (in memory, uncompressed: LZ4 cost more than the memory file system's pages
            # it saves, 3.8 s of the tasks' CPU on 4 bus-days)
            options = _IPC if self.memory is None or not path.startswith(self.memory) else _IPC_PLAIN
            with pa.OSFile(path, "wb") as f, pa.ipc.new_stream(f, table.schema, options=options) as w:
                w.write_table(table)

        return FILE_MARK + written(*self._paths(), table.nbytes, write)[1].encode()


def loaded(value):
    """A blob's bytes (a buffer): itself, or the file its reference names (memory-mapped)."""
    if value is None:
        return None
    if bytes(value[:len(FILE_MARK)]) == FILE_MARK:
        return pa.memory_map(bytes(value[len(FILE_MARK):]).decode())
    return pa.py_buffer(value)


def unpickled(value):
    """A pickled blob (:func:`pickled_events`) back."""
    got = loaded(value)
    return pickle.loads(got.read_buffer() if isinstance(got, pa.NativeFile) else got)


# --------------------------------------------------------------------------- to items

@dataclass(frozen=True)
class Recut:
    """How a grouping's group blobs become its items' (see :func:`recut`)."""

    grouping: Grouping
    items: tuple
    places: tuple           # item → the number placing it in its partition
    copies: frozenset = frozenset()     # (split, batch, row) of events left out: copies
    store: Store | None = None


def recut(job: Recut, t: str, g: int, blob, hist: bool = False) -> list:
    """A group blob (type ``t``, group ``g``: -2 for every group) as the blobs of the items
    that hold its events: ``(_to, _item, type, hist, value)`` rows of :data:`ITEMS`."""
    table = unipc(blob)
    if job.copies and "_split" in table.column_names and table.num_rows:
        keys = zip(table.column("_split").to_pylist(), table.column("_batch").to_pylist(),
                   table.column("_row").to_pylist())
        keep = np.fromiter((k not in job.copies for k in keys), bool, table.num_rows)
        if not keep.all():
            table = table.filter(pa.array(keep))
    if not table.num_rows:
        return []
    lo = table.column("_lo").to_numpy(zero_copy_only=False)
    groups = np.full(table.num_rows, g, dtype=np.int64)
    rows, its = item_rows(list(job.items), groups, lo)
    out = []
    for i in np.unique(its).tolist():
        sel = rows[its == i]
        part = table if len(sel) == table.num_rows else table.take(pa.array(sel))
        out.append((job.places[i], i, t, hist, ipc(part, job.store)))
    return out


# --------------------------------------------------------------------------- matching

@dataclass(frozen=True)
class OutputJob:
    """How a matched phrase's composites become parts: its number, format, time zone, ranges
    and the partitions its parts go to."""

    fmt: str
    tz: str | None
    phrases: tuple          # names of every phrase written, in order (``_phrase`` numbers)
    bounds: dict            # phrase → its ranges' bounds (:func:`~spatec.exec.parts.range_bounds`)
    first: dict             # phrase → the output partition of its range 0
    places: tuple           # output partition → its placing number
    store: Store | None = None


def item_frames(program, types, blobs: list) -> tuple[dict, dict]:
    """An item's blobs (``[(type, hist, bytes)]``) as canonical frames by type, and history frames."""
    frames, history = {}, {}
    by: dict = {}
    for t, hist, v in blobs:
        by.setdefault((t, bool(hist)), []).append(unipc(v))
    for (t, hist), tables in by.items():
        table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
        if t not in types or not table.num_rows:
            continue
        # (one type: a dictionary of one text, not a Python string per row)
        table = table.append_column("_type", pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(table.num_rows, np.int32)), pa.array([t], pa.string())))
        got, _ = frames_of(table, program, [t])
        if t in got:
            (history if hist else frames)[t] = got[t]
    return frames, history


def match_rows(job: MatchJob, out: "OutputJob | None", items: tuple, table: pa.Table | None, program,
               derived: dict | None = None) -> list:
    """Every item in ``table`` (rows of :data:`ITEMS`) matched; rows of :data:`MATCHED`."""
    from spatec.spatial.crs import Projector

    if table is None or not table.num_rows:
        return []
    proj = Projector(job.crs)
    its = table.column("_item").to_numpy(zero_copy_only=False)
    kinds = table.column("type").to_pylist()
    hists = table.column("hist").to_pylist()
    vals = table.column("value").to_pylist()
    types = sorted({t for p in job.plans for t in p.physical.types})
    batches = []
    hulls = {"jsonl": True, "parquet": "wkb"}.get(out.fmt, False) if out is not None else False
    for i in np.unique(its).tolist():
        clock = TaskClock(job.log, "match", item=int(i))
        at = np.flatnonzero(its == i).tolist()
        frames, history = item_frames(program, types, [(kinds[k], hists[k], vals[k]) for k in at])
        clock.step("read")
        got = match_item(job, frames, history, own=items[int(i)].own, derived=derived, projector=proj,
                         arrow_hulls=hulls)
        clock.step("match")
        batches += matched_rows(job, out, got)
        clock.step("render")
        log_matched(clock, got, sum(len(f) for f in frames.values()))
    return batches


def log_matched(clock: TaskClock, got: list, events: int) -> None:
    """An item's lines in the task log: one per phrase (its events and composites), as the
    progress display reads them."""
    for m in got:
        clock.done(phrase=m.phrase, events=events, rows=len(m.rows) if m.rows is not None else 0)


def matched_rows(job: MatchJob, out: "OutputJob | None", got: list) -> list:
    """An item's :class:`~spatec.exec.match.Matched` as rows of :data:`MATCHED`."""
    from spatec.exec.parts import range_of, render

    plans = {p.name: p for p in job.plans}
    kinds, places, phrases, ranges, ns, lows, sizes, values = [], [], [], [], [], [], [], []

    def row(kind, place, phrase, rng, n, low, value, size=0):
        kinds.append(kind), places.append(place), phrases.append(phrase), ranges.append(rng)
        ns.append(n), lows.append(low), sizes.append(size), values.append(value)

    for m in got:
        if m.produced is not None:
            row(LOW, 0, -1, 0, 0, m.produced.low, None)
            if m.produced.events:
                data = pickled_events(m.phrase, m.produced.events)
                row(EVENTS, 0, -1, 0, len(m.produced.events), None, out.store.put(data) if out is not None
                    and out.store is not None else data)
        if out is None or m.phrase not in out.bounds or not len(m.rows):
            continue
        df, payload = render(plans[m.phrase], m.rows, out.fmt, out.tz, newline=True)
        lo = df["lo"].to_numpy(np.int64)
        rng = range_of(out.bounds[m.phrase], lo)
        keys = pa.table({"lo": pa.array(lo), "hi": pa.array(df["hi"].to_numpy(np.int64)),
                         "id": pa.array(df["id"].astype(object).tolist(), pa.string())})
        k = out.phrases.index(m.phrase)
        cuts = np.flatnonzero(np.diff(rng)) + 1          # (rows sorted by lo: ranges in runs)
        ends = None if isinstance(payload, pa.Table) else np.r_[0, np.cumsum(pc.binary_length(payload).to_numpy(
            zero_copy_only=False))]
        for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(rng)].tolist()):
            r = int(rng[a])
            key = keys.slice(a, b - a)
            if ends is None:                        # GeoParquet rows: theirs under "_" names
                body = payload.slice(a, b - a)
                part = pa.Table.from_arrays(key.columns + body.columns,
                                            names=key.column_names + [f"_{c}" for c in body.column_names])
                part = part.replace_schema_metadata(payload.schema.metadata)
            else:                                   # texts: a line, a feature
                part = pa.Table.from_arrays(key.columns + [payload.slice(a, b - a)], names=key.column_names + ["value"])
            row(LINES, out.places[out.first[m.phrase] + r], k, r, b - a, None, ipc(part, out.store),
                int(ends[b] - ends[a]) if ends is not None else 0)
    if not kinds:
        return []
    return [pa.RecordBatch.from_arrays(
        [pa.array(kinds, pa.int8()), pa.array(places, pa.int32()), pa.array(phrases, pa.int32()),
         pa.array(ranges, pa.int32()), pa.array(ns, pa.int64()), pa.array(lows, pa.int64()),
         pa.array(sizes, pa.int64()), pa.array(values, pa.binary())], schema=MATCHED)]


def part_table(values: list) -> pa.Table | None:
    """A part's blobs (:func:`matched_rows`) as one table in ``(lo, hi, id)`` order, each
    composite once (a composite found in two items is one)."""
    tables = [unipc(v) for v in values if v is not None]
    if not tables:
        return None
    t = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    if len(tables) > 1:
        if any(x.schema.metadata for x in tables):       # (GeoParquet: the geo of all the blobs)
            from spatec.sinks.files import merged_metadata

            t = t.replace_schema_metadata(merged_metadata([x.schema for x in tables]))
        order = pc.sort_indices(t, [("lo", "ascending"), ("hi", "ascending"), ("id", "ascending")])
        t = t.take(order)
    if t.num_rows > 1:
        ids = t.column("id")
        same = pc.equal(ids.slice(1), ids.slice(0, t.num_rows - 1))
        again = np.r_[False, pc.fill_null(same, False).to_numpy(zero_copy_only=False)]
        if again.any():
            t = t.filter(pa.array(~again))
    return t


def derived_events(values: list) -> dict:
    """Producer → its composites as events, from the blobs of :func:`matched_rows`."""
    out: dict = {}
    for v in values:
        if v is None:
            continue
        phrase, evs = unpickled(v)
        out.setdefault(phrase, []).extend(evs)
    return out


def pickled_events(phrase: str, evs: list) -> bytes:
    """A producer's composites as events, as a blob (:func:`derived_events` reads it)."""
    return pickle.dumps((phrase, evs), protocol=pickle.HIGHEST_PROTOCOL)
