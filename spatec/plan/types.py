"""What the planner needs to know of an event type a phrase reads, declared or derived.

A phrase may match the event types the program declares and the composites of its
other phrases (SPEC §8: a *derived* type, :class:`~spatec.frontend.program.EventType`
with ``phrase`` set): attributes are the producer's emit fields, there is no source,
and the stamp is the composite's. The passes ask through these functions rather than
reading ``program.events`` (declarations only)."""
from __future__ import annotations

from spatec.frontend.bounds import stamp_length


def _event_type(program, name):
    return getattr(program, "event_types", {}).get(name)


def is_derived(program, name) -> bool:
    """Whether ``name`` is a phrase's composites (a derived event type)."""
    t = _event_type(program, name)
    return t is not None and t.derived


def derived_types(program, names) -> tuple:
    """The derived ones of ``names``, sorted."""
    return tuple(sorted(n for n in names if n is not None and is_derived(program, n)))


def attr_names(program, name) -> tuple:
    """The attributes of type ``name``, in declaration (emit) order; () if unknown."""
    decl = program.events.get(name)
    if decl is not None:
        return tuple(a.name for a in decl.attrs)
    t = _event_type(program, name)
    return tuple(t.attrs) if t is not None and t.attrs else ()


def has_attr(program, name, attr: str) -> bool:
    return attr in attr_names(program, name)


def source_attr(program, name) -> str | None:
    """The attribute that is the source of declared type ``name``; None for types without one
    and for derived types (whose source, if any, may be several fields: :func:`source_attrs`)."""
    decl = program.events.get(name)
    if decl is not None and decl.source is not None:
        return decl.source.attr
    return None


def source_attrs(program, name) -> tuple:
    """The attributes whose values together are the source of type ``name``: a declared type's
    `source`, a phrase's `as event source F, ...` (SPEC §8); () for types without one."""
    src = source_attr(program, name)
    if src is not None:
        return (src,)
    t = _event_type(program, name)
    return tuple(t.source_fields) if t is not None and t.derived else ()


def type_length(program, name) -> int | None:
    """Longest time stamp of an event of type ``name`` (µs); None: unbounded. A derived
    type's is its producer's span bound."""
    decl = program.events.get(name)
    if decl is not None:
        return stamp_length(decl)
    t = _event_type(program, name)
    return None if t is None else t.stamp_length


def known(program, name) -> bool:
    return name in program.events or _event_type(program, name) is not None
