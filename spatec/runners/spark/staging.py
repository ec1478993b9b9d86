"""The staging directory: canonical events as Arrow IPC files, by phrase and group,
written by the driver or by ingest tasks and read by the tasks that match them.

:class:`Stager` writes one chunk of events per phrase (the keyed types' events
by group, hashed from the key; the broadcast types' whole; for ``successive``
under a key that is not the source, every keyed event with its group, for
history); :func:`merge_stages` puts the chunks' files together, in input order.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from spatec.plan.nodes import PhrasePlan
from spatec.runtime.events import attribute_names
from spatec.runtime.routing import key_buckets
from spatec.storage import scratch
from spatec.storage.atomic import safe_name

CANONICAL = ("_type", "_id", "_source", "_t", "_lo", "_hi", "_place", "_lon", "_lat", "_r", "_geom")


def runs_of(order: np.ndarray, groups: np.ndarray):
    """``(rows, group)`` for each run of equal ``groups`` (in ``order``'s order: sorted by
    group), ``rows`` the run's indices from ``order``; empty runs left out."""
    cuts = np.flatnonzero(np.diff(groups)) + 1
    for idx, g in zip(np.split(order, cuts), np.split(groups, cuts)):
        if len(idx):
            yield idx, int(g[0])


class Stager:
    """One chunk of canonical frames (type → pandas), written per phrase as Arrow IPC
    files under ``root``: the groups of :func:`phrase_groups`, hashed here
    (:func:`key_buckets`) instead of by Spark's exchange. A replay's events are
    one chunk (ingested on the driver) or many (ingested in Spark tasks,
    :mod:`spatec.runners.spark.ingest`); :func:`merge_stages` puts the chunks'
    files together, in input order, for the tasks that match them."""

    def __init__(self, program, frames: dict, root: str, tag: str = "d", texts: dict | None = None):
        self.program = program
        self.frames = {t: df for t, df in frames.items() if len(df)}
        self.texts = texts or {}        # type → its frame's text columns as Arrow (IngestResult.texts)
        self.root = root
        self.tag = tag
        self._tables: dict = {}
        self._wanted: dict = {}         # type → every column the phrases of :meth:`share` read
        self._grouped: dict = {}        # (type, key, buckets) → the groups' rows, and their tables
        os.makedirs(root, exist_ok=True)

    def share(self, plans, windows: dict | None = None) -> None:
        """Tell the stager every phrase it will :meth:`stage` this chunk for: phrases that
        group a type's events alike (one key, one number of groups: ``per vehicle`` in each)
        then take each group's rows from the events once for all of them, with every column
        any of them reads, and each writes its own columns of that (:meth:`_group_tables`):
        the same files as when each takes its own rows, one gather instead of one a phrase.
        ``windows``: phrase → its stretch of time, for those grouped by time (left out)."""
        for plan in plans:
            if (windows or {}).get(plan.name):
                continue            # (grouped by time: its own rows)
            for t in plan.physical.types:
                if t in self.frames and t in set(plan.physical.keyed):
                    self._wanted.setdefault(t, set()).update(self._columns(plan, t))

    def table(self, t: str, columns: tuple | None = None) -> pa.Table:
        """Type ``t``'s canonical table, or just ``columns`` of it: converting a column of
        Python strings to Arrow costs about as much as typing it did, so a column no
        phrase reads is left out rather than converted and dropped. On one thread: a
        chunk is staged in a Spark task, beside others that keep the cores busy, where a
        pool of threads only adds their start and join."""
        if (t, columns) not in self._tables:
            self._tables[t, columns] = canonical_table(self.program, t, self.frames[t], columns, nthreads=1,
                                                       texts=self.texts.get(t))
        return self._tables[t, columns]

    def used(self, plan: PhrasePlan, t: str) -> pa.Table:
        """Type ``t``'s table with the columns the phrase can read: the canonical ones but
        ``_type`` (one value per file), and the attributes the plan reads
        (``plan.physical.attributes``: its expressions, key and source). The worker puts
        the others back as missing (:func:`~spatec.runners.spark.match.staged_fn`)."""
        return self.table(t, self._columns(plan, t))

    def _columns(self, plan: PhrasePlan, t: str) -> tuple:
        return staged_columns(self.program, plan, t)

    def _all_columns(self, t: str) -> tuple:
        return (*CANONICAL, *attribute_names(self.program, t))

    def _group_tables(self, plan: PhrasePlan, t: str, key: tuple, buckets: int):
        """Type ``t``'s keyed events hashed into ``buckets`` groups by ``key``: each event's
        group (-1: no key value) and ``[(group, rows, table)]``: each group's rows (indices
        into the frame, in order) and its table with the phrase's columns (:meth:`used`),
        or the path of its file already written. The grouping is made once per (type, key,
        buckets); for every phrase :meth:`share` named, the rows are gathered once per group
        from the table of all their columns and written once, one file each phrase reads
        its columns of (:func:`staged_columns`: the same values, types and schema, metadata
        included, as the phrase's own gather of :meth:`used`)."""
        got = self._grouped.get((t, key, buckets))
        if got is None:
            b = key_buckets(self.frames[t], key, buckets)
            rows = np.flatnonzero(b >= 0)
            order = rows[np.argsort(b[rows], kind="stable")]
            got = self._grouped[t, key, buckets] = {"b": b, "order": order, "parts": list(runs_of(order, b[order])),
                                                    "taken": {}, "n": len(self._grouped)}
        wanted = self._wanted.get(t)
        mine = self._columns(plan, t)
        source = None
        if wanted is not None and set(mine) <= wanted:
            source = self.table(t, tuple(c for c in self._all_columns(t) if c in wanted))
            # a table with a text column given as Arrow has no pandas metadata (canonical_table),
            # nor has the phrase's own then; else it would have its own columns': not shared
            if source.schema.metadata is not None or not self._given(t, mine):
                source = None
        out = []
        # every group's rows taken at once, then each group a slice of them: one take of the
        # table rather than one a group (a chunk of 16 bus-days' input is cut into 54 groups)
        grouped = None
        starts = np.cumsum([0] + [len(idx) for idx, _ in got["parts"]])
        for (idx, g), at in zip(got["parts"], starts.tolist()):
            if source is not None and g in got["taken"]:
                table = got["taken"][g]
            else:
                if grouped is None:
                    grouped = (source if source is not None else self.used(plan, t)).take(pa.array(got["order"]))
                table = grouped.slice(at, len(idx))
                if source is not None:
                    table = got["taken"][g] = self.write(table, f"shared{got['n']}-b{g}-{safe_name(t)}")
            out.append((g, idx, table))
        return got["b"], out

    def _given(self, t: str, columns) -> bool:
        """Whether :func:`canonical_table` takes one of ``columns`` of type ``t`` as the Arrow
        text it was given (:attr:`texts`)."""
        given = self.texts.get(t) or {}
        return any(c in given and len(given[c]) == len(self.frames[t]) for c in columns)

    def write(self, table: pa.Table, name: str) -> str:
        return write_arrow(table, os.path.join(self.root, f"{self.tag}-{name}.arrow"))

    def stage(self, plan: PhrasePlan, buckets: int, window: int | None = None) -> dict:
        """This chunk's files for the phrase: ``{"groups": {group: {type: path}},
        "all": {type: path}, "src": {type: path}}`` — the keyed types' events by
        group; the broadcast types' (every group reads them); and, for
        ``successive`` under a key that is not the source, every keyed event of
        the sourced types with its group (``_g``), from which a group takes its
        sources' events held by other groups as history (:func:`source_history`).

        ``window`` (µs, :func:`time_window`; a phrase without a key): the groups
        are stretches of time instead, ``[g W, (g + 1) W)``, each holding the
        events that a match starting in it can bind (``"window"`` in the result)."""
        phys = plan.physical
        types = [t for t in phys.types if t in self.frames]
        keyed = set(phys.keyed)
        tag = safe_name(plan.name)
        out: dict = {"groups": {}, "all": {}, "src": {}, "rows": {}, "lo": {}}
        if window:
            out["window"] = window
        for t in types:
            if t not in keyed:
                out["all"][t] = self.write(self.used(plan, t), f"{tag}-all-{safe_name(t)}")
                continue
            df = self.frames[t]
            if window:
                table = self.used(plan, t)
                bs, order = window_groups(df["_lo"].to_numpy(np.int64), window, plan.span_bound)
                groups = [(g, idx, table.take(pa.array(idx))) for idx, g in runs_of(order, bs)]
            else:
                b, groups = self._group_tables(plan, t, tuple(phys.key), buckets)
            lo = df["_lo"].to_numpy(np.int64)
            for g, idx, part in groups:
                out["rows"][g] = out["rows"].get(g, 0) + len(idx)
                out["lo"][g] = widened(out["lo"].get(g), (int(lo[idx].min()), int(lo[idx].max())))
                path = part if isinstance(part, str) else self.write(part, f"{tag}-b{g}-{safe_name(t)}")
                out["groups"].setdefault(g, {})[t] = path
            if t in phys.source_history:
                out["src"][t] = self.write(self.used(plan, t).append_column("_g", pa.array(b.astype(np.int32))),
                                           f"{tag}-src-{safe_name(t)}")
        return out


def staged_columns(program, plan: PhrasePlan, t: str) -> tuple:
    """The columns of type ``t``'s staged events the phrase reads, in the staged files' order:
    the canonical ones but ``_type`` (one value per file), and the attributes the plan reads
    (``plan.physical.attributes_of``). A file several phrases share has theirs all
    (:meth:`Stager.share`); each takes its own (:func:`phrase_columns`)."""
    keep = set(plan.physical.attributes_of(t))
    return tuple(c for c in (*CANONICAL, *attribute_names(program, t)) if c != "_type" and (c in CANONICAL or c in keep))


def phrase_columns(table: pa.Table, columns: tuple) -> pa.Table:
    """``table`` with only ``columns`` (:func:`staged_columns`), in their order."""
    return table if table.column_names == list(columns) else table.select(list(columns))


def window_groups(lo: np.ndarray, window: int, span: int) -> tuple[np.ndarray, np.ndarray]:
    """(group, row) of every event's place in :func:`time_window`'s stretches, in order
    of group then row: an event starting at ``lo`` is in stretch ``lo // W`` and, when it
    starts at most ``span`` into it, in the one before too."""
    g = np.floor_divide(lo, window)
    rows = np.arange(len(lo))
    halo = (lo - g * window) <= span
    gs = np.concatenate([g, g[halo] - 1])
    rs = np.concatenate([rows, rows[halo]])
    order = np.lexsort((rs, gs))
    return gs[order], rs[order]


def write_arrow(table: pa.Table, path: str, place: bool = True) -> str:
    """``table`` as an Arrow IPC file (the staging directory's format) meant for ``path``:
    there, or in its staging folder's twin in memory (:func:`spatec.storage.scratch.place`);
    returns where. ``place=False``: at ``path`` exactly (a file kept beside another)."""
    def write(p: str) -> str:
        with pa.OSFile(p, "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table)
        return p

    if not place:
        return write(path)
    return scratch.written(path, table.nbytes, write)[1]


def read_arrow(path: str) -> pa.Table:
    """An Arrow IPC file written by :func:`write_arrow`, memory-mapped."""
    return pa.ipc.open_file(pa.memory_map(path)).read_all()


def merge_stages(chunks: list) -> dict:
    """The chunks' :meth:`Stager.stage` outputs for one phrase, in input order → each
    group's files: ``{group: {"frames": {type: [(chunk, path)]}, "history": {type: [(chunk, path)]}}}``.
    With no keyed events but broadcast ones, the broadcast types form the one group 0."""
    groups: dict = {}
    every: dict = {}
    src: dict = {}
    window = next((st["window"] for _, st in chunks if st.get("window")), None)
    for c, st in chunks:
        for g, files in st["groups"].items():
            spec = groups.setdefault(g, {"frames": {}, "history": {}, "key": g, "rows": 0})
            spec["rows"] += st["rows"][g]
            spec["lo"] = widened(spec.get("lo"), st["lo"][g])      # its events' least and greatest start
            for t, path in files.items():
                spec["frames"].setdefault(t, []).append((c, path))
        for t, path in st["all"].items():
            every.setdefault(t, []).append((c, path))
        for t, path in st["src"].items():
            src.setdefault(t, []).append((c, path))
    if not groups and every:
        groups[0] = {"frames": {}, "history": {}, "key": 0, "rows": 0}
    for g, spec in groups.items():
        if window:           # the matches this stretch of time reports: those that start in it
            spec["own"] = (g * window, (g + 1) * window)
        for t, paths in every.items():
            spec["frames"][t] = list(paths)
        for t, paths in src.items():
            spec["history"][t] = list(paths)
    return {g: groups[g] for g in sorted(groups)}


def widened(span: tuple | None, more: tuple) -> tuple:
    """The least and greatest of ``span`` (None: none yet) and ``more``."""
    return more if span is None else (min(span[0], more[0]), max(span[1], more[1]))


def load_staged(files: list, drop: dict) -> pa.Table:
    """Staged files ``[(chunk, path)]`` as one table, in order; the events each
    chunk's ``drop`` names (copies of earlier chunks' events) left out."""
    tables = []
    for c, path in files:
        table = read_arrow(path)
        gone = drop.get(c)
        if gone:
            keep = pc.invert(pc.is_in(table.column("_id"), value_set=pa.array(sorted(gone), pa.string())))
            table = table.filter(keep)
        tables.append(table)
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="permissive")


def source_history(table: pa.Table, g: int) -> pa.Table:
    """From a type's ``src`` table (every keyed event with its group ``_g``): the
    events of group ``g``'s sources that other groups hold (``successive``'s history)."""
    gs = table.column("_g")
    src = table.column("_source")
    mine = pc.unique(pc.filter(src, pc.and_(pc.equal(gs, g), pc.is_valid(src))))
    keep = pc.and_(pc.is_in(src, value_set=mine), pc.not_equal(gs, g))
    return table.filter(pc.fill_null(keep, False)).drop_columns(["_g"])


def starting_in(table: pa.Table, lo_range: tuple | None) -> pa.Table:
    """The events of ``table`` that start in ``lo_range`` (both ends in; all without one)."""
    if lo_range is None or not table.num_rows:
        return table
    lo = table.column("_lo")
    return table.filter(pc.and_(pc.greater_equal(lo, lo_range[0]), pc.less_equal(lo, lo_range[1])))


#: Setting: where canonical events are staged as Parquet for Spark to read —
#: ``auto`` (a temporary directory, when the executors share this machine's
#: file system: a ``local`` master or a standalone one on 127.0.0.1/localhost),
#: ``off`` (send them through ``createDataFrame``), or a directory every
#: executor can read (a shared mount).
STAGING_KEY = "spark.spatec.staging"


def canonical_table(program, type_name: str, df: pd.DataFrame, columns=None, nthreads=None,
                    texts: dict | None = None) -> pa.Table:
    """One type's canonical rows (canonical columns, then its attributes; or ``columns``)
    as Arrow, with the types Spark can hold (a column of nothing but missing values is a
    string column). ``nthreads``: as :meth:`pyarrow.Table.from_pandas`. ``texts``: some
    of ``df``'s text columns as Arrow already (:attr:`~spatec.events.canonical.IngestResult.texts`),
    taken as they are rather than converted from Python strings again."""
    if columns is None:
        columns = list(CANONICAL) + attribute_names(program, type_name)
    columns = list(columns)
    given = {c: a for c, a in (texts or {}).items() if c in columns and len(a) == len(df)}
    rest = [c for c in columns if c not in given]
    # object columns of Python values: Arrow infers each column's one type
    table = pa.Table.from_pandas(df, columns=rest, preserve_index=False, nthreads=nthreads)
    if given:
        table = pa.table({c: given[c] if c in given else table.column(c) for c in columns})
    return table.cast(pa.schema([_spark_field(f) for f in table.schema]))


def staging_dir(spark) -> str | None:
    """The directory to stage events in (see :data:`STAGING_KEY`), None: do not stage."""
    setting = spark.conf.get(STAGING_KEY, "auto").strip()
    if setting.lower() == "off":
        return None
    if setting.lower() != "auto":
        os.makedirs(setting, exist_ok=True)
        return setting
    if not on_this_machine(spark):
        return None
    global _STAGE
    if _STAGE is None or not os.path.isdir(_STAGE):
        _STAGE = tempfile.mkdtemp(prefix="spatec-stage-")
        atexit.register(shutil.rmtree, _STAGE, True)
    return _STAGE


_STAGE: str | None = None


def on_this_machine(spark) -> bool:
    """Whether Spark's executors run on this machine (a ``local`` master, or a standalone
    one on 127.0.0.1/localhost): they see its files, and its memory file system."""
    master = spark.sparkContext.master
    return master.startswith("local") or "://127.0.0.1" in master or "://localhost" in master


#: Setting: where the staging folder's scratch files go while the machine has memory
#: to spare (:mod:`spatec.storage.scratch`) — ``auto`` (Linux's ``/dev/shm`` when it is a
#: memory file system and the executors run on this machine), ``off`` (every file in the
#: staging folder), or the path of a memory file system's folder.
STAGING_MEMORY_KEY = "spark.spatec.stagingMemory"


def staging_memory(spark) -> str | None:
    """The memory file system the staging folder's twin goes in (see :data:`STAGING_MEMORY_KEY`), None: none."""
    setting = spark.conf.get(STAGING_MEMORY_KEY, "auto").strip()
    if setting.lower() == "off":
        return None
    if setting.lower() != "auto":
        os.makedirs(setting, exist_ok=True)
        return setting
    return scratch.memory_dir() if on_this_machine(spark) else None


def _spark_field(f: pa.Field) -> pa.Field:
    if pa.types.is_null(f.type):
        return pa.field(f.name, pa.string())
    return f


def column_dtypes(program, type_name: str, df: pd.DataFrame) -> dict:
    names = attribute_names(program, type_name)
    return {c: str(df[c].dtype) for c in list(CANONICAL) + names if c in df}


def missing_column(n: int, dtype: str | None):
    """``n`` missing values as :func:`restore_dtypes` makes a column of None of ``dtype``
    (NaN, NA, NaT; None where the dtype holds no missing value), made as such
    rather than converted from None one by one."""
    if dtype == "float64":
        return np.full(n, np.nan)
    if dtype is None or dtype == "object":
        return None
    try:
        return pd.array(np.full(n, None, dtype=object), dtype=dtype)
    except (TypeError, ValueError):
        return None


def restore_dtypes(df: pd.DataFrame, dtypes: dict) -> pd.DataFrame:
    """Column dtypes as the driver had them (a round trip through Spark may widen ints)."""
    for c, dt in dtypes.items():
        if c in df and str(df[c].dtype) != dt:
            try:
                df[c] = df[c].astype(dt)
            except (TypeError, ValueError):
                pass
    return df
