"""Plans as data: any tree of the AST's, the checker's and the planner's dataclasses as
JSON-ready values, and back; and a fingerprint of what a plan means.

:func:`to_data` writes a dataclass as ``{"@": class name, field: value, ...}``,
a tuple as ``{"@t": [...]}``, a dict as ``{"@d": [[key, value], ...]}`` (keys may
be nodes), a set as ``{"@s": [...]}``; :func:`from_data` reads that back into
equal objects (only the classes of :data:`MODULES` are ever made: reading data
cannot run code). ``meaning=True`` leaves out what does not change the meaning
(source spans, fields that take no part in equality): :func:`fingerprint` hashes
that, so a plan's fingerprint is the same wherever and however it is written.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import math

#: Modules whose dataclasses may appear in plan data.
MODULES = ("spatec.errors", "spatec.frontend.ast", "spatec.frontend.load", "spatec.frontend.check",
           "spatec.frontend.places", "spatec.frontend.program", "spatec.plan.nodes",
           "spatec.plan.physical", "spatec.plan.program", "spatec.automata.compile")

_CLASSES: dict = {}


def _classes() -> dict:
    if not _CLASSES:
        for name in MODULES:
            mod = importlib.import_module(name)
            for obj in vars(mod).values():
                if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == name:
                    _CLASSES[obj.__name__] = obj
    return _CLASSES


def to_data(obj, meaning: bool = False):
    """``obj`` as JSON-ready values (see the module's docstring)."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"@f": repr(obj)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {"@": type(obj).__name__}
        for f in dataclasses.fields(obj):
            if meaning and (not f.compare or f.name == "span"):
                continue
            out[f.name] = to_data(getattr(obj, f.name), meaning)
        return out
    if isinstance(obj, tuple):
        return {"@t": [to_data(x, meaning) for x in obj]}
    if isinstance(obj, list):
        return [to_data(x, meaning) for x in obj]
    if isinstance(obj, dict):
        return {"@d": [[to_data(k, meaning), to_data(v, meaning)] for k, v in obj.items()]}
    if isinstance(obj, (set, frozenset)):
        items = [to_data(x, meaning) for x in obj]
        return {"@s": sorted(items, key=lambda x: json.dumps(x, sort_keys=True))}
    raise TypeError(f"{type(obj).__name__} is not plan data")


def from_data(data):
    """The objects :func:`to_data` wrote."""
    if isinstance(data, list):
        return [from_data(x) for x in data]
    if not isinstance(data, dict):
        return data
    if "@t" in data:
        return tuple(from_data(x) for x in data["@t"])
    if "@d" in data:
        return {_hashable(from_data(k)): from_data(v) for k, v in data["@d"]}
    if "@s" in data:
        return frozenset(_hashable(from_data(x)) for x in data["@s"])
    if "@f" in data:
        return float(data["@f"])
    cls = _classes().get(data.get("@"))
    if cls is None:
        raise ValueError(f"not plan data: unknown class {data.get('@')!r}")
    kw = {k: from_data(v) for k, v in data.items() if k != "@"}
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    obj = cls(**{k: v for k, v in kw.items() if k in names})
    for k, v in kw.items():       # fields not taken by __init__
        if k not in names:
            object.__setattr__(obj, k, v)
    return obj


def _hashable(v):
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


def dumps(obj) -> str:
    """``obj`` as JSON text (:func:`to_data`)."""
    return json.dumps(to_data(obj), separators=(",", ":"), ensure_ascii=False)


def loads(text: str):
    return from_data(json.loads(text))


def fingerprint(obj) -> str:
    """A hash of what ``obj`` means (:func:`to_data` with ``meaning``): 16 hex digits."""
    text = json.dumps(to_data(obj, meaning=True), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
