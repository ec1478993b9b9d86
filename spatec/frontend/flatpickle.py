"""Pickling trees of any depth (REFERENCE decision 35): syntax trees, operator trees and
what holds them pickle and unpickle without recursion proportional to their depth.

Python's pickle (and cloudpickle, which Spark uses for the functions it sends to its
workers) writes an object's state as it meets it: a node, then its children inside it, so
the pickler recurses once per level of a tree (a few interpreter frames each) and stops at
a few hundred levels. Unpickling is a stack machine and does not recurse.

The trick: a deep node is written as ``_new_after(cls, prefix)`` followed by its own state,
where ``prefix`` is the list of the deep nodes below it, children before parents. The
pickler writes the prefix first; each node in it finds its deep children already in the
pickle's memo (written as a reference), so every node is written at a bounded depth; the
node's own state then refers to its children by memo too. Identity is kept: a node met
twice (a subtree the checker's maps share, a plan's leaves) is written once and read back
as one object, as plain pickle does. Shallow trees (fewer than :data:`DEEP` levels) are
pickled exactly as before.

Containers whose maps hold many overlapping subtrees (the checker's ``types``, keyed by
every subexpression) list the deep nodes of all of them in one prefix
(:class:`FlatContainer`), so that each is walked once, not once per key.

Nodes in a prefix are written plainly: the prefix marks them (per thread, by identity)
while the pickler writes it, and its last item clears what is left of its marks. Nothing
here changes what is pickled, only in which order the pickler meets it; no recursion limit
is raised.
"""
from __future__ import annotations

import threading
from dataclasses import is_dataclass

#: Trees at least this many node levels high are pickled flat; shallower ones as plain pickle
#: does (a level costs the pickler a few frames, the interpreter allows 1,000).
DEEP = 32

#: The instance-dict key caching a node's height (never pickled).
HEIGHT = "_flat_height"

_LOCAL = threading.local()


def _marks() -> dict:
    marks = getattr(_LOCAL, "marks", None)
    if marks is None:
        marks = _LOCAL.marks = {}
    return marks


class FlatPickled:
    """Mixin for the nodes of a tree (instances with a ``__dict__``): pickled without recursion
    on the tree's depth. A subclass that caches values in its ``__dict__`` must leave them
    and :data:`HEIGHT` out of its ``__getstate__``."""

    __slots__ = ()

    def __getstate__(self):
        state = self.__dict__
        if HEIGHT in state:
            state = {k: v for k, v in state.items() if k != HEIGHT}
        return state

    def __reduce_ex__(self, protocol):
        plain = object.__reduce_ex__(self, protocol)
        if protocol < 2 or _marks().pop(id(self), None) is not None or height(self) < DEEP:
            return plain
        below = deep_nodes(children(self))
        return _flat(plain, below) if below else plain


class FlatContainer:
    """Mixin for what holds many (possibly overlapping) trees, such as a map keyed by every
    subexpression: the deep nodes of all of them are written first, each walked once."""

    __slots__ = ()

    def __reduce_ex__(self, protocol):
        plain = object.__reduce_ex__(self, protocol)
        if protocol < 2:
            return plain
        below = deep_nodes(children(self))
        return _flat(plain, below) if below else plain


def _flat(plain: tuple, below: list) -> tuple:
    # (copyreg.__newobj__, (cls,), state, listitems, dictitems) -> the same object, made
    # after the deep nodes below it are written
    func, args = plain[0], plain[1]
    if getattr(func, "__name__", "") != "__newobj__" or len(args) != 1:
        return plain
    return (_new_after, (args[0], Prefix(below))) + tuple(plain[2:])


def _new_after(cls, prefix):
    """Unpickling: a bare instance of ``cls`` (its state follows); ``prefix`` was only there to
    put the deep nodes below it into the memo first."""
    return cls.__new__(cls)


class Prefix(list):
    """The deep nodes below a node, children first; while the pickler writes them, each is
    marked to be written plainly (its deep children are in the memo by then)."""

    def __reduce_ex__(self, protocol):
        marks = _marks()
        for n in self:
            marks[id(n)] = n
        return (list, (), None, iter([*self, Release(self)]))


class Release:
    """The last item of a :class:`Prefix`: clears the marks its nodes left (nodes the pickler
    had met before, so did not ask for). Reads back as ``None``."""

    def __init__(self, nodes):
        self.nodes = nodes

    def __reduce_ex__(self, protocol):
        marks = _marks()
        for n in self.nodes:
            marks.pop(id(n), None)
        return (type(None), ())


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None), bytes})
_SEQUENCE_TYPES = frozenset({tuple, list, set, frozenset})
_LOOKED_INTO: dict = {}    # type → whether children() looks into its instances' __dict__


def _looked_into(t) -> bool:
    seen = _LOOKED_INTO.get(t)
    if seen is None:
        seen = _LOOKED_INTO[t] = is_dataclass(t) and not issubclass(t, FlatPickled)
    return seen


def children(obj) -> list:
    """The :class:`FlatPickled` nodes in ``obj``'s state, looking through tuples, lists,
    sets, dicts (keys and values) and other dataclasses, without recursion."""
    out: list = []
    stack = list(obj.__dict__.values())
    while stack:
        v = stack.pop()
        t = type(v)
        if t in _SCALAR_TYPES:
            continue
        if t in _SEQUENCE_TYPES:
            stack.extend(v)
        elif isinstance(v, FlatPickled):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (tuple, list, set, frozenset)):
            stack.extend(v)
        elif _looked_into(t) and hasattr(v, "__dict__"):
            stack.extend(v.__dict__.values())
    return out


def height(node) -> int:
    """The number of node levels from ``node`` down (1 for a node without nodes below it),
    computed bottom-up without recursion and cached in each node (:data:`HEIGHT`)."""
    h = node.__dict__.get(HEIGHT)
    if h is not None:
        return h
    stack, kids_of = [node], {}
    while stack:
        x = stack[-1]
        d = x.__dict__
        if HEIGHT in d:
            stack.pop()
            continue
        kids = kids_of.get(id(x))
        if kids is None:        # first visit: its children first (a cycle's back edge counts 0)
            kids = kids_of[id(x)] = children(x)
            pending = [k for k in kids if HEIGHT not in k.__dict__ and id(k) not in kids_of]
            if pending:
                stack.extend(pending)
                continue
        stack.pop()
        best = 0
        for k in kids:
            kh = k.__dict__.get(HEIGHT, 0)
            if kh > best:
                best = kh
        d[HEIGHT] = best + 1
    return node.__dict__[HEIGHT]


def deep_nodes(roots) -> list:
    """The nodes of at least :data:`DEEP` levels among ``roots`` and below them, each once,
    children before parents."""
    out, seen = [], set()
    stack = [(r, False) for r in reversed(roots) if height(r) >= DEEP]
    while stack:
        x, done = stack.pop()
        if done:
            out.append(x)
            continue
        if id(x) in seen:
            continue
        seen.add(id(x))
        stack.append((x, True))
        stack.extend((k, False) for k in reversed(children(x)) if id(k) not in seen and height(k) >= DEEP)
    return out
