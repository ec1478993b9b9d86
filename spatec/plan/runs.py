"""Runs (SPEC §7) and the partition key: a run is cut from all of its source's events, so a
phrase with runs is split into keys only when the key is the runs' source.

``per KEY`` on a phrase whose runs are cut by another attribute (``per line`` over buses'
runs) would send one bus's fixes to several keys, and each key would cut its runs from
part of them. Such a phrase runs as one partition instead: ``per`` becomes conditions
(``V.KEY == W.KEY``), and every event of a run must share KEY (:func:`runs_share`), which
the run's summary checks as it grows. An inferred key that is not the source is dropped
(:func:`runs_split`): ``R.k == B.k`` says nothing of the run's other events.
"""
from __future__ import annotations

from spatec.frontend.program import PhraseInfo, Program


def _has_all(program: Program, type_name: str, attrs) -> bool:
    decl = program.events.get(type_name)
    return decl is not None and all(any(a.name == k for a in decl.attrs) for k in attrs)


def runs_share(program: Program, info: PhraseInfo, per: str | None) -> tuple:
    """``(per,)`` when some run's type has attribute ``per`` and is not cut by it (its source
    is another attribute): each of its runs' events must share the value; else ()."""
    if per is None:
        return ()
    for r in info.runs.values():
        if _has_all(program, r.type, (per,)) and r.source != per:
            return (per,)
    return ()


def runs_split(program: Program, info: PhraseInfo, key: tuple) -> bool:
    """Whether partitioning by ``key`` would split some run's source over several keys."""
    return any(_has_all(program, r.type, key) and tuple(key) != (r.source,) for r in info.runs.values())
