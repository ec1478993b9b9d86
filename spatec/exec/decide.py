"""What only the whole input decides: copies across splits, the metric CRS, the final
watermark, and the rejects in input order.

- **Copies** (SPEC §4): an event whose ``(type, source, t)`` — for a type without a source,
  whose record (its id) — an earlier split already had is a reject, ``duplicate of <id>``;
  within a split :func:`~spatec.events.canonical.to_events` rejected them already. The
  first in input order (split, then record) wins. Only sources whose time spans in two
  splits meet can have copies across them (:func:`suspect_sources`), so the rule runs over
  those alone. The Spark executor runs the same rule as a window over ``(type, source, t)``
  ordered by ``(split, batch, row)``; the in-process one here (:func:`copies_across`).
- **The CRS**: the UTM zone of the median position, from each split's positions counted in
  0.1° cells (:func:`~spatec.spatial.crs.position_cells`, an aggregate on Spark).
- **The final watermark**: the latest ``hi`` of every event used.
- **Rejects** are written in input order: by split, then by the batch (poll) within it,
  then by record number (:data:`REJECT_ORDER`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from spatec.events.canonical import DUPLICATE, REJECT_COLUMNS
from spatec.spatial.crs import choose_crs, event_extents, extent_cells

#: The columns rejects are ordered by (besides their own ``type, file, row, reason, record``).
REJECT_ORDER = ("_split", "_batch", "row")

#: A cell of the 0.1° grid as one integer (:func:`cell_keys`), and back.
_CELL_SHIFT = 1 << 21


def cell_keys(ev: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each event's cell(s) of :func:`~spatec.spatial.crs.position_cells` as integers: a
    point's one cell (twice: the second -1), a geometry's the cells of the two corners of
    its bounds (the second -1 where they are one point); -1 for no finite position."""
    x0, x1, y0, y1 = event_extents(ev)
    first = _cells(x0, y0)
    other = (x1 != x0) | (y1 != y0)
    second = np.where(other, _cells(x1, y1), -1)
    return first, second


def _cells(lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    from spatec.spatial.crs import CELLS_PER_DEGREE

    ok = np.isfinite(lon) & np.isfinite(lat)
    out = np.full(len(lon), -1, dtype=np.int64)
    i = np.floor(lon[ok] * CELLS_PER_DEGREE).astype(np.int64) + _CELL_SHIFT
    j = np.floor(lat[ok] * CELLS_PER_DEGREE).astype(np.int64) + _CELL_SHIFT
    out[ok] = i * (2 * _CELL_SHIFT) + j
    return out


def cells_of(keys: dict) -> dict:
    """Counts of cell keys (``{key: count}``, :func:`cell_keys`) as
    :func:`~spatec.spatial.crs.position_cells`' summary ``{(i, j): count}``."""
    out: dict = {}
    for k, n in keys.items():
        k = int(k)
        if k < 0:
            continue
        i, j = divmod(k, 2 * _CELL_SHIFT)
        out[(i - _CELL_SHIFT, j - _CELL_SHIFT)] = out.get((i - _CELL_SHIFT, j - _CELL_SHIFT), 0) + int(n)
    return out


def metric_crs(program, override: str | None, cells: dict) -> str:
    """The run's metric CRS (``override``, the program's, else the data's: SPEC §1)."""
    return choose_crs(program, {}, override, cells=cells)


def frame_cells(ev: pd.DataFrame) -> dict:
    return extent_cells(*event_extents(ev)) if len(ev) else {}


# --------------------------------------------------------------------------- copies

def copy_keys(ev: pd.DataFrame, sourced: bool) -> pd.DataFrame:
    """The identity of each event (``k1``, ``k2``): ``(source, t)``, or its id alone."""
    if sourced:
        return pd.DataFrame({"k1": ev["_source"].astype(object).to_numpy(), "k2": ev["_t"].to_numpy(np.int64)})
    return pd.DataFrame({"k1": ev["_id"].astype(object).to_numpy(), "k2": np.zeros(len(ev), np.int64)})


def suspect_sources(spans: pd.DataFrame) -> set:
    """Sources whose time spans in two splits meet (only they can have copies across splits).
    ``spans``: one row per (split, source) with ``source``, ``lo``, ``hi`` (its least and
    greatest ``t`` there)."""
    out = set()
    for s, g in spans.groupby("source", sort=False):
        if len(g) < 2:
            continue
        lo = g["lo"].to_numpy()
        hi = g["hi"].to_numpy()
        order = np.argsort(lo, kind="stable")
        lo, hi = lo[order], hi[order]
        end = np.maximum.accumulate(hi)
        if (lo[1:] <= end[:-1]).any():
            out.add(s)
    return out


def source_spans(ev: pd.DataFrame, split: int) -> pd.DataFrame:
    """One row per source of a split's events: ``split, source, lo, hi`` (least, greatest ``t``)."""
    if not len(ev):
        return pd.DataFrame({"split": [], "source": [], "lo": [], "hi": []})
    g = ev.groupby(ev["_source"].astype(object), sort=False)["_t"].agg(["min", "max"])
    return pd.DataFrame({"split": split, "source": g.index.to_numpy(), "lo": g["min"].to_numpy(),
                         "hi": g["max"].to_numpy()})


def copies_across(frames: list, sourced: bool) -> list:
    """For the events of one type's splits (``frames``: their frames in input order), a mask
    per frame of the events that are copies of an event of an earlier split."""
    if len(frames) < 2:
        return [np.zeros(len(f), bool) for f in frames]
    keys = [copy_keys(f, sourced) for f in frames]
    if sourced:
        spans = pd.concat([source_spans(f, i) for i, f in enumerate(frames)], ignore_index=True)
        suspects = suspect_sources(spans)
        if not suspects:
            return [np.zeros(len(f), bool) for f in frames]
        mine = [np.asarray(k["k1"].isin(suspects)) for k in keys]
    else:
        mine = [np.ones(len(k), bool) for k in keys]
    at = pd.concat([k[m].assign(f=i, j=np.flatnonzero(m)) for i, (k, m) in enumerate(zip(keys, mine))],
                   ignore_index=True)
    again = at.duplicated(["k1", "k2"], keep="first").to_numpy()
    out = [np.zeros(len(f), bool) for f in frames]
    for i, j in zip(at["f"].to_numpy()[again], at["j"].to_numpy()[again]):
        out[int(i)][int(j)] = True
    return out


def duplicate_rejects(type_name: str, ev: pd.DataFrame, records: list) -> pd.DataFrame:
    """Rejects of the events ``ev`` (copies of earlier ones), their raw ``records`` given."""
    return pd.DataFrame({"type": [type_name] * len(ev), "file": ev["_file"].astype(object).to_numpy(),
                         "row": ev["_row"].to_numpy(np.int64),
                         "reason": [f"{DUPLICATE}{i}" for i in ev["_id"].astype(object)],
                         "record": records})


# --------------------------------------------------------------------------- the counts

@dataclass
class IngestSummary:
    """How many records each input had, and what became of them."""

    rows: list = field(default_factory=list)   # (type, path, read, used, rejected)

    @property
    def read(self) -> int:
        return sum(r[2] for r in self.rows)

    @property
    def used(self) -> int:
        return sum(r[3] for r in self.rows)

    @property
    def rejected(self) -> int:
        return sum(r[4] for r in self.rows)


@dataclass(frozen=True)
class Decisions:
    """What the whole input decided: the CRS, the final watermark, the counts per input."""

    crs: str
    final_watermark: int
    counts: IngestSummary
    rejects: int = 0


def in_order(rejects: pd.DataFrame) -> pd.DataFrame:
    """Rejects (with :data:`REJECT_ORDER` columns) in input order, as the file lists them."""
    if not len(rejects):
        return rejects[list(REJECT_COLUMNS)]
    return rejects.sort_values(list(REJECT_ORDER), kind="mergesort")[list(REJECT_COLUMNS)].reset_index(drop=True)
