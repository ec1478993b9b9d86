"""The local runner's streamed replay (spatec.runners.serial): the staged exchange run
in-process, chunk by chunk and group by group. Its files are the in-memory local
runner's, byte for byte, and it is chosen only where it applies."""
from __future__ import annotations

import pytest

from spatec.plan.program import compile_program
from spatec.runners import serial
from spatec.runners.replay import replay_local

from tests.runners.conftest import REPO

THREE = REPO / "bench" / "three_phrases.spatec"
DERIVED = REPO / "examples" / "headway" / "headway.spatec"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_streamed_files_are_the_local_runners(slice20, tmp_path, monkeypatch, fmt):
    """Many chunks (4,000 rows each) and groups (3,000 events): the same rejects, counts
    and files as the in-memory local runner; ``replay_local`` streams when told to."""
    compiled = compile_program(str(THREE))
    inputs = [("BusGPS", str(slice20))]
    monkeypatch.setenv(serial.STREAM_ENV, "off")
    whole = replay_local(compiled, inputs, tmp_path / "whole", fmt=fmt)
    assert min(len(df) for df in whole.frames.values()) > 0
    conf = {"spark.spatec.ingestRows": "4000", "spark.spatec.bucketRows": "3000"}
    small = serial.replay_streamed(compiled, inputs, tmp_path / "small", fmt=fmt, conf=conf)
    monkeypatch.setenv(serial.STREAM_ENV, "on")
    routed = serial.local_replay(compiled, inputs, tmp_path / "routed", fmt=fmt)
    for streamed in (small, routed):
        assert streamed.ingest.rows == whole.ingest.rows
        assert dict(streamed.counts) == {p: len(df) for p, df in whole.frames.items()}
        for name, path in whole.paths.items():
            assert streamed.paths[name].read_bytes() == path.read_bytes(), name


def test_streaming_is_chosen_where_it_applies(tmp_path, monkeypatch):
    small = tmp_path / "fixes.csv"
    small.write_text("vehicle,ts,lon,lat\n")
    three = compile_program(str(THREE))
    inputs = [("BusGPS", str(small))]
    monkeypatch.setenv(serial.STREAM_ENV, "auto")
    assert not serial.streams(three, inputs, "jsonl")                 # a small input: in memory
    monkeypatch.setattr(serial, "STREAM_BYTES", 1)
    assert serial.streams(three, inputs, "jsonl")
    assert serial.streams(three, inputs, "parquet")
    assert not serial.streams(three, inputs, "geojson")               # not written in parts
    assert not serial.streams(compile_program(str(DERIVED)), inputs, "jsonl")   # phrases over phrases
    monkeypatch.setenv(serial.STREAM_ENV, "off")
    assert not serial.streams(three, inputs, "jsonl")


def test_scratch_files_are_dead_once_matched(slice20, tmp_path, monkeypatch):
    """The staged exchange removes its raw chunks and staged groups while it merges the
    parts (:mod:`spatec.storage.sweep`): nothing after the matching job reads them. With
    every removal done at once, before the next step, the files are the same; the
    staging folder is left empty."""
    from spatec.runners.spark import ingest
    from spatec.runners.spark.staging import STAGING_KEY
    from spatec.storage import sweep as sweep_mod

    compiled = compile_program(str(THREE))
    inputs = [("BusGPS", str(slice20))]
    conf = {"spark.spatec.ingestRows": "4000", "spark.spatec.bucketRows": "3000"}
    normal = serial.replay_streamed(compiled, inputs, tmp_path / "normal", conf=conf)
    swept = []

    def at_once(paths):
        s = sweep_mod.sweep(paths)
        s.join()
        swept.append(s.paths)
        return s

    monkeypatch.setattr(ingest, "sweep", at_once)
    stage = tmp_path / "stage"
    stage.mkdir()
    got = ingest.replay_inputs_spark(serial.SerialSession({**conf, STAGING_KEY: str(stage)}), compiled, inputs,
                                     tmp_path / "at_once", prefilter_leaves=False, fmt="jsonl")
    names = [p.rsplit("/", 1)[-1] for p in swept[0]]
    assert any(n.startswith("raw-") for n in names) and any(n.endswith(".arrow") and not n.startswith("raw-")
                                                              for n in names)
    assert len(swept) == 2                             # then every phrase's parts, once all are merged
    assert {p.rsplit("/", 2)[-2] for p in swept[1]} == {f"rows-{name}" for name in got.paths}
    for name, path in normal.paths.items():
        assert got.paths[name].read_bytes() == path.read_bytes(), name
    assert list(stage.iterdir()) == []


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_scratch_in_memory_spills_to_disk_and_changes_nothing(slice20, tmp_path, monkeypatch, fmt):
    """Scratch files go to the staging folder's twin in memory (:mod:`spatec.storage.scratch`);
    where the twin refuses a task's part (a full memory file system), the part is written
    on disk instead. The files are those of a run with every scratch file on disk, and
    nothing is left in either folder."""
    import errno

    from spatec.runners.spark import ingest, match
    from spatec.runners.spark.staging import STAGING_KEY, STAGING_MEMORY_KEY
    from spatec.storage import scratch

    compiled = compile_program(str(THREE))
    inputs = [("BusGPS", str(slice20))]
    conf = {"spark.spatec.ingestRows": "4000", "spark.spatec.bucketRows": "3000"}
    on_disk = serial.replay_streamed(compiled, inputs, tmp_path / "disk", fmt=fmt,
                                     conf={**conf, STAGING_MEMORY_KEY: "off"})
    mem, stage = tmp_path / "shm", tmp_path / "stage"
    mem.mkdir()
    stage.mkdir()
    placed, refused = [], []
    place = scratch.place

    def spy(path, size):
        placed.append(place(path, size))
        return placed[-1]

    writer = match.write_jsonl_part if fmt == "jsonl" else match.write_parquet_part

    def full(df, path, *args):
        if str(path).startswith(str(mem)) and len(refused) < 3:       # the twin full for three parts
            refused.append(path)
            with open(path, "wb") as f:
                f.write(b"half a part")
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return writer(df, path, *args)

    monkeypatch.setattr(scratch, "place", spy)
    monkeypatch.setattr(match, "write_jsonl_part" if fmt == "jsonl" else "write_parquet_part", full)
    session = serial.SerialSession({**conf, STAGING_KEY: str(stage), STAGING_MEMORY_KEY: str(mem)})
    got = ingest.replay_inputs_spark(session, compiled, inputs, tmp_path / "mem", prefilter_leaves=False, fmt=fmt)
    assert len(refused) == 3
    inside = [p for p in placed if p.startswith(str(mem))]
    assert any("raw-" in p for p in inside) and any("rows-" in p for p in inside)
    for name, path in on_disk.paths.items():
        assert got.paths[name].read_bytes() == path.read_bytes(), name
    assert list(stage.iterdir()) == [] and list(mem.iterdir()) == []
