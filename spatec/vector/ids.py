"""Composite ids of many matches at once, from their bound events' ids as Arrow text.

:func:`~spatec.automata.machine.composite_id` is the SHA-256 of
``json.dumps([phrase, [[var, id], ...]], separators=(",", ":"), ensure_ascii=False)``
(pairs sorted), its first 32 hex digits. Here every match's payload is joined by
Arrow from the phrase's fixed text and one column of ids per variable (JSON text
between quotes as it is; :func:`json.encoder.encode_basestring` of each id where a
column has a character JSON escapes), and the digests are taken by ``map`` over
``hashlib.sha256`` in C: no Python string, format or encode per match.

>>> import pyarrow as pa
>>> from spatec.automata.machine import composite_id
>>> got = composite_ids("P", ["A", "B"], [pa.array(["e1", 'q"'] ), pa.array(["e2", "x"])])
>>> got == [composite_id("P", [("A", "e1"), ("B", "e2")]), composite_id("P", [("A", 'q"'), ("B", "x")])]
True
"""
from __future__ import annotations

import hashlib
import operator
from json.encoder import encode_basestring

import pyarrow as pa
import pyarrow.compute as pc

from spatec.events.columns import json_plain_text

#: Matches whose payloads are joined and hashed at a time (bounds the payloads' bytes held).
BLOCK = 65_536

_SHA = hashlib.sha256
_HEX = type(_SHA()).hexdigest
_CUT = operator.itemgetter(slice(None, 32))


def composite_ids(phrase: str, variables: list, ids: list) -> list:
    """The composite id of each match: ``variables`` sorted and distinct, ``ids`` one Arrow
    string array per variable (no missing value), one id per match."""
    n = len(ids[0]) if ids else 0
    out: list = []
    for a in range(0, n, BLOCK):
        pay = payloads(phrase, variables, [c.slice(a, BLOCK) for c in ids])
        out += map(_CUT, map(_HEX, map(_SHA, pay.cast(pa.binary()).to_numpy(zero_copy_only=False))))
    return out


def plain_ids(ids: list) -> bool:
    """Whether every id (Python values) is a str that JSON writes as it is, in quotes
    (:func:`~spatec.events.columns.json_plain_text`): a payload's template takes it so."""
    return all(type(x) is str for x in ids) and json_plain_text(pa.array(ids, pa.string()))


def payloads(phrase: str, variables: list, ids: list) -> pa.Array:
    """Each match's JSON payload ``["phrase",[["A","id"],...]]`` (an Arrow string array)."""
    pieces: list = []
    text = f"[{encode_basestring(phrase)},["
    for i, (v, col) in enumerate(zip(variables, ids)):
        text += ("," if i else "") + f"[{encode_basestring(v)},"
        if json_plain_text(col):
            pieces += [text + '"', col]
            text = '"]'
        else:
            pieces += [text, pa.array([encode_basestring(x) for x in col.to_pylist()], pa.string())]
            text = "]"
    pieces.append(text + "]]")
    return pc.binary_join_element_wise(*pieces, "")
