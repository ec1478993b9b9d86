"""Program files as they come (issue 16): a byte-order mark, bytes that are not UTF-8, an
include of a file that is not a program (never echoed), place files that cannot be places."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spatec.cli.main import main
from spatec.errors import ParseError
from spatec.frontend.check import check_file

ROOT = Path(__file__).resolve().parents[2]
BUS = ROOT / "examples" / "bus.spatec"
PHRASE = "phrase P per vehicle = BusGPS -> A and at centre\n  emit v = A.vehicle\n"


def program(tmp_path: Path, body: str, name: str = "p.spatec") -> Path:
    p = tmp_path / name
    p.write_text(f'include "{BUS}"\n{body}')
    return p


def check(capsys, path) -> tuple[int, str]:
    rc = main(["check", str(path)])
    return rc, capsys.readouterr().err


class TestEncoding:
    def test_a_byte_order_mark_is_accepted(self, tmp_path, capsys):
        p = tmp_path / "bom.spatec"
        p.write_bytes(b"\xef\xbb\xbf" + f'include "{BUS}"\n{PHRASE}'.encode())
        assert main(["check", str(p)]) == 0
        # as an included file, and as text handed to the API
        q = tmp_path / "q.spatec"
        q.write_text(f'include "{p}"\n')
        assert [x.name for x in check_file(q).phrases] == ["P"]
        assert [x.name for x in check_file(tmp_path / "t.spatec", "\ufeff" + p.read_text()[1:]).phrases] == ["P"]

    def test_not_utf8_is_positioned_at_the_first_bad_byte(self, tmp_path, capsys):
        p = tmp_path / "latin.spatec"
        p.write_bytes(f'include "{BUS}"\n'.encode() + b"# caf\xe9 au lait\n" + PHRASE.encode())
        rc, err = check(capsys, p)
        assert rc == 1
        assert err.startswith(f"{p}:2:6: not UTF-8: byte 0xE9\n    hint: save the program as UTF-8")
        with pytest.raises(ParseError) as e:
            check_file(p)
        assert (e.value.first.span.line, e.value.first.span.col) == (2, 6)

    def test_an_included_file_not_utf8(self, tmp_path, capsys):
        (tmp_path / "inc.spatec").write_bytes(b"place x = circle(0.1, 52.2, 10 m)\n\n  # \xff\n")
        p = program(tmp_path, 'include "inc.spatec"\n')
        rc, err = check(capsys, p)
        assert rc == 1 and f'{p}:2:9: cannot include "inc.spatec": not UTF-8: byte 0xFF at line 3, column 5' in err

    def test_a_missing_program_is_one_line_for_every_command(self, tmp_path, capsys):
        rc = main(["replay", str(tmp_path / "nope.spatec"), "--events", "BusGPS=x.csv", "--out", str(tmp_path)])
        assert rc == 1
        assert capsys.readouterr().err == f"spatec: error: {tmp_path / 'nope.spatec'}: cannot read: " \
                                          "No such file or directory\n"


class TestIncludeLeaksNothing:
    SECRET = "sk-live-7f3a9c0d2e"

    def test_a_secret_file(self, tmp_path, capsys):
        (tmp_path / "key.txt").write_text(f"API_KEY={self.SECRET}\nOTHER=1\n")
        (tmp_path / "token").write_text(f"{self.SECRET}\n")
        p = program(tmp_path, 'include "key.txt"\ninclude "token"\n')
        rc, err = check(capsys, p)
        assert rc == 1 and self.SECRET not in err and "API_KEY" not in err
        assert 'cannot include "key.txt": not a SpaTeC program (it does not start with a declaration; ' \
               "syntax error at line 1, column 1)" in err

    def test_the_environment(self, tmp_path):
        p = program(tmp_path, 'include "/proc/self/environ"\n')
        env = dict(os.environ, SPATEC_PROBE_SECRET=self.SECRET)
        got = subprocess.run([sys.executable, "-m", "spatec.cli.main", "check", str(p)], env=env,
                             capture_output=True, text=True, timeout=120)
        assert got.returncode == 1
        assert self.SECRET not in got.stderr + got.stdout and "SPATEC_PROBE_SECRET" not in got.stderr
        assert 'cannot include "/proc/self/environ": not a SpaTeC program' in got.stderr

    @pytest.mark.skipif(not os.access("/etc/shadow", os.R_OK), reason="/etc/shadow is not readable here")
    def test_etc_shadow(self, tmp_path, capsys):
        first = Path("/etc/shadow").read_text().splitlines()[0]
        rc, err = check(capsys, program(tmp_path, 'include "/etc/shadow"\n'))
        assert rc == 1 and first not in err and first.split(":")[0] + ":" not in err

    def test_a_program_with_an_error_still_shows_its_line(self, tmp_path, capsys):
        (tmp_path / "inc.spatec").write_text("place x = circle(0.1, 52.2, 10 m)\nplace y = circle(0.1, 52.2 10 m)\n")
        rc, err = check(capsys, program(tmp_path, 'include "inc.spatec"\n'))
        assert rc == 1 and "place y = circle(0.1, 52.2 10 m)" in err


GEO = {"type": "FeatureCollection", "features": []}


def feature(name, geometry):
    return {"type": "Feature", "properties": {"name": name}, "geometry": geometry}


class TestPlaceFiles:
    CASES = {
        "far": (feature("far", {"type": "Point", "coordinates": [200, 95]}),
                "feature 0 (far) has coordinates out of range: (200, 95) is not a longitude, latitude pair"),
        "bow": (feature("bow", {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}),
                "feature 0 (bow) is not a valid Polygon: Self-intersection[0.5 0.5]"),
        "far_corner": (feature("fc", {"type": "Polygon", "coordinates": [[[0, 0], [0, 1], [181, 1], [0, 0]]]}),
                       "feature 0 (fc) has coordinates out of range: (181, 1)"),
    }

    @pytest.mark.parametrize("case", sorted(CASES))
    def test_checked_before_anything_runs(self, tmp_path, capsys, case):
        feat, message = self.CASES[case]
        (tmp_path / "pl.geojson").write_text(json.dumps({**GEO, "features": [feat]}))
        p = program(tmp_path, 'places "pl.geojson"\n' + PHRASE)
        rc, err = check(capsys, p)
        assert rc == 1 and f'{p}:2:8: places "pl.geojson": {message}' in err
        # and replay stops there too, with the same error, not a traceback
        rc = main(["replay", str(p), "--runner", "local", "--events", "BusGPS=x.csv", "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert rc == 1 and message in err and "Traceback" not in err

    def test_deeply_nested(self, tmp_path, capsys):
        (tmp_path / "deep.geojson").write_text('{"type": "FeatureCollection", "features": '
                                               + "[" * 100_000 + "]" * 100_000 + "}")
        rc, err = check(capsys, program(tmp_path, 'places "deep.geojson"\n' + PHRASE))
        assert rc == 1 and 'cannot read places "deep.geojson": not GeoJSON (nested too deeply)' in err
        deep = feature("d", {"type": "Polygon", "coordinates": "X"})
        text = json.dumps({**GEO, "features": [deep]}).replace('"X"', "[" * 800 + "]" * 800)
        (tmp_path / "deep2.geojson").write_text(text)
        rc, err = check(capsys, program(tmp_path, 'places "deep2.geojson"\n' + PHRASE, "q.spatec"))
        assert rc == 1 and "feature 0 (d) has a bad geometry" in err
