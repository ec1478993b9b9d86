"""The checker's types: words for the types of values, the functions, the rules of units.

A type is a word: ``number`` (``int`` and ``float`` attributes are numbers),
``str``, ``bool``, ``time``, ``geometry``, the dimensions ``duration``,
``distance``, ``speed`` and ``area``, and the kinds of bound things ``event``
(an event, a run, or a run's member event) and ``place`` (a bound place).
"""
from __future__ import annotations

import datetime as dt
import difflib
import zoneinfo

ATTR_TYPES = ("str", "int", "float", "bool", "time", "geometry")
STAMP_ATTRS = {"t": "time", "lo": "time", "hi": "time"}
NUMERIC = ("int", "float", "number")
DIMENSIONS = ("duration", "distance", "speed", "area")
TYPE_WORDS = {"int": "a number", "float": "a number", "number": "a number", "str": "a string",
              "bool": "a truth value", "time": "a time", "duration": "a duration",
              "distance": "a distance", "speed": "a speed", "area": "an area",
              "geometry": "a geometry", "event": "an event", "place": "a place"}

#: name → (argument count, or (least, None), result type)
FUNCTIONS = {
    "duration": ((1, 2), "duration"), "distance": (2, "distance"), "speed": (2, "speed"),
    "before": (2, "bool"), "concurrent": (2, "bool"), "overlap": (2, "bool"), "disjoint": (2, "bool"),
    "hull_area": ((1, None), "area"), "successive": ((2, None), "bool"),
    # over a run (SPEC §7)
    "count": (1, "number"), "min": (1, None), "max": (1, None), "avg": (1, None),
}
AGGREGATES = ("min", "max", "avg")
#: functions of places too (a bound place has a region, no time stamp)
SPATIAL = ("distance", "overlap", "disjoint")
#: functions that need events with a local time, not a run's composite
EVENTS_ONLY = ("speed", "successive")


def value_type(declared: str) -> str:
    """The checker's type of a value of a declared attribute type (``int``/``float`` → ``number``)."""
    return "number" if declared in ("int", "float") else declared


def is_numeric(type_word: str) -> bool:
    return type_word in NUMERIC or type_word in DIMENSIONS


def words(type_word: str) -> str:
    return TYPE_WORDS.get(type_word, type_word)


def did_you_mean(name: str, options) -> str | None:
    close = difflib.get_close_matches(name, list(options), n=1)
    return f"did you mean `{close[0]}`?" if close else None


OP_VERB = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide"}


def arith_type(op: str, a: str, b: str) -> str | None:
    num = lambda t: "number" if t in NUMERIC else t  # noqa: E731
    a, b = num(a), num(b)
    if op in ("+", "-"):
        if a == b and a in ("number",) + DIMENSIONS:
            return a
        if a == "time" and b == "duration":
            return "time"
        if op == "+" and a == "duration" and b == "time":
            return "time"
        if op == "-" and a == b == "time":
            return "duration"
        return None
    if op == "*":
        if a == "number" and b in ("number",) + DIMENSIONS:
            return b
        if b == "number" and a in DIMENSIONS:
            return a
        if {a, b} == {"speed", "duration"}:
            return "distance"
        if a == b == "distance":
            return "area"
        return None
    if op == "/":
        if b == "number" and a in ("number",) + DIMENSIONS:
            return a
        if a == b and a in DIMENSIONS:
            return "number"
        if a == "distance" and b == "duration":
            return "speed"
        if a == "distance" and b == "speed":
            return "duration"
        if a == "area" and b == "distance":
            return "distance"
        return None
    return None


def unit_hint(a: str, b: str) -> str | None:
    pair = {a, b}
    if pair == {"duration", "distance"}:
        return "a duration (`s`, `min`, `h`, `d`) and a distance (`m`, `km`) do not mix"
    if "number" in pair and pair & set(DIMENSIONS):
        dim = (pair - {"number"}).pop()
        ex = {"duration": "`20 min`", "distance": "`150 m`", "speed": "`12 km/h`", "area": "`1000 m * 1 m`"}[dim]
        return f"give the number a unit, e.g. {ex}"
    if "time" in pair and "duration" in pair:
        return "a time plus or minus a duration is a time; two times differ by a duration"
    return None


def clock(t: str) -> int | None:
    """Seconds after midnight of ``HH:MM[:SS]`` (24:00 allowed), None if it is not a clock time."""
    parts = t.split(":")
    try:
        h, m = int(parts[0]), int(parts[1])
        s = int(parts[2]) if len(parts) > 2 else 0
    except (ValueError, IndexError):
        return None
    if not (0 <= h <= 24 and 0 <= m < 60 and 0 <= s < 60) or (h == 24 and (m or s)):
        return None
    return h * 3600 + m * 60 + s


def parse_time_literal(text: str, tz: str):
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=zoneinfo.ZoneInfo(tz))
    return t
