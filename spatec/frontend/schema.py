"""The output record of a phrase as JSON Schema (draft 2020-12).

One schema per phrase describes the JSONL lines a sink writes: the standard
fields every composite carries (SPEC §4) and the phrase's ``emit`` fields,
typed by the checker. Dimensioned values are plain numbers in base units; the
unit is named by the ``x-unit`` keyword.

>>> from spatec.frontend.check import check_file
>>> program = check_file('x.spatec', text='''
... event Ping(box: str, at_: time)
...     source box
...     time at_
... phrase Gap = Ping -> A ; Ping -> B within 1 h
...     emit box = A.box, gap = duration(A, B)''')
>>> s = json_schema(program, program.phrase('Gap'))
>>> s['properties']['phrase'], s['properties']['gap']['x-unit'], s['required'][-2:]
({'const': 'Gap'}, 's', ['box', 'gap'])
"""
from __future__ import annotations

from spatec.frontend.check import PLACES_FIELD, STANDARD_FIELDS, PhraseInfo, Program

DRAFT = "https://json-schema.org/draft/2020-12/schema"

_TIME = {"type": "string", "format": "date-time", "description": "ISO 8601, UTC"}

# checker type word → JSON Schema of a value of that type (without null)
VALUE_SCHEMAS = {
    "time": _TIME,
    "number": {"type": "number"},
    "int": {"type": "number"},
    "float": {"type": "number"},
    "str": {"type": "string"},
    "bool": {"type": "boolean"},
    "duration": {"type": "number", "x-unit": "s", "description": "a duration in seconds"},
    "distance": {"type": "number", "x-unit": "m", "description": "a distance in metres"},
    "speed": {"type": "number", "x-unit": "m/s", "description": "a speed in metres per second"},
    "area": {"type": "number", "x-unit": "m2", "description": "an area in square metres"},
    "geometry": {"type": "string", "contentMediaType": "text/wkt",
                 "description": "WKT, WGS84 longitude/latitude"},
}


def value_schema(type_word: str) -> dict:
    """Schema of an emitted value of a checker type; every emit value may be null."""
    base = dict(VALUE_SCHEMAS[type_word])
    base["type"] = [base["type"], "null"]
    return base


def json_schema(program: Program, info: PhraseInfo) -> dict:
    """JSON Schema of one phrase's output records."""
    events = {
        var: {"type": "string", "description": (f"id of the first {etype} event of run {var}" if var in info.runs
                                                else f"id of the {etype} event bound to {var}")}
        for var, etype in info.vars.items()
    }
    props: dict = {
        "phrase": {"const": info.name},
        "id": {"type": "string", "description": "deterministic id of the composite event"},
        "lo": {**_TIME, "description": "start of the composite's time stamp, ISO 8601 UTC"},
        "hi": {**_TIME, "description": "end of the composite's time stamp, ISO 8601 UTC"},
        "hull": {"type": "string", "contentMediaType": "text/wkt",
                 "description": "convex hull of the location stamps, WKT in longitude/latitude"},
        "events": {
            "type": "object",
            "description": "ids of the bound primitive events, by variable",
            "properties": events,
            "required": list(events),
            "additionalProperties": {"type": "string"},
        },
    }
    required = list(STANDARD_FIELDS)
    if info.places:
        props[PLACES_FIELD] = {
            "type": "object",
            "description": "ids of the bound places, by variable: SET:N, the N-th place of the set's file",
            "properties": {v: {"type": "string", "description": f"id of the place of {b.place} bound to {v}"}
                           for v, b in info.places.items()},
            "required": list(info.places),
            "additionalProperties": False,
        }
        required.append(PLACES_FIELD)
    for name, type_word in info.schema:
        props[name] = value_schema(type_word)
    return {
        "$schema": DRAFT,
        "title": info.name,
        "description": f"an output record of phrase {info.name}",
        "type": "object",
        "properties": props,
        "required": required + [name for name, _ in info.schema],
        "additionalProperties": False,
    }


def json_schemas(program: Program) -> dict:
    """``{phrase name: schema}`` for every phrase of a checked program."""
    return {info.name: json_schema(program, info) for info in program.phrases}
