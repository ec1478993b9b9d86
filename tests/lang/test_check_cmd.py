"""`spatec check`: exit codes, what goes to stdout and stderr, `--schema`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from spatec.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
VALID = ROOT / "lang" / "corpus" / "valid"
INVALID = ROOT / "lang" / "corpus" / "invalid"


@pytest.fixture
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_valid_file_prints_a_summary(capsys, at_root):
    assert main(["check", "lang/corpus/valid/absence_between.spatec"]) == 0
    out, err = capsys.readouterr()
    assert out == "lang/corpus/valid/absence_between.spatec: ok: 1 phrase, 4 event types, 5 places\n"
    assert err == ""


def test_quiet_prints_nothing(capsys):
    assert main(["check", "--quiet", str(VALID / "sequence.spatec"), str(VALID / "dates.spatec")]) == 0
    assert capsys.readouterr() == ("", "")


def test_errors_are_rendered_with_line_caret_hint_and_count(capsys, at_root):
    assert main(["check", "lang/corpus/invalid/unknown_type.spatec"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "lang/corpus/invalid/unknown_type.spatec:4:5: unknown event type BusGSP\n"
        "        BusGSP -> A ; BusGPS -> B\n"
        "        ^^^^^^\n"
        "    hint: did you mean `BusGPS`?\n"
        "1 error\n")


def test_every_file_is_checked_and_errors_counted_together(capsys, at_root):
    code = main(["check", "lang/corpus/invalid/unknown_place.spatec", "lang/corpus/valid/sequence.spatec",
                 "lang/corpus/invalid/bound_twice.spatec"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == "lang/corpus/valid/sequence.spatec: ok: 1 phrase, 4 event types, 5 places\n"
    lines = [ln for ln in err.splitlines() if ln.startswith("lang/")]
    assert [ln.split(": ")[0] for ln in lines] == [
        "lang/corpus/invalid/unknown_place.spatec:4:25", "lang/corpus/invalid/unknown_place.spatec:4:52",
        "lang/corpus/invalid/bound_twice.spatec:4:29"]
    assert err.endswith("3 errors\n")


def test_missing_file(capsys, tmp_path):
    assert main(["check", str(tmp_path / "nope.spatec")]) == 1
    _, err = capsys.readouterr()
    assert "nope.spatec: cannot read: No such file or directory" in err
    assert err.endswith("1 error\n")


def test_schema_is_json_on_stdout(capsys):
    assert main(["check", "--schema", str(VALID / "emit_types.spatec"), str(VALID / "absence_after.spatec")]) == 0
    out, err = capsys.readouterr()
    schemas = json.loads(out)
    assert sorted(schemas) == ["EmitAll", "Silent"]
    assert "ok: 1 phrase" in err  # summaries move to stderr so that stdout is pure JSON
    s = schemas["EmitAll"]
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    props = s["properties"]
    assert props["phrase"] == {"const": "EmitAll"}
    assert props["lo"]["format"] == props["hi"]["format"] == "date-time"
    assert props["events"]["required"] == ["A", "R"]
    assert props["when"]["type"] == ["string", "null"] and props["when"]["format"] == "date-time"
    assert props["rate"]["type"] == ["number", "null"]
    assert props["bus"]["type"] == ["string", "null"]
    assert props["wet"]["type"] == ["boolean", "null"]
    assert (props["length"]["x-unit"], props["gap"]["x-unit"], props["pace"]["x-unit"], props["size"]["x-unit"]) \
        == ("s", "m", "m/s", "m2")
    assert props["cell"]["type"] == ["string", "null"]
    assert s["required"][:6] == ["phrase", "id", "lo", "hi", "hull", "events"]
    assert set(s["required"]) == set(props)
    # negated variables are never part of an output
    assert list(schemas["Silent"]["properties"]["events"]["properties"]) == ["A"]


def test_schema_validates_a_record(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    main(["check", "--schema", "-q", str(VALID / "absence_between.spatec")])
    schema = json.loads(capsys.readouterr().out)["HospitalToStation"]
    record = {"phrase": "HospitalToStation", "id": "c0ffee", "lo": "2019-10-01T08:54:00Z",
              "hi": "2019-10-01T09:20:00Z", "hull": "POLYGON ((0 0, 1 0, 1 1, 0 0))",
              "events": {"A": "BusGPS:1:2019-10-01T08:54:30Z", "B": "BusGPS:1:2019-10-01T09:20:00Z"},
              "vehicle": "1", "minutes": 25.5}
    jsonschema.Draft202012Validator(schema).validate(record)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate({**record, "extra": 1})


def test_schema_not_printed_on_errors(capsys):
    assert main(["check", "--schema", str(INVALID / "unbounded.spatec")]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "is unbounded" in err
