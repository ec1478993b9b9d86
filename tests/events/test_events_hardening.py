"""Bad input found by probing (issue 16): every case a named reject or a clear error,
never a traceback, never two records merged, never lines swallowed silently."""
from __future__ import annotations

import gzip
import io
import json
import os
import tarfile

import pytest
from events_cases import BUS, BUS_HEADER, CAMBRIDGE_POLLS, write_csv, write_jsonl, write_poll

from spatec.events.canonical import NO_FIX
from spatec.events.formats import csv_slices, expand, read_csv
from spatec.events.read import iter_batches, read_events
from spatec.events.textin import FIELD_LIMIT
from spatec.events.timefmt import NO_EPOCH

T0 = 1569916778


def row(**o) -> list[str]:
    base = {"vehicle": "WP-101", "line": "401", "operator": "WP", "lon": "-0.1845219",
            "lat": "52.3288345", "ts": str(T0), "extra": "x"}
    return [str({**base, **o}[k]) for k in BUS_HEADER]


def rows(n: int) -> list[list[str]]:
    return [row(vehicle=f"V{i}", ts=str(T0 + i)) for i in range(n)]


def lines_of(rs) -> list[str]:
    return [",".join(r) for r in rs]


def counted(result):
    assert result.read == result.used + result.rejected
    return result


def reasons(result) -> dict[int, str]:
    return dict(zip(result.rejects["row"].tolist(), result.rejects["reason"].tolist()))


def write_bytes(path, header, lines: list[bytes], gz=False) -> str:
    data = b"\n".join([",".join(header).encode()] + lines) + b"\n"
    if gz:
        data = gzip.compress(data)
    path.write_bytes(data)
    return str(path)


class TestNotUtf8:
    def test_csv_ids_never_merge(self, tmp_path):
        good = lines_of(rows(3))
        lines = [good[0].encode(), b"BUS-\xe9" + good[1].encode()[2:], b"BUS-\xe8" + good[2].encode()[2:]]
        p = write_bytes(tmp_path / "latin.csv", BUS_HEADER, lines)
        r = counted(read_events(p, BUS))
        assert r.used == 1 and r.rejected == 2
        why = reasons(r)
        assert why[2] == "vehicle: not UTF-8 (byte 0xE9 at character 5); convert the file to UTF-8, " \
                         "e.g. iconv -f latin1 -t utf-8"
        assert "byte 0xE8" in why[3]
        # the record shows the byte as it was, not a replacement character
        records = [json.loads(x) for x in r.rejects["record"]]
        assert [x["vehicle"] for x in records] == ["BUS-\\xe9", "BUS-\\xe8"]
        assert not r.events["_source"].str.contains("\ufffd").any()

    def test_gzip_and_jsonl_too(self, tmp_path):
        lines = [b"BUS-\xe9" + l.encode()[2:] for l in lines_of(rows(2))]
        r = counted(read_events(write_bytes(tmp_path / "latin.csv.gz", BUS_HEADER, lines, gz=True), BUS))
        assert r.rejected == 2 and all("not UTF-8" in x for x in r.rejects["reason"])
        p = tmp_path / "latin.jsonl"
        recs = [json.dumps(dict(zip(BUS_HEADER, x))).encode() for x in rows(2)]
        p.write_bytes(recs[0].replace(b"V0", b"BUS-\xe9") + b"\n" + recs[1] + b"\n")
        r = counted(read_events(p, BUS))
        assert r.used == 1 and reasons(r)[1].startswith("not UTF-8 (byte 0xE9")

    def test_sirivm_poll_rejects_the_record_only(self, tmp_path):
        p = tmp_path / "1569916801_2019-10-01.json"
        recs = [{"VehicleRef": f"V{i}", "LineRef": "1", "OperatorRef": "X", "Longitude": 0.1, "Latitude": 52.2,
                 "RecordedAtTime": T0 + i} for i in range(3)]
        data = json.dumps({"request_data": recs}).encode().replace(b'"V1"', b'"BUS-\xe9"')
        p.write_bytes(data)
        r = counted(read_events(p, BUS, fmt="sirivm"))
        assert r.used == 2 and reasons(r) == {2: "VehicleRef: not UTF-8 (byte 0xE9 at character 5)"}


class TestDamagedGzip:
    @pytest.mark.parametrize("fmt", ["csv", "jsonl"])
    def test_truncated_keeps_what_came_and_names_the_cut(self, tmp_path, fmt):
        if fmt == "csv":
            p = write_csv(tmp_path / "t.csv.gz", BUS_HEADER, rows(3000), gz=True)
        else:
            p = write_jsonl(tmp_path / "t.jsonl.gz", [dict(zip(BUS_HEADER, x)) for x in rows(3000)], gz=True)
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 2])
        r = counted(read_events(p, BUS))
        assert 0 < r.used < 3000
        [(n, why)] = [(n, w) for n, w in reasons(r).items() if "gzip" in w]
        assert why.startswith("truncated gzip data: the file ends inside its compressed data")
        assert n == r.rejected + r.used                # the last row read: the cut line
        assert set(r.rejects["file"]) == {str(p)}

    def test_corrupt_data(self, tmp_path):
        p = write_csv(tmp_path / "c.csv.gz", BUS_HEADER, rows(3000), gz=True)
        data = bytearray(p.read_bytes())
        data[len(data) // 2: len(data) // 2 + 8] = b"\xff" * 8
        p.write_bytes(bytes(data))
        r = counted(read_events(p, BUS))
        assert any("gzip data" in w for w in r.rejects["reason"])

    def test_streamed_slices_fall_back(self, tmp_path):
        p = write_csv(tmp_path / "t.csv.gz", BUS_HEADER, rows(3000), gz=True)
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 2])
        with pytest.raises(Exception) as e:
            list(csv_slices(str(p), [a.name for a in BUS.attrs], rows=100))
        assert type(e.value).__name__ == "StreamFailed"      # the caller reads it whole (above)


class TestLongFields:
    def test_a_200_kb_field_is_read(self, tmp_path):
        rs = rows(4)
        rs[1][BUS_HEADER.index("extra")] = "x" * 200_000
        rs[2][BUS_HEADER.index("line")] = "y" * 200_000
        p = write_csv(tmp_path / "big.csv", BUS_HEADER, rs)
        r = counted(read_events(p, BUS))
        assert r.used == 4 and r.events["line"].str.len().max() == 200_000

    def test_a_field_over_the_limit_is_a_reject(self, tmp_path):
        rs = rows(3)
        rs[1][BUS_HEADER.index("line")] = "y" * (FIELD_LIMIT + 10)
        p = write_csv(tmp_path / "huge.csv", BUS_HEADER, rs)
        r = counted(read_events(p, BUS))
        assert r.used == 2
        assert reasons(r) == {2: "malformed CSV row: a field longer than 16 MiB"}


class TestUnbalancedQuote:
    @pytest.mark.parametrize("column", ["vehicle", "lat", "extra"])
    def test_named_and_following_lines_read(self, tmp_path, column):
        rs = rows(6)
        k = BUS_HEADER.index(column)
        lines = lines_of(rs)
        cells = lines[2].split(",")
        cells[k] = '"' + cells[k]
        lines[2] = ",".join(cells)
        p = tmp_path / "q.csv"
        p.write_text("\n".join([",".join(BUS_HEADER), *lines]) + "\n")
        r = counted(read_events(p, BUS))
        assert r.read == 6 and r.used == 5
        col = len(",".join(cells[:k])) + (2 if k else 1)
        assert reasons(r) == {3: f"unbalanced quote: the quote at column {col} is never closed; "
                                 "the lines after it are read as rows"}
        assert sorted(r.events["vehicle"]) == ["V0", "V1", "V3", "V4", "V5"]

    @pytest.mark.parametrize("close, width", [(3, True), (2, True), (3, False)])
    def test_a_quote_that_closes_lines_later(self, tmp_path, close, width):
        # the quote closes `close` lines on: the row it makes has the header's width
        # (Arrow would read it silently) or not
        lines = lines_of(rows(5))
        lines[1] = lines[1].replace(",401,", ',"401,')
        lines[close] = lines[close].replace(",401,", ',401",' if width else ',401",x,')
        p = tmp_path / "q.csv"
        p.write_text("\n".join([",".join(BUS_HEADER), *lines]) + "\n")
        r = counted(read_events(p, BUS))
        why = reasons(r)
        assert why[2].startswith("unbalanced quote: the quote at column 4 runs the row on into the next line")
        assert r.read == 5 and set(r.events["vehicle"]) >= {"V0", "V4"} and "V1" not in set(r.events["vehicle"])

    def test_quoted_values_may_span_lines(self, tmp_path):
        rs = rows(3)
        rs[1][BUS_HEADER.index("extra")] = "two\nlines"
        p = write_csv(tmp_path / "ml.csv", BUS_HEADER, rs)
        assert counted(read_events(p, BUS)).used == 3
        assert read_csv(str(p)).table.column("extra").to_pylist()[1] == "two\nlines"


class TestImplausibleValues:
    @pytest.mark.parametrize("ts", ["-1", "0", "-1569916778", "0.0"])
    def test_epoch_zero_and_negative_are_no_time(self, tmp_path, ts):
        p = write_csv(tmp_path / "t.csv", BUS_HEADER, [row(ts=ts), row(vehicle="V2")])
        r = counted(read_events(p, BUS))
        assert reasons(r) == {1: f"ts: {ts} {NO_EPOCH}"}

    def test_iso_text_before_1970_is_a_time(self, tmp_path):
        p = write_csv(tmp_path / "t.csv", BUS_HEADER, [row(ts="1969-12-31T23:59:59Z")])
        assert counted(read_events(p, BUS)).events["_t"].tolist() == [-1_000_000]

    def test_zero_zero_is_no_position(self, tmp_path):
        p = write_csv(tmp_path / "z.csv", BUS_HEADER, [row(lon="0", lat="0.0"), row(vehicle="B", lon="0"),
                                                      row(vehicle="C", lat="0"), row(vehicle="D", lon="", lat="0")])
        r = counted(read_events(p, BUS))
        why = reasons(r)
        assert why[1] == f"lon, lat: {NO_FIX}"
        assert why[4] == "lon: missing coordinate"           # not also (0, 0)
        assert sorted(r.events["vehicle"]) == ["B", "C"]     # one coordinate 0 is a place


class TestPolls:
    def test_nested_too_deeply(self, tmp_path):
        p = tmp_path / "1569916801_a.json"
        p.write_text('{"request_data": ' + "[" * 100_000 + "]" * 100_000 + "}")
        r = counted(read_events(p, BUS, fmt="sirivm"))
        assert reasons(r) == {0: "not a SIRI-VM poll: invalid JSON (nested too deeply)"}
        q = tmp_path / "deep.jsonl"
        q.write_text("[" * 100_000 + "]" * 100_000 + "\n")
        assert reasons(counted(read_events(q, BUS))) == {1: "invalid JSON: nested too deeply"}

    def test_one_corrupt_poll_does_not_refuse_the_directory(self, tmp_path):
        recs = [{"VehicleRef": "V", "LineRef": "1", "OperatorRef": "X", "Longitude": 0.1, "Latitude": 52.2,
                 "RecordedAtTime": T0}]
        write_poll(tmp_path / "1569916801_a.json", recs)
        (tmp_path / "1569916821_b.json").write_text('{"request_data": [{"VehicleRef": "W"')   # cut short
        (tmp_path / "1569916841_c.json").write_bytes(b"\x1f\x8b\x08garbage")
        assert {f for _, f in expand(str(tmp_path))} == {"sirivm"}
        r = counted(read_events(tmp_path, BUS))
        assert r.used == 1
        assert sorted(os.path.basename(f) for f in r.rejects["file"]) == ["1569916821_b.json", "1569916841_c.json"]
        assert all(w.startswith("not a SIRI-VM poll") for w in r.rejects["reason"])

    def test_truncated_archive_keeps_the_polls_before(self, tmp_path):
        buf = io.BytesIO()
        with tarfile.open(CAMBRIDGE_POLLS, "r:gz") as src, tarfile.open(fileobj=buf, mode="w:gz") as dst:
            for i, m in enumerate(src):
                if i >= 40:
                    break
                dst.addfile(m, src.extractfile(m) if m.isfile() else None)
        p = tmp_path / "polls.tar.gz"
        p.write_bytes(buf.getvalue()[: len(buf.getvalue()) * 2 // 3])
        batches = list(iter_batches(p))
        assert len(batches) > 5
        assert batches[-1].unreadable[0][1].startswith("damaged archive after")
        counted(read_events(p, BUS))
