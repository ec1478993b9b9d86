"""What a task does, over Arrow batches: the functions an executor's tasks run (Spark's
``mapInArrow``), written once and runnable anywhere.

- :func:`typed_batches`: one split read and typed, as Arrow rows of :func:`typed_schema` —
  its events (``_kind`` 0) and its rejects (``_kind`` 1), with where each came from (split,
  batch, row), its position's cells and, for each grouping with a key, its group.
- :func:`match_partition` (after the shuffle that brings an item's events together): each
  item's events matched (:func:`~spatec.exec.match.match_item`),
  each phrase's composites rendered (:func:`~spatec.exec.parts.render`) and cut into its
  output ranges: one blob of Arrow IPC per (phrase, range), placed in the partition of its
  part; for a phrase others read, its composites as events (a pickled blob) and the least
  ``lo`` it left undecided.
- :func:`part_batches` (after the second shuffle): a part's blobs put together, in
  ``(lo, hi, id)`` order, each composite once.
"""
from __future__ import annotations

import io
import pickle
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from spatec.exec.decide import cell_keys
from spatec.exec.groups import Grouping, group_of
from spatec.exec.match import CANONICAL, MatchJob, event_dtypes, frames_of, match_item, prefixed
from spatec.runtime.events import attribute_names

#: Kinds of typed rows.
EVENT, REJECT = 0, 1
#: Kinds of a match task's rows.
LINES, EVENTS, LOW = 0, 1, 2

_ARROW = {"object": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "Int64": pa.int64(),
          "boolean": pa.bool_(), "bool": pa.bool_()}


def group_column(g: int) -> str:
    return f"_g{g}"


def typed_schema(program, type_name: str, groupings: list) -> pa.Schema:
    """The Arrow rows a split of ``type_name`` is typed into (see the module)."""
    dt = event_dtypes(program, type_name)
    fields = [pa.field("_kind", pa.int8()), pa.field("_split", pa.int32()), pa.field("_batch", pa.int32()),
              pa.field("_row", pa.int64()), pa.field("_file", pa.string())]
    fields += [pa.field(c, _ARROW[dt[c]]) for c in CANONICAL[1:]]
    fields += [pa.field(prefixed(type_name, a), _ARROW[dt[a]]) for a in attribute_names(program, type_name)]
    fields += [pa.field("_c0", pa.int64()), pa.field("_c1", pa.int64())]
    fields += [pa.field(group_column(g.index), pa.int32()) for g in groupings if _keyed(g, type_name)]
    fields += [pa.field("reason", pa.string()), pa.field("record", pa.string())]
    return pa.schema(fields)


def _keyed(g: Grouping, type_name: str) -> bool:
    return bool(g.key) and type_name in g.keyed and not g.derived


def typed_batches(split, program, groupings: list) -> list:
    """One split read and typed (:func:`~spatec.exec.splits.read_split`) as record batches of
    :func:`typed_schema`: its events, then its rejects."""
    from spatec.exec.inprocess import batch_order
    from spatec.exec.splits import read_split

    res = read_split(split, program)
    t = split.type
    schema = typed_schema(program, t, groupings)
    out = []
    ev = res.events
    n = len(ev)
    if n:
        cols: dict = {"_kind": pa.array(np.zeros(n, np.int8)), "_split": pa.array(np.full(n, split.index, np.int32)),
                      "_batch": pa.array(batch_order(split, ev["_file"]).astype(np.int32)),
                      "_row": pa.array(ev["_row"].to_numpy(np.int64)),
                      "_file": _text(ev["_file"], res.texts.get("_file"))}
        for c in CANONICAL[1:]:
            cols[c] = _column(ev[c], schema.field(c).type, res.texts.get(c))
        for a in attribute_names(program, t):
            cols[prefixed(t, a)] = _column(ev[a], schema.field(prefixed(t, a)).type, res.texts.get(a))
        c0, c1 = cell_keys(ev)
        cols["_c0"], cols["_c1"] = pa.array(c0), pa.array(c1)
        for g in groupings:
            if _keyed(g, t):
                cols[group_column(g.index)] = pa.array(group_of(g, ev, t).astype(np.int32))
        cols["reason"] = pa.nulls(n, pa.string())
        cols["record"] = pa.nulls(n, pa.string())
        out.append(pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema))
    rej = res.rejects
    m = len(rej)
    if m:
        cols = {f.name: pa.nulls(m, f.type) for f in schema}
        cols.update({"_kind": pa.array(np.ones(m, np.int8)), "_split": pa.array(np.full(m, split.index, np.int32)),
                     "_batch": pa.array(batch_order(split, rej["file"]).astype(np.int32)),
                     "_row": pa.array(rej["row"].to_numpy(np.int64)),
                     "_file": pa.array(rej["file"].astype(object).tolist(), pa.string()),
                     "reason": pa.array(rej["reason"].astype(object).tolist(), pa.string()),
                     "record": pa.array(rej["record"].astype(object).tolist(), pa.string())})
        out.append(pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema))
    return out


def _text(s: pd.Series, given=None) -> pa.Array:
    if given is not None and len(given) == len(s):
        return given
    return pa.array(s.astype(object).tolist(), pa.string())


def _column(s, typ: pa.DataType, given=None) -> pa.Array:
    if typ == pa.string():
        if given is not None and len(given) == len(s):
            return given
        return pa.array(np.asarray(s, dtype=object), pa.string(), from_pandas=True)
    if isinstance(s, pd.Series):
        return pa.Array.from_pandas(s, type=typ)
    return pa.array(s, typ)


# --------------------------------------------------------------------------- after it

MATCHED = pa.schema([pa.field("_kind", pa.int8()), pa.field("_to", pa.int32()), pa.field("_phrase", pa.int32()),
                     pa.field("_range", pa.int32()), pa.field("n", pa.int64()), pa.field("low", pa.int64()),
                     pa.field("value", pa.binary())])


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


def match_partition(job: MatchJob, out: OutputJob | None, items: tuple, table: pa.Table, program,
                    derived: dict | None = None) -> list:
    """Every item in ``table`` (rows of :func:`assign`) matched; rows of :data:`MATCHED`."""
    from spatec.spatial.crs import Projector

    proj = Projector(job.crs)
    batches = []
    if table is None or not table.num_rows:
        return batches
    its = table.column("_item").to_numpy(zero_copy_only=False)
    types = sorted({t for p in job.plans for t in p.physical.types})
    for i in np.unique(its).tolist():
        sub = table.filter(pa.array(its == i))
        frames, history = frames_of(sub, program, types)
        item = items[int(i)]
        hulls = {"jsonl": True, "parquet": "wkb"}.get(out.fmt, False) if out is not None else False
        got = match_item(job, frames, history, own=item.own, derived=derived, projector=proj, arrow_hulls=hulls)
        batches += matched_rows(job, out, got)
    return batches


def matched_rows(job: MatchJob, out: OutputJob | None, got: list) -> list:
    """An item's :class:`~spatec.exec.match.Matched` as rows of :data:`MATCHED`."""
    from spatec.exec.parts import range_of, render

    plans = {p.name: p for p in job.plans}
    kinds, places, phrases, ranges, ns, lows, values = [], [], [], [], [], [], []

    def row(kind, place, phrase, rng, n, low, value):
        kinds.append(kind), places.append(place), phrases.append(phrase), ranges.append(rng)
        ns.append(n), lows.append(low), values.append(value)

    for m in got:
        if m.produced is not None:
            row(LOW, 0, -1, 0, 0, m.produced.low, None)
            if m.produced.events:
                row(EVENTS, 0, -1, 0, len(m.produced.events), None,
                    pickle.dumps((m.phrase, m.produced.events), protocol=pickle.HIGHEST_PROTOCOL))
        if out is None or m.phrase not in out.bounds or not len(m.rows):
            continue
        df, payload = render(plans[m.phrase], m.rows, out.fmt, out.tz)
        lo = df["lo"].to_numpy(np.int64)
        rng = range_of(out.bounds[m.phrase], lo)
        keys = pa.table({"lo": pa.array(lo), "hi": pa.array(df["hi"].to_numpy(np.int64)),
                         "id": pa.array(df["id"].astype(object).tolist(), pa.string())})
        k = out.phrases.index(m.phrase)
        cuts = np.flatnonzero(np.diff(rng)) + 1          # (rows sorted by lo: ranges in runs)
        for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(rng)].tolist()):
            r = int(rng[a])
            key = keys.slice(a, b - a)
            if isinstance(payload, pa.Table):       # GeoParquet rows: theirs under "_" names
                body = payload.slice(a, b - a)
                part = pa.Table.from_arrays(key.columns + body.columns,
                                            names=key.column_names + [f"_{c}" for c in body.column_names])
                part = part.replace_schema_metadata(payload.schema.metadata)
            else:                                   # texts: a line, a feature
                part = pa.Table.from_arrays(key.columns + [payload.slice(a, b - a)], names=key.column_names + ["value"])
            blob = _ipc(part)
            row(LINES, out.places[out.first[m.phrase] + r], k, r, b - a, None, blob)
    if not kinds:
        return []
    return [pa.RecordBatch.from_arrays(
        [pa.array(kinds, pa.int8()), pa.array(places, pa.int32()), pa.array(phrases, pa.int32()),
         pa.array(ranges, pa.int32()), pa.array(ns, pa.int64()), pa.array(lows, pa.int64()),
         pa.array(values, pa.binary())], schema=MATCHED)]


def _ipc(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


def _unipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def part_table(values: list) -> pa.Table | None:
    """A part's blobs (:func:`matched_rows`) as one table in ``(lo, hi, id)`` order, each
    composite once (a composite found in two items is one)."""
    tables = [_unipc(v) for v in values if v is not None]
    if not tables:
        return None
    t = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    if len(tables) > 1:
        import pyarrow.compute as pc

        order = pc.sort_indices(t, [("lo", "ascending"), ("hi", "ascending"), ("id", "ascending")])
        t = t.take(order)
    ids = t.column("id")
    if t.num_rows > 1:
        import pyarrow.compute as pc

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
        phrase, evs = pickle.loads(v)
        out.setdefault(phrase, []).extend(evs)
    return out
