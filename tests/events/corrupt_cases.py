"""Corrupted input files for property tests (Hypothesis): CSV, JSON lines and SIRI-VM
polls, each a valid file of bus fixes with bytes inserted, deleted, replaced, lines cut
or the gzip stream damaged. Shared by the local and the Spark runner's tests.

What every runner must do with any of them (issue 16): no traceback (a clear
:class:`~spatec.errors.DataError` is allowed only for a file that is unusable as a
whole, e.g. a header without the declared columns), and ``read = used + rejected``,
every reject with its file, row and reason. With one edit inside one data line that
adds no line break (``one_line`` cases), the file still has one record per line, so
``read`` is the number of data lines: nothing swallowed.
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "examples" / "stuck" / "stuck.spatec"      # BusGPS(vehicle, line, operator, direction, lon, lat, ts)
HEADER = ["vehicle", "line", "operator", "direction", "lon", "lat", "ts", "extra"]
T0 = 1569916778

# what an edit puts in: the characters that break parsers, and some that do not
NASTY = [b'"', b",", b"\n", b"\r", b"\xe9", b"\xff", b"\xc3", b"\x00", b"{", b"}", b"[", b"]", b":", b" ",
         b"\\", b"-", b"0", b"9", b"e", b"\xef\xbb\xbf"]
IN_LINE = [c for c in NASTY if c not in (b"\n", b"\r")]


@dataclass
class Corrupted:
    """A corrupted file: its name, bytes, and (one-line edits) how many records it holds."""

    name: str
    data: bytes
    lines: int | None = None

    def write(self, folder: Path) -> Path:
        p = folder / self.name
        p.write_bytes(self.data)
        return p


def fixes(n: int) -> list[dict]:
    """``n`` valid fixes of a few buses near Cambridge, some standing still."""
    out = []
    for i in range(n):
        v = i % 3
        out.append({"vehicle": f"WP-{100 + v}", "line": str(400 + v), "operator": "WP", "direction": "INBOUND",
                    "lon": f"{0.1245 + 0.0001 * (i // 6):.7f}", "lat": f"{52.2052 + 0.00005 * v:.7f}",
                    "ts": str(T0 + 20 * (i // 3)), "extra": f"x{i}"})
    return out


def csv_bytes(rows: list[dict]) -> bytes:
    return ("\n".join([",".join(HEADER)] + [",".join(r[h] for h in HEADER) for r in rows]) + "\n").encode()


def jsonl_bytes(rows: list[dict]) -> bytes:
    return ("\n".join(json.dumps(r) for r in rows) + "\n").encode()


def poll_bytes(rows: list[dict]) -> bytes:
    recs = [{"VehicleRef": r["vehicle"], "LineRef": r["line"], "OperatorRef": r["operator"],
             "Longitude": r["lon"], "Latitude": r["lat"], "RecordedAtTime": int(r["ts"])} for r in rows]
    return json.dumps({"request_data": recs, "feed_id": "test"}).encode()


@st.composite
def _edit(draw, data: bytes, lo: int, hi: int, alphabet) -> bytes:
    """One edit of ``data`` within ``[lo, hi)``: insert, delete or replace."""
    at = draw(st.integers(lo, max(lo, hi - 1)))
    kind = draw(st.sampled_from(["insert", "delete", "replace"]))
    piece = draw(st.sampled_from(alphabet))
    if kind == "insert":
        return data[:at] + piece + data[at:]
    if kind == "delete" and at < len(data):
        return data[:at] + data[at + 1:]
    return data[:at] + piece + data[at + 1:]


@st.composite
def one_line_edit(draw, fmt: str) -> Corrupted:
    """A valid CSV or JSON lines file with one edit inside one data line, no line break
    added or removed: still one record per line."""
    rows = fixes(draw(st.integers(2, 9)))
    data = csv_bytes(rows) if fmt == "csv" else jsonl_bytes(rows)
    lines = data.split(b"\n")[:-1]
    first = 1 if fmt == "csv" else 0           # the header stays whole
    k = draw(st.integers(first, len(lines) - 1))
    line = lines[k]
    at = draw(st.integers(0, len(line) - 1))
    piece = draw(st.sampled_from(IN_LINE))
    kind = draw(st.sampled_from(["insert", "delete", "replace"]))
    if kind == "insert":
        line = line[:at] + piece + line[at:]
    elif kind == "delete" and len(line) > 1:
        line = line[:at] + line[at + 1:]
    else:
        line = line[:at] + piece + line[at + 1:]
    if not line.strip():
        line = b"x"       # (a line made blank would be no record)
    lines[k] = line
    return Corrupted(f"fixes.{fmt}", b"\n".join(lines) + b"\n", len(lines) - first)


@st.composite
def any_damage(draw, fmt: str) -> Corrupted:
    """A valid file of format ``fmt`` (csv, jsonl, sirivm) damaged anywhere: up to four
    edits (line breaks too), perhaps cut short, perhaps gzip-compressed and then damaged."""
    rows = fixes(draw(st.integers(1, 9)))
    data = {"csv": csv_bytes, "jsonl": jsonl_bytes, "sirivm": poll_bytes}[fmt](rows)
    for _ in range(draw(st.integers(0, 4))):
        data = draw(_edit(data, 0, len(data) + 1, NASTY))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    name = {"csv": "fixes.csv", "jsonl": "fixes.jsonl", "sirivm": "1569916801_2019-10-01.json"}[fmt]
    if draw(st.integers(0, 3)) == 0:
        data = gzip.compress(data)
        how = draw(st.sampled_from(["cut", "flip", "whole"]))
        if how == "cut":
            data = data[: draw(st.integers(0, len(data)))]
        elif how == "flip":
            at = draw(st.integers(0, len(data) - 1))
            data = data[:at] + bytes([data[at] ^ 0x55]) + data[at + 1:]
        name += ".gz"
    return Corrupted(name, data)


def check_ingest(summary, rejects_file: Path, path: Path, lines: int | None) -> None:
    """The invariants of one input's ingest (a runner's :class:`IngestSummary` row)."""
    [(_type, _path, read, used, rejected)] = summary.rows
    assert read == used + rejected
    written = [json.loads(x) for x in rejects_file.read_text(encoding="utf-8").splitlines()] \
        if rejects_file.exists() else []
    assert len(written) == rejected
    assert all(r["reason"] and r["file"].startswith(str(path)) and r["row"] >= 0 for r in written)
    if lines is not None:
        assert read == lines, (read, lines, [r["reason"] for r in written])
