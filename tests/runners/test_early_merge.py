"""A phrase's output merged while the job still matches the others (spatec.runners.spark.early):
the order the tasks take the phrases in, the driver's watch of the items done, the output
files put in place only when the run has succeeded, and a phrase handed on again when the
job's own result differs from what was seen early."""
from __future__ import annotations

import threading
from pathlib import Path

import pandas as pd
import pytest

from spatec.plan.program import compile_program
from spatec.runners import serial

REPO = Path(__file__).resolve().parents[2]
THREE = REPO / "bench" / "three_phrases.spatec"


def seed(s: int) -> pd.DataFrame:
    return pd.DataFrame({"g": [s]})


def test_tasks_take_each_kinds_probe_then_the_kinds_one_after_another(tmp_path):
    """First each kind's smallest item (what its items write is then known), then kind by
    kind, largest first: in the kinds' numbers before the driver writes an order, in its
    order after (read again after each item). Two tasks share the claims: every item is
    done once; a retry (same seed) takes its claimed items again."""
    from spatec.runners.spark.scheduling import balance, ranked_items, write_order

    kinds = [0, 0, 0, 1, 1, 1, 2, 2]
    sizes = [50, 10, 40, 30, 20, 5, 60, 70]
    tasks = balance(sizes, 2)
    claims = tmp_path / "one"
    claims.mkdir()
    assert list(ranked_items(seed(0), tasks, str(claims), kinds, sizes)) == [1, 5, 6, 0, 2, 3, 4, 7]

    claims = tmp_path / "two"
    claims.mkdir()
    it = ranked_items(seed(0), tasks, str(claims), kinds, sizes)
    got = [next(it), next(it), next(it)]
    assert got == [1, 5, 6]                                  # the probes
    write_order(str(claims), [2, 1, 0])                      # the driver: kind 2 writes the most
    got.append(next(it))
    other = ranked_items(seed(1), tasks, str(claims), kinds, sizes)
    got_other = [next(other)]
    got += list(it)
    got_other += list(other)
    assert got[3] == 7 and got_other[0] == 3                 # kind 2's last, then kind 1's largest
    assert got[4:] == [4, 0, 2]
    assert sorted(got + got_other) == list(range(8))

    # a retry of task 1 after it died having claimed item 3: item 3 again, nothing else left
    assert list(ranked_items(seed(1), tasks, str(claims), kinds, sizes)) == [3]


def test_ranked_items_without_claims_are_the_tasks_own(tmp_path, monkeypatch):
    """Where no claim can be made (no symbolic links) each task does its own items, all of
    them, in the same order."""
    import os

    from spatec.runners.spark.scheduling import balance, ranked_items

    def refused(*a):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "symlink", refused)
    kinds, sizes = [0, 0, 1, 1], [50, 10, 40, 30]
    tasks = balance(sizes, 2)
    got = [list(ranked_items(seed(s), tasks, str(tmp_path), kinds, sizes)) for s in (0, 1)]
    assert sorted(got[0] + got[1]) == [0, 1, 2, 3]
    assert all(sorted(g) == sorted(t) for g, t in zip(got, tasks))


def test_finished_hands_on_each_kind_once_and_orders_by_bytes_expected(tmp_path):
    """The driver's watch: a kind is handed on once, when its last item is marked, with its
    rows in group order; the order written puts the kind expected to write most first (its
    items done so far, per event, times its events), a kind with nothing done before all."""
    from spatec.runners.spark.early import Finished, mark_done
    from spatec.runners.spark.scheduling import read_order

    done, claims = tmp_path / "done", tmp_path / "claims"
    claims.mkdir()
    kinds, sizes = [0, 0, 1, 1, 2], [100, 100, 100, 300, 10]
    handed = []
    fin = Finished(str(done), kinds, sizes, lambda k, rows: handed.append((k, rows)), str(claims))
    fin.poll()                                             # (no folder yet)
    parts = {}
    for item, nbytes in enumerate([1000, 1000, 10, 10, 5]):
        parts[item] = tmp_path / f"part{item}"
        parts[item].write_bytes(b"x" * nbytes)

    mark_done(str(done), 1, 0, 7, str(parts[1]), 3)
    mark_done(str(done), 2, 1, 4, str(parts[2]), 1)
    fin.poll()
    # kind 0: 1000 bytes per 100 events, 200 events; kind 1: 10 per 100, 400; kind 2: unknown
    assert read_order(str(claims)) == [2, 0, 1]
    assert handed == []
    mark_done(str(done), 0, 0, 2, str(parts[0]), 5)
    fin.poll()
    fin.poll()
    assert handed == [(0, [(2, str(parts[0]), 5), (7, str(parts[1]), 3)])]
    assert read_order(str(claims)) == [2, 1]
    mark_done(str(done), 4, 2, 0, str(parts[4]), 0)
    mark_done(str(done), 3, 1, 9, str(parts[3]), 2)
    fin.poll()
    assert [k for k, _ in handed] == [0, 1, 2]


class _Context:
    def __init__(self):
        self.cancelled = 0

    def cancelAllJobs(self):                          # noqa: N802 (Spark's name)
        self.cancelled += 1


class _Session:
    def __init__(self):
        self.sparkContext = _Context()                # noqa: N815 (Spark's name)


class _Job:
    """A job whose collect waits until ``release`` is set (or times out)."""

    def __init__(self, release: threading.Event):
        self.release = release
        self.finished_before_release = None

    def collect(self):
        self.finished_before_release = not self.release.wait(30)
        return ["rows"]


def test_a_phrase_is_handed_on_while_the_job_still_runs(tmp_path):
    """``collect_watching`` hands a kind on while ``collect`` is still running: here the job
    can only end once the kind has been handed on."""
    from spatec.runners.spark.early import Finished, collect_watching, mark_done

    release = threading.Event()
    job = _Job(release)
    part = tmp_path / "p"
    part.write_bytes(b"x")
    mark_done(str(tmp_path / "done"), 0, 0, 0, str(part), 1)
    fin = Finished(str(tmp_path / "done"), [0], [1], lambda k, rows: release.set())
    assert collect_watching(_Session(), job, fin) == ["rows"]
    assert job.finished_before_release is False


def test_an_error_while_handing_on_cancels_the_job(tmp_path):
    """A merge that fails while the job runs (a full disk) cancels the job and is raised."""
    from spatec.runners.spark.early import Finished, collect_watching, mark_done

    release = threading.Event()
    session = _Session()
    part = tmp_path / "p"
    part.write_bytes(b"x")
    mark_done(str(tmp_path / "done"), 0, 0, 0, str(part), 1)

    def fail(k, rows):
        release.set()                   # (the fake job ends when cancelled; Spark's raises)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        collect_watching(session, _Job(release), Finished(str(tmp_path / "done"), [0], [1], fail))
    assert session.sparkContext.cancelled == 1


def test_a_phrase_handed_on_early_with_other_rows_is_merged_again(slice20, tmp_path, monkeypatch):
    """Should the rows a phrase was handed on with early differ from the job's (a retried task
    wrote its part elsewhere), it is handed on again with the job's and merged again: the
    files are those of a run without it, and only the run's end puts them in place."""
    from spatec.runners.spark import early, ingest, match
    from spatec.runners.spark.staging import STAGING_KEY

    compiled = compile_program(str(THREE))
    inputs = [("BusGPS", str(slice20))]
    conf = {"spark.spatec.ingestRows": "4000", "spark.spatec.bucketRows": "3000"}
    normal = serial.replay_streamed(compiled, inputs, tmp_path / "normal", conf=conf)

    class Short(early.Finished):      # hands each kind on without its last item's part
        def poll(self):
            inner = self.complete
            self.complete = lambda k, rows: inner(k, rows[:-1]) if len(rows) > 1 else None
            try:
                super().poll()
            finally:
                self.complete = inner

    calls = []
    merge = ingest.Merged.__call__

    def recorded(self, name, parts):
        calls.append((name, len(parts)))
        return merge(self, name, parts)

    monkeypatch.setattr(match, "Finished", Short)
    monkeypatch.setattr(ingest.Merged, "__call__", recorded)
    stage = tmp_path / "stage"
    stage.mkdir()
    got = ingest.replay_inputs_spark(serial.SerialSession({**conf, STAGING_KEY: str(stage)}), compiled, inputs,
                                     tmp_path / "again", prefilter_leaves=False, fmt="jsonl")
    again = [name for name, _ in calls]
    assert any(again.count(name) == 2 for name in got.paths)       # merged short, then again
    for name, path in normal.paths.items():
        assert got.paths[name].read_bytes() == path.read_bytes(), name
    assert sorted(p.name for p in (tmp_path / "again").iterdir()) == sorted(p.name for p in got.paths.values())


def test_a_failed_run_leaves_no_output_file(tmp_path):
    """The merged files stay hidden beside their places until :meth:`Merged.commit`;
    :meth:`Merged.discard` (a failed run) removes them and sweeps the parts."""
    import pyarrow as pa

    from spatec.runners.spark.ingest import Merged
    from spatec.runtime.rows import rows_frame, time_fields
    from spatec.sinks.files import write_jsonl_part

    plan = compile_program(str(THREE)).plans[0]
    part = tmp_path / "part"
    keys = write_jsonl_part(rows_frame(plan, []), str(part), time_fields(plan))
    assert isinstance(keys, pa.Table)
    out = tmp_path / "out"
    sweeps: list = []
    m = Merged({plan.name: out / f"{plan.name}.jsonl"}, "jsonl", {plan.name: plan}, None, sweeps)
    m(plan.name, [(str(part), keys)])
    assert [p.name for p in out.iterdir()] == [f".{plan.name}.jsonl.merged"]
    m.discard()
    for s in sweeps:
        s.join()
    assert list(out.iterdir()) == [] and not part.exists()
