"""Plans as data: any tree of the AST's, the checker's and the planner's dataclasses as
JSON-ready values, and back; and a fingerprint of what a plan means.

:func:`to_data` writes a dataclass as ``{"@": class name, field: value, ...}``,
a tuple as ``{"@t": [...]}``, a dict as ``{"@d": [[key, value], ...]}`` (keys may
be nodes), a set as ``{"@s": [...]}``, a syntax node met before as ``{"@r": n}``; :func:`from_data` reads that back into
equal objects (only the classes of :data:`MODULES` are ever made: reading data
cannot run code). ``meaning=True`` leaves out what does not change the meaning
(source spans, fields that take no part in equality, fields at their plain default):
:func:`fingerprint` hashes that, so a plan's fingerprint is the same wherever and however
it is written, and a field added later with a default keeps the fingerprints of the plans
that do not use it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import math
from json.encoder import encode_basestring

from spatec.frontend.ast import Node, trampoline

#: Modules whose dataclasses may appear in plan data.
MODULES = ("spatec.errors", "spatec.frontend.ast", "spatec.frontend.load", "spatec.frontend.check",
           "spatec.frontend.places", "spatec.frontend.program", "spatec.plan.nodes",
           "spatec.plan.physical", "spatec.plan.order", "spatec.plan.statistics", "spatec.plan.program", "spatec.automata.compile")

_CLASSES: dict = {}


def _classes() -> dict:
    if not _CLASSES:
        for name in MODULES:
            mod = importlib.import_module(name)
            for obj in vars(mod).values():
                if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == name:
                    _CLASSES[obj.__name__] = obj
    return _CLASSES


def _scalar(obj) -> bool:
    return obj is None or isinstance(obj, (bool, int, str))


def to_data(obj, meaning: bool = False):
    """``obj`` as JSON-ready values (see the module's docstring). Without recursion: trees of
    any depth (a 10,000-term ``or`` chain)."""
    if _scalar(obj):
        return obj
    return trampoline(_to_data(obj, meaning, {}))


def _to_data(obj, meaning: bool, seen: dict):
    # a generator for trampoline: yields the walk of each child that is not a plain value.
    # ``seen``: syntax nodes written so far, by identity (by value for ``meaning``), each
    # numbered when complete: a node met again is written as ``{"@r": its number}`` (the
    # checker's types map is keyed by every subexpression: without this a 10,000-term
    # chain would be written 10,000 times over)
    def sub(x):
        return x if _scalar(x) else (yield _to_data(x, meaning, seen))

    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"@f": repr(obj)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        node = isinstance(obj, Node)
        if node:
            key = obj if meaning else id(obj)
            if key in seen:
                return {"@r": seen[key]}
        out = {"@": type(obj).__name__}
        for f in dataclasses.fields(obj):
            if meaning and (not f.compare or f.name == "span"):
                continue
            value = getattr(obj, f.name)
            if meaning and f.default is not dataclasses.MISSING and _is_default(value, f.default):
                continue    # (a field added with a default leaves the meaning of plans without it alone)
            out[f.name] = yield from sub(value)
        if node:
            seen[key] = len(seen)
        return out
    if isinstance(obj, (tuple, list)):
        items = []
        for x in obj:
            items.append((yield from sub(x)))
        return {"@t": items} if isinstance(obj, tuple) else items
    if isinstance(obj, dict):
        pairs = []
        for k, v in obj.items():
            pairs.append([(yield from sub(k)), (yield from sub(v))])
        return {"@d": pairs}
    if isinstance(obj, (set, frozenset)):
        items = []      # (sorted below: each item numbers its own nodes, apart from the rest)
        for x in obj:
            items.append(x if _scalar(x) else (yield _to_data(x, meaning, {})))
        return {"@s": sorted(items, key=_json)}
    raise TypeError(f"{type(obj).__name__} is not plan data")


def _is_default(value, default) -> bool:
    """Whether a field's value is its default, a plain one (None, a bool, a number, text, ())."""
    if type(value) is not type(default):
        return False
    return value == default if isinstance(default, (type(None), bool, int, float, str, tuple)) else False


def from_data(data):
    """The objects :func:`to_data` wrote (without recursion, as :func:`to_data`)."""
    if not isinstance(data, (list, dict)):
        return data
    return trampoline(_from_data(data, []))


def _from_data(data, nodes: list):
    # ``nodes``: the syntax nodes made so far, in the order :func:`_to_data` numbered them
    def sub(x):
        return x if not isinstance(x, (list, dict)) else (yield _from_data(x, nodes))

    if isinstance(data, list):
        out = []
        for x in data:
            out.append((yield from sub(x)))
        return out
    if "@t" in data:
        out = []
        for x in data["@t"]:
            out.append((yield from sub(x)))
        return tuple(out)
    if "@d" in data:
        out = {}
        for k, v in data["@d"]:
            key = _hashable((yield from sub(k)))
            out[key] = yield from sub(v)
        return out
    if "@s" in data:
        out = []
        for x in data["@s"]:
            out.append(_hashable(x if not isinstance(x, (list, dict)) else (yield _from_data(x, []))))
        return frozenset(out)
    if "@f" in data:
        return float(data["@f"])
    if "@r" in data:
        return nodes[data["@r"]]
    cls = _classes().get(data.get("@"))
    if cls is None:
        raise ValueError(f"not plan data: unknown class {data.get('@')!r}")
    kw = {}
    for k, v in data.items():
        if k != "@":
            kw[k] = yield from sub(v)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    obj = cls(**{k: v for k, v in kw.items() if k in names})
    for k, v in kw.items():       # fields not taken by __init__
        if k not in names:
            object.__setattr__(obj, k, v)
    if isinstance(obj, Node):
        nodes.append(obj)
    return obj


def _json(v) -> str:
    """``json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` of
    JSON-ready values, the same text, without recursion (and in linear time)."""
    out: list = []
    stack = [(False, v)]        # (literal text?, value)
    while stack:
        lit, x = stack.pop()
        if lit:
            out.append(x)
        elif isinstance(x, str):
            out.append(encode_basestring(x))
        elif isinstance(x, list):
            stack.append((True, "]"))
            for i in range(len(x) - 1, -1, -1):
                stack.append((False, x[i]))
                if i:
                    stack.append((True, ","))
            stack.append((True, "["))
        elif isinstance(x, dict):
            stack.append((True, "}"))
            keys = sorted(x)
            for i in range(len(keys) - 1, -1, -1):
                stack.append((False, x[keys[i]]))
                stack.append((True, ("," if i else "") + encode_basestring(keys[i]) + ":"))
            stack.append((True, "{"))
        else:
            out.append(json.dumps(x))
    return "".join(out)


def _hashable(v):
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


def dumps(obj) -> str:
    """``obj`` as JSON text (:func:`to_data`). Containers are written as a flat table (``{"@g":
    [...]}``: each list or object once, children by index ``{"@n": i}``), so that text of any
    depth reads back with the standard JSON reader."""
    table: list = []

    def flat(v):
        # v's containers into the table, iteratively; its own entry's index
        top = len(table)
        table.append(None)
        todo = [(v, top)]
        while todo:
            x, at = todo.pop()
            if isinstance(x, list):
                items = []
                for y in x:
                    if isinstance(y, (list, dict)):
                        table.append(None)
                        todo.append((y, len(table) - 1))
                        items.append({"@n": len(table) - 1})
                    else:
                        items.append(y)
                table[at] = items
            else:
                obj = {}
                for k, y in x.items():
                    if isinstance(y, (list, dict)):
                        table.append(None)
                        todo.append((y, len(table) - 1))
                        obj[k] = {"@n": len(table) - 1}
                    else:
                        obj[k] = y
                table[at] = obj
        return top

    d = to_data(obj)
    if not isinstance(d, (list, dict)):
        return json.dumps(d, ensure_ascii=False)
    flat(d)
    return json.dumps({"@g": table}, separators=(",", ":"), ensure_ascii=False)


def loads(text: str):
    d = json.loads(text)
    if isinstance(d, dict) and "@g" in d:
        table = d["@g"]

        def ref(x):
            return table[x["@n"]] if isinstance(x, dict) and len(x) == 1 and "@n" in x else x

        # children come after their parents in the table: resolve every reference in place
        for entry in table:
            if isinstance(entry, list):
                entry[:] = [ref(x) for x in entry]
            else:
                for k, x in entry.items():
                    entry[k] = ref(x)
        d = table[0]
    return from_data(d)


def fingerprint(obj) -> str:
    """A hash of what ``obj`` means (:func:`to_data` with ``meaning``): 16 hex digits."""
    text = _json(to_data(obj, meaning=True))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
