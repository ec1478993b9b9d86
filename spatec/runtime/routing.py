"""Events to keys, for every runner: one routing (:func:`route`), one hash (:func:`key_buckets`).

A phrase's physical plan (``plan.physical``) says which types it reads, which go
to the key of their values (``keyed``) and which to every key (``broadcast``).
An event of a keyed type without a value for the key relates to no other event
(SPEC §4: ``per`` means the events share its value) and is routed nowhere.

Groups of keys (Spark tasks, live state groups) are chosen by one hash of the
key's values as text (:func:`key_buckets`, vectorised over a frame's columns, and
:func:`bucket_of` for keys one at a time: the same numbers).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from spatec.plan.nodes import PhrasePlan
from spatec.runtime.events import event_order


def key_of(ev, key: tuple):
    """The key of an event of a keyed type: its values of ``key``; None when one is missing."""
    if len(key) == 1:
        v = ev.attrs.get(key[0])
        return None if v is None else (v,)
    k = tuple(ev.attrs.get(a) for a in key)
    return None if any(v is None for v in k) else k


def route(phys, evs_by_type: dict) -> tuple[dict, list]:
    """The events of a batch (type → events) by key: ``(key → events, broadcast events)``,
    in the order given. Without a key every event goes to the one key ``()``."""
    by_key: dict = {}
    broadcast: list = []
    key = phys.key
    keyed = phys.keyed
    for t in phys.types:
        evs = evs_by_type.get(t, ())
        if not evs:
            continue
        if not key:
            by_key.setdefault((), []).extend(evs)
        elif t not in keyed:
            broadcast.extend(evs)
        else:
            for ev in evs:
                k = key_of(ev, key)
                if k is None:
                    continue
                got = by_key.get(k)
                if got is None:
                    by_key[k] = [ev]
                else:
                    got.append(ev)
    return by_key, broadcast


def partitions(plan: PhrasePlan, evs_by_type: dict, history: dict | None = None) -> dict:
    """A batch's partitions: key value → its events (broadcast types in every partition),
    each sorted by event time.

    ``history`` (type → events): events of other partitions, held elsewhere
    (another Spark group), that ``successive`` may need as history only."""
    phys = plan.physical
    parts, broadcast = route(phys, evs_by_type)
    if broadcast:
        if not parts and not phys.keyed:
            parts[()] = []
        for k in parts:
            parts[k] = parts[k] + broadcast
    if phys.source_history:
        _add_source_history(phys, parts, evs_by_type, history or {})
    for k in parts:
        parts[k].sort(key=event_order)
    return parts


def _add_source_history(phys, parts: dict, evs_by_type: dict, history: dict) -> None:
    """``successive`` means nothing of the same type and source between (SPEC §4):
    when the partition key is not the source, a partition also needs, as history
    only, the events of its sources that the key sent to other partitions."""
    from spatec.automata.machine import HistoryEv

    for t in phys.source_history:
        by_source: dict = {}
        for ev in list(evs_by_type.get(t, ())) + list(history.get(t, ())):
            if ev.source is not None:
                by_source.setdefault(ev.source, []).append(ev)
        for k, evs in parts.items():
            mine = {id(e) for e in evs}
            sources = {e.source for e in evs if e.type == t and e.source is not None}
            extra = [HistoryEv(e.type, e.id, e.source, e.t, e.lo, e.hi, e.loc, e.attrs)
                     for s in sources for e in by_source[s] if id(e) not in mine]
            evs.extend(extra)


def key_buckets(df: pd.DataFrame, key, buckets: int) -> np.ndarray:
    """Each event's group from its key values (as text);
    -1 for an event without a key value (it relates to nothing)."""
    n = len(df)
    if not key:
        return np.zeros(n, dtype=np.int64)
    ok = np.ones(n, dtype=bool)
    h = np.zeros(n, dtype=np.uint64)
    for k in key:
        codes, uniques = pd.factorize(df[k], use_na_sentinel=True)      # hash each value once
        ok &= codes >= 0
        hu = pd.util.hash_array(np.array([str(u) for u in uniques] + [""], dtype=object))
        h = h * np.uint64(1_000_003) ^ hu[codes]                        # -1 (missing): the ""
    out = (h % np.uint64(buckets)).astype(np.int64)
    out[~ok] = -1
    return out


def bucket_of(keys: list, buckets: int) -> list:
    """:func:`key_buckets` of keys given one by one (tuples of values, none missing)."""
    if not keys:
        return []
    n = len(keys[0])
    cols = pd.DataFrame({i: pd.Series([k[i] for k in keys], dtype=object) for i in range(n)})
    return key_buckets(cols, tuple(range(n)), buckets).tolist()
