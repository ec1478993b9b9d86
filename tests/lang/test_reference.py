"""Every example in lang/REFERENCE.md is a program that `spatec check` accepts.

- ```spatec blocks must check cleanly: the block that starts `# bus.spatec`
  is written beside them as bus.spatec (with lang/corpus/stops.geojson,
  stops.csv, named_stops.geojson and feed.zip, lang/corpus/gtfs_feed zipped,
  beside it), and put in front of any block
  that declares no event type and includes nothing.
- ```spatec error blocks must fail with exactly the output of the ```text
  block that follows them (the program is checked as example.spatec).
"""
from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest

from spatec.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "lang" / "REFERENCE.md"
FENCE = re.compile(r"^( *)```([a-z ]*)\n(.*?)^\1```\s*$", re.S | re.M)


def blocks() -> list[tuple[str, str, int]]:
    """(info string, dedented body, line number) of every fenced block."""
    text = REFERENCE.read_text(encoding="utf-8")
    return [(m.group(2).strip(), textwrap.dedent(m.group(3)), text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)]


BLOCKS = blocks()
PRELUDE = next(body for info, body, _ in BLOCKS if info == "spatec" and body.startswith("# bus.spatec"))
VALID = [(body, line) for info, body, line in BLOCKS if info == "spatec"]
ERRORS = [(body, BLOCKS[i + 1][1], line) for i, (info, body, line) in enumerate(BLOCKS) if info == "spatec error"]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "bus.spatec").write_text(PRELUDE, encoding="utf-8")
    for name in ("stops.geojson", "stops.csv", "named_stops.geojson"):
        shutil.copy(ROOT / "lang" / "corpus" / name, tmp_path / name)
    # the GTFS examples read feed.zip: the corpus's small feed, zipped
    shutil.make_archive(str(tmp_path / "feed"), "zip", ROOT / "lang" / "corpus" / "gtfs_feed")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_reference_has_examples():
    assert len(VALID) >= 20 and len(ERRORS) >= 2


@pytest.mark.parametrize("body, line", VALID, ids=[f"line{line}" for _, line in VALID])
def test_example_checks(body, line, workdir, capsys):
    standalone = re.search(r"^\s*(event|include)\b", body, re.M)
    (workdir / "example.spatec").write_text(body if standalone else PRELUDE + "\n" + body, encoding="utf-8")
    code = main(["check", "--quiet", "example.spatec"])
    assert code == 0, f"REFERENCE.md line {line}:\n{capsys.readouterr().err}"


@pytest.mark.parametrize("body, expected, line", ERRORS, ids=[f"line{line}" for *_, line in ERRORS])
def test_error_example_output(body, expected, line, workdir, capsys):
    (workdir / "example.spatec").write_text(body, encoding="utf-8")
    assert main(["check", "example.spatec"]) == 1
    assert capsys.readouterr().err == expected, f"REFERENCE.md line {line}"
