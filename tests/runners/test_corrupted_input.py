"""Corrupted CSV, JSON lines and SIRI-VM polls through both runners (issue 16): no
traceback, ``read = used + rejected``, every reject written with its file and reason,
nothing swallowed; and the Spark runner counts and rejects exactly as the local one."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatec.errors import DataError
from spatec.plan.program import compile_program
from spatec.runners.replay import replay_local
from tests.events.corrupt_cases import PROGRAM, any_damage, check_ingest, one_line_edit

COMPILED = compile_program(PROGRAM)
#: The whole-file problems a corrupted file may be refused for (a clear one-line error).
WHOLE_FILE = ("declares", "empty file", "header row", "no such", "cannot tell the format", "no readable",
              "gzip data")


def replay_one(case, runner, spark=None):
    """Write the case and replay it; the run's ingest summary (None when refused as a whole)."""
    folder = Path(tempfile.mkdtemp(prefix="spatec-corrupt-"))
    try:
        path = case.write(folder)
        out = folder / "out"
        try:
            if runner == "local":
                result = replay_local(COMPILED, [("BusGPS", str(path))], out)
            else:
                from spatec.runners.spark.batch import replay_spark

                result = replay_spark(COMPILED, [("BusGPS", str(path))], out, spark=spark)
        except DataError as e:
            assert str(e).startswith(str(path)) and any(w in str(e) for w in WHOLE_FILE), str(e)
            assert case.lines is None, f"a one-line edit refused the file: {e}"
            return None
        rejects = out / "_rejects" / "BusGPS.jsonl"
        check_ingest(result.ingest, rejects, path, case.lines)
        return result.ingest.rows[0][2:], (rejects.read_bytes().replace(str(folder).encode(), b"")
                                           if rejects.exists() else b"")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


LOCAL = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@LOCAL
@given(st.sampled_from(["csv", "jsonl"]).flatmap(one_line_edit))
def test_one_edit_in_a_line_swallows_nothing(case):
    replay_one(case, "local")


@LOCAL
@given(st.sampled_from(["csv", "jsonl", "sirivm"]).flatmap(any_damage))
def test_any_damage_is_counted(case):
    replay_one(case, "local")


# ------------------------------------------------------------------------------- Spark

@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.one_of(st.sampled_from(["csv", "jsonl"]).flatmap(one_line_edit),
                 st.sampled_from(["csv", "jsonl", "sirivm"]).flatmap(any_damage)))
def test_spark_counts_and_rejects_as_local(spark, case):
    local = replay_one(case, "local")
    remote = replay_one(case, "spark", spark)
    assert remote == local
