"""Matching on the staged exchange: one Spark task per few groups, each reading its
groups' Arrow files, running :func:`~spatec.runtime.batch.phrase_rows` (fast paths
included) and handing its rows back (as rows, pickled rows or JSON lines parts).

Phrases over phrases (SPEC §8; REFERENCE decision 37): the phrases that read no other
phrase's composites run in one job; a task of a phrase that another reads also pickles its
composites as events and the least ``lo`` it left undecided (``<rows file>.derived``); the
driver then evaluates the phrases over phrases in flow order over those events
(:func:`derived_on_driver`), with the local runner's own function and watermark rule."""
from __future__ import annotations

import os
import pickle
from typing import Callable

import pandas as pd

from spatec.plan.nodes import PhrasePlan
from spatec.runners.spark.early import Finished, collect_watching, mark_done
from spatec.runners.spark.exchange import RAW_SCHEMA, raw_frame
from spatec.runners.spark.prefilter import prefilter_regions, prefiltered
from spatec.runners.spark.scheduling import (
    BUCKET_ROWS,
    BUCKET_ROWS_KEY,
    TaskClock,
    dealt,
    items_of,
    ranked_items,
    split_in_time,
    task_log,
)
from spatec.runners.spark.staging import (
    load_staged,
    missing_column,
    phrase_columns,
    read_arrow,
    restore_dtypes,
    source_history,
    staged_columns,
    starting_in,
    write_arrow,
)
from spatec.plan.support import require_derived_only, require_flow
from spatec.runtime.batch import phrase_rows
from spatec.runtime.derived import BatchFlows, Produced
from spatec.runtime.events import attribute_names
from spatec.runtime.rows import rows_frame, rows_starting, time_fields
from spatec.sinks.files import write_jsonl_part, write_parquet_part
from spatec.spatial.crs import Projector
from spatec.storage import scratch
from spatec.storage.atomic import safe_name


def run_staged(spark, plans, program, staged: dict, crs: str, final_w: int, dtypes: dict, engine: str | None,
               root: str, collect: bool | str, drop: dict | None = None, tz: str | None = None,
               ready: Callable[[str, list], None] | None = None) -> dict:
    """Every phrase over its staged groups (``staged``: phrase → :func:`merge_stages`):
    per phrase, a lazy DataFrame of :data:`RAW_SCHEMA`, or with ``collect`` its rows,
    run now and read back from the files the tasks pickled them to under ``root``;
    with ``collect="jsonl"`` or ``"parquet"``, the tasks' parts of the output file
    instead (``[(path, keys)]`` for :func:`~spatec.sinks.files.merge_jsonl_parts`,
    :func:`~spatec.sinks.files.merge_parquet_parts`; JSON lines times in ``tz``, default UTC).

    ``ready(phrase, parts)`` (with ``"jsonl"``, ``"parquet"``): each phrase's parts handed on as
    soon as they are all written, while the job may still match other phrases
    (:mod:`~spatec.runners.spark.early`), and again should the job's result differ; the
    phrases over phrases' when the driver has made them.

    Phrases over phrases need ``collect``: the phrases they read run first, in Spark, and they
    on the driver (:func:`derived_on_driver`)."""
    if collect:
        require_derived_only(plans, "Spark batch")
        first = [p for p in plans if not p.physical.derived]
        consumed = {t for p in plans for t in p.physical.derived}
        produced = {p.name: Produced() for p in first if p.name in consumed}
        out = _one_job(spark, first, program, staged, crs, final_w, dtypes, engine, root, collect, drop, tz,
                       produced, ready)
        if len(first) < len(plans):
            later = derived_on_driver(plans, program, crs, final_w, produced, root, collect, tz)
            out.update(later)
            if ready is not None and collect in PARTS:
                for name, parts in later.items():
                    ready(name, parts)
        return out
    require_flow(plans, "Spark batch (lazy output)")
    return {plan.name: staged_groups(spark, staged[plan.name], plan, program, crs, final_w, dtypes, engine,
                                     None, drop) for plan in plans}


def _one_job(spark, plans, program, staged: dict, crs: str, final_w: int, dtypes: dict, engine: str | None,
             root: str, collect: bool | str, drop: dict | None, tz: str | None = None,
             produced: dict | None = None, ready: Callable[[str, list], None] | None = None) -> dict:
    """Every phrase's groups matched in one Spark job: the groups of all phrases dealt
    to the tasks together by size (:func:`dealt`), so the phrases share the Python
    workers, and one phrase's short tail is filled by another's groups instead of each
    phrase's job waiting for its slowest task. Each group's rows go to a file under
    ``root`` (as :func:`staged_groups` with ``rows_dir``). ``produced`` (phrase →
    :class:`~spatec.runtime.derived.Produced`): the phrases whose composites another reads,
    given their tasks' composites as events and least undecided ``lo``. With parts and
    ``ready``, the tasks take the phrases one after another (:func:`ranked_items`) and each
    phrase's parts are handed to ``ready`` as soon as its items are done
    (:func:`~spatec.runners.spark.early.collect_watching`)."""
    part = collect if collect in PARTS else None
    items, ones = [], []
    cores = max(1, spark.sparkContext.defaultParallelism)
    most = int(spark.conf.get(BUCKET_ROWS_KEY, str(BUCKET_ROWS)))
    log = task_log(spark)
    for i, plan in enumerate(plans):
        groups = staged[plan.name]
        rows_dir = os.path.join(root, "rows-" + safe_name(plan.name))
        specs = split_in_time([groups[g] for g in sorted(groups)], plan, cores, most) if groups else []
        items += [(i, g, spec) for g, spec in enumerate(specs)]
        regions = prefilter_regions(plan, program, crs) if engine else {}
        ones.append(staged_item_fn(plan, program, crs, final_w, dtypes, regions, engine, rows_dir, drop or {},
                                   part, log, tz, produce=plan.name in (produced or {})))
    out: dict = {plan.name: [] for plan in plans}
    handed: dict = {}
    early = part is not None and ready is not None
    if items:
        sizes = [spec["rows"] for _, _, spec in items]
        seeds, tasks = dealt(spark, sizes)
        claims = os.path.join(root, "claims")
        done = os.path.join(root, "done") if early else None
        frame = seeds.mapInPandas(_items_fn(ones, items, tasks, claims, crs, done), "p long, " + ROWS_SCHEMA)
        finished = None
        if early:
            def complete(i: int, rows: list) -> None:
                handed[i] = rows, _parts(rows)
                ready(plans[i].name, handed[i][1])

            finished = Finished(done, [i for i, _, _ in items], sizes, complete, claims)
        got = collect_watching(spark, frame, finished)
        for r in sorted(got, key=lambda r: (r.p, r.g)):
            out[plans[r.p].name].append(r)
            if plans[r.p].name in (produced or {}):
                with open(r.path + ".derived", "rb") as f:
                    events, low = pickle.load(f)
                produced[plans[r.p].name].events.extend(events)
                produced[plans[r.p].name].add_low(low)
    if part:
        parts = {}
        for i, plan in enumerate(plans):
            rows = [(int(r.g), r.path, int(r.n)) for r in out[plan.name]]
            if i in handed and handed[i][0] == rows:
                parts[plan.name] = handed[i][1]
                continue
            parts[plan.name] = _parts(rows)
            if early:       # (not handed on yet, or with rows other than the job's: now)
                ready(plan.name, parts[plan.name])
        return parts
    return {name: read_rows(rs) for name, rs in out.items()}


def _parts(rows: list) -> list:
    """``[(path, keys)]`` of a phrase's items' rows ``(g, path, n)``."""
    return [(path, read_arrow(path + ".keys")) for _, path, _ in rows]


def _items_fn(ones: list, items: list, tasks: list, claims: str, crs: str, done: str | None = None):
    """The function each task of :func:`_one_job` runs: its items (phrase, group, spec),
    and, once done, other tasks' unbegun ones (:func:`items_of` with claims). With
    ``done`` (a folder), every item is taken in the driver's order (:func:`ranked_items`)
    and marked done there as it is (:func:`~spatec.runners.spark.early.mark_done`)."""
    kinds = [i for i, _, _ in items]
    sizes = [spec["rows"] for _, _, spec in items]

    def run(batches):
        proj = Projector(crs)
        os.makedirs(claims, exist_ok=True)
        for pdf in batches:
            own = {k for seed in pdf["g"].tolist() for k in tasks[seed]}
            taken = ranked_items(pdf, tasks, claims, kinds, sizes) if done else items_of(pdf, tasks, claims)
            for k in taken:
                i, g, spec = items[k]
                row = ones[i](g, spec, k not in own, proj)
                if done:
                    mark_done(done, k, i, int(row["g"].iat[0]), row["path"].iat[0], int(row["n"].iat[0]))
                yield row.assign(p=i)[["p", "g", "path", "n"]]

    return run


#: Bytes a composite is reckoned to take in a task's part of the output file, when the
#: part is placed (:func:`spatec.storage.scratch.place`): a line with a hull of ~40
#: vertices is 1.4 KB.
PART_ROW_BYTES = 2048

#: What a staged task returns when its rows go to a file (``collect``).
ROWS_SCHEMA = "g long, path string, n long"

#: Output formats whose files the tasks write in parts that the driver merges
#: (:func:`~spatec.sinks.files.merge_jsonl_parts`, :func:`~spatec.sinks.files.merge_parquet_parts`).
PARTS = ("jsonl", "parquet")


def staged_groups(spark, groups: dict, plan: PhrasePlan, program, crs: str, final_w: int, dtypes: dict,
                  engine: str | None, rows_dir: str | None = None, drop: dict | None = None, part: str | None = None,
                  tz: str | None = None):
    """The phrase's composites (:data:`RAW_SCHEMA`; with ``rows_dir``, :data:`ROWS_SCHEMA`:
    where each group pickled its rows): one Spark task per group of :func:`merge_stages`.
    ``drop``: chunk → ids of its events found again in an earlier chunk (dropped)."""
    schema = ROWS_SCHEMA if rows_dir else RAW_SCHEMA
    if not groups:
        return spark.createDataFrame([], schema)
    specs = split_in_time([groups[g] for g in sorted(groups)], plan, max(1, spark.sparkContext.defaultParallelism),
                          int(spark.conf.get(BUCKET_ROWS_KEY, str(BUCKET_ROWS))))
    regions = prefilter_regions(plan, program, crs) if engine else {}
    seeds, tasks = dealt(spark, [spec["rows"] for spec in specs])
    fn = staged_fn(plan, program, crs, final_w, dtypes, dict(enumerate(specs)), regions,
                   engine, tasks, rows_dir, drop or {}, part, log=task_log(spark), tz=tz)
    return seeds.mapInPandas(fn, schema)


def read_rows(results) -> list:
    """The rows the tasks pickled, in group order (``results``: :data:`ROWS_SCHEMA` rows)."""
    rows = []
    for r in sorted(results, key=lambda r: r.g):
        with open(r.path, "rb") as f:
            got = pickle.load(f)
        if len(got) != r.n:
            raise RuntimeError(f"{r.path}: {len(got)} rows, the task wrote {r.n}")
        rows.extend(got)
    return rows


def staged_fn(plan: PhrasePlan, program, crs: str, final_w: int, dtypes: dict, groups: dict, regions: dict,
              engine: str | None, tasks: list, rows_dir: str | None = None, drop: dict | None = None,
              part: str | None = None, log: str | None = None, tz: str | None = None):
    """The function each task runs: its groups (``tasks``: the groups each seed stands
    for, :func:`dealt`), each by :func:`staged_item_fn`; with ``rows_dir``, also other
    tasks' unbegun groups (claims)."""
    one = staged_item_fn(plan, program, crs, final_w, dtypes, regions, engine, rows_dir, drop, part, log, tz)

    def run(batches):
        proj = Projector(crs)
        claims = None
        if rows_dir is not None:      # the output goes to files: a task may take another's groups
            claims = os.path.join(rows_dir, "claims")
            os.makedirs(claims, exist_ok=True)
        for pdf in batches:
            own = {i for seed in pdf["g"].tolist() for i in tasks[seed]}
            for g in items_of(pdf, tasks, claims):
                yield one(g, groups[g], g not in own, proj)

    return run


def staged_item_fn(plan: PhrasePlan, program, crs: str, final_w: int, dtypes: dict, regions: dict,
                   engine: str | None, rows_dir: str | None = None, drop: dict | None = None,
                   part: str | None = None, log: str | None = None, tz: str | None = None,
                   produce: bool = False):
    """``one(g, spec, taken, projector)``: a group's Arrow files → (leaf pre-filter) →
    :func:`~spatec.runtime.batch.phrase_rows` → raw output rows (or, with
    ``rows_dir``, the rows pickled to a file there, and where; with ``part``
    (``jsonl``, ``parquet``) too, the group's part of the output file and its keys,
    :func:`~spatec.sinks.files.write_jsonl_part`, :func:`~spatec.sinks.files.write_parquet_part`).
    ``taken``: another task's group (for the task log, :data:`TASK_LOG_KEY`). ``produce``
    (with ``rows_dir``): another phrase reads this one's composites; the group's, as events, and
    the least ``lo`` it left undecided are pickled to ``<rows file>.derived``."""
    drop = drop or {}

    def frame(t, table, prefilter=True):
        table = phrase_columns(table, staged_columns(program, plan, t))     # (a file phrases share)
        if prefilter and t in regions:
            table = prefiltered(table, regions[t], crs, engine)
        # ids stay Arrow text (pandas' ArrowDtype): the fast path makes strings of the ids
        # its composites bind only (vexpr.TextColumn), the rest read them as strings
        ids = pd.Series(pd.arrays.ArrowExtensionArray(table.column("_id")), name="_id")
        df = table.drop_columns(["_id"]).to_pandas()
        df.insert(0, "_type", t)
        df.insert(1, "_id", ids)
        kept = dtypes.get(t, {})
        unread = [a for a in attribute_names(program, t) if a not in df]
        for a in unread:              # an attribute the phrase never reads (Stager.used)
            df[a] = missing_column(len(df), kept.get(a))
        return restore_dtypes(df, {c: dt for c, dt in kept.items() if c != "_id" and c not in unread})

    def one(g, spec: dict, taken: bool, proj: Projector) -> pd.DataFrame:
        clock = TaskClock(log, "match", phrase=plan.name, item=int(g))
        frames = {t: frame(t, starting_in(load_staged(fs, drop), spec.get("lo_range")))
                  for t, fs in spec["frames"].items()}
        history = {t: frame(t, source_history(load_staged(fs, drop), spec["key"]), prefilter=False)
                   for t, fs in spec["history"].items()}
        clock.step("load")
        produced = Produced() if produce else None
        # the fast path's hulls as Arrow text for JSON lines parts, as WKB (a hull column) for
        # GeoParquet parts: each takes them as they are (a phrase others read keeps them as
        # values, for GeoParquet parts as before)
        arrow = False
        if rows_dir is not None:
            arrow = {"jsonl": True, "parquet": False if produce else "wkb"}.get(part, False)
        rows, _size = phrase_rows(plan, program, frames, proj, final_w, history=history,
                                  arrow_hulls=arrow, produced=produced)
        if "own" in spec:
            rows = rows_starting(rows, *spec["own"])
            if produced is not None:    # (local in time: nothing is left undecided)
                t0, t1 = spec["own"]
                produced.events = [e for e in produced.events if t0 <= e.lo < t1]
        clock.step("match")
        if rows_dir is None:
            clock.done(events=int(spec["rows"]), rows=len(rows))
            return raw_frame(rows)
        os.makedirs(rows_dir, exist_ok=True)

        def write(path: str) -> None:
            tmp = f"{path}.{os.getpid()}.tmp"     # (two attempts of one task may both write it)
            try:
                if part:      # the output file's part, and the keys the driver merges them by
                    if part == "jsonl":     # (text times in tz; GeoParquet's are instants)
                        keys = write_jsonl_part(rows_frame(plan, rows), tmp, time_fields(plan), tz)  # deduplicated
                    else:
                        keys = write_parquet_part(rows_frame(plan, rows), tmp, time_fields(plan))
                    write_arrow(keys, tmp + ".keys", place=False)
                    os.replace(tmp + ".keys", path + ".keys")
                else:
                    with open(tmp, "wb") as f:
                        pickle.dump(rows, f, protocol=pickle.HIGHEST_PROTOCOL)
                if produced is not None:
                    with open(tmp + ".derived", "wb") as f:
                        pickle.dump((produced.events, produced.low), f, protocol=pickle.HIGHEST_PROTOCOL)
                    os.replace(tmp + ".derived", path + ".derived")
                os.replace(tmp, path)
            except OSError:
                for t in (tmp, tmp + ".keys", tmp + ".derived"):     # (a full memory file system: on disk again)
                    if os.path.exists(t):
                        os.unlink(t)
                raise

        # in the staging folder's twin in memory while there is room (about PART_ROW_BYTES a row)
        _, path = scratch.written(os.path.join(rows_dir, f"g{int(g)}.{part or 'pickle'}"),
                                  len(rows) * PART_ROW_BYTES, write)
        clock.step("write")
        clock.done(events=int(spec["rows"]), rows=len(rows), taken=taken)
        return pd.DataFrame({"g": pd.Series([int(g)], dtype="int64"), "path": [path],
                             "n": pd.Series([len(rows)], dtype="int64")})

    return one


def derived_on_driver(plans, program, crs: str, final_w: int, produced: dict, root: str, collect: bool | str,
                      tz: str | None = None) -> dict:
    """The phrases over phrases of ``plans``, in flow order, on the driver: each over the
    composites of the phrases it reads (``produced``: producer → what its tasks handed on),
    with its own final watermark (at most its producers' frontiers), as the local runner
    evaluates them (:class:`~spatec.runtime.derived.BatchFlows`). Per phrase its rows, or
    with ``collect`` ``"jsonl"``/``"parquet"`` one part of its output file, as a task's."""
    flows = BatchFlows(plans, final_w)
    proj = Projector(crs)
    part = collect if collect in PARTS else None
    out: dict = {}
    for plan in plans:
        if not plan.physical.derived:
            if plan.name in produced:
                flows.done(plan, produced[plan.name])
            continue
        mine = flows.produced(plan)
        rows, _size = phrase_rows(plan, program, {}, proj, flows.watermark(plan), derived=flows.inputs(plan),
                                  produced=mine)
        flows.done(plan, mine)
        if not part:
            out[plan.name] = rows
            continue
        rows_dir = os.path.join(root, "rows-" + safe_name(plan.name))
        os.makedirs(rows_dir, exist_ok=True)
        path = os.path.join(rows_dir, f"driver.{part}")
        if part == "jsonl":
            keys = write_jsonl_part(rows_frame(plan, rows), path, time_fields(plan), tz)
        else:
            keys = write_parquet_part(rows_frame(plan, rows), path, time_fields(plan))
        write_arrow(keys, path + ".keys", place=False)
        out[plan.name] = [(path, read_arrow(path + ".keys"))]     # (as a task's part: keys read back)
    return out
