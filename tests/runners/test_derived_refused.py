"""Phrases over phrases (SPEC §8) run in the local runners (batch and live,
tests/live/test_live_derived.py) and in Spark batch as stages of their own
(tests/runners/test_spark_parity.py). What is refused, with an error naming the construct,
the phrase and what it reads, before starting anything: Spark batch and Spark live for a
phrase that reads both composites and input events (REFERENCE decisions 37, 38). A program
without them, or a choice of phrases that leaves them out, is not refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from spatec.errors import UnsupportedError
from spatec.plan.program import compile_program
from spatec.runners.live_local import LocalLive
from spatec.runners.spark.batch import replay_spark
from spatec.runners.spark.live import check_streamable

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def headway():
    return compile_program(EXAMPLES / "headway" / "headway.spatec")


def _refused(e):
    assert e.value.what == "phrases as event types"
    assert "phrase Headway reads the composites of StationCall" in str(e.value)


class _NoSession:
    """Refused before any Spark job: nothing is asked of the session but its settings."""

    class sparkContext:  # noqa: N801
        defaultParallelism = 2
        master = "local[2]"

    class conf:  # noqa: N801
        @staticmethod
        def get(key, default=None):
            return default


def test_spark_batch_refuses_a_phrase_over_composites_and_input_events(tmp_path):
    p = tmp_path / "mixed.spatec"
    p.write_text(f'include "{EXAMPLES / "headway" / "headway.spatec"}"\n\n'
                 "phrase Leaving per vehicle =\n    StationCall -> C ; BusGPS -> B\n"
                 "  where B.vehicle == C.vehicle\n  within 10 min\n")
    mixed = compile_program(p)
    with pytest.raises(UnsupportedError) as e:
        replay_spark(mixed, [], tmp_path / "out", spark=_NoSession())
    assert e.value.mode == "Spark batch"
    assert "phrase Leaving reads the composites of StationCall and input events (BusGPS)" in str(e.value)
    assert not (tmp_path / "out").exists()


def test_local_live_accepts(headway, tmp_path):
    live = LocalLive(headway, [], None, tmp_path / "ck", tmp_path / "out")
    assert [p.name for p in live.plans] == ["StationCall", "Headway"]


def test_spark_live_runs_the_flow_graph(headway):
    """Spark live takes phrases over phrases (the driver steps them, REFERENCE decision 38);
    ``--phrase Headway`` runs its producer too."""
    assert [p.name for p in check_streamable(headway)] == ["StationCall", "Headway"]
    assert [p.name for p in check_streamable(headway, phrases=["Headway"])] == ["StationCall", "Headway"]


def test_spark_live_refuses_a_phrase_over_composites_and_input_events(tmp_path):
    p = tmp_path / "mixed.spatec"
    p.write_text(f'include "{EXAMPLES / "headway" / "headway.spatec"}"\n\n'
                 "phrase Leaving per vehicle =\n    StationCall -> C ; BusGPS -> B\n"
                 "  where B.vehicle == C.vehicle\n  within 10 min\n")
    with pytest.raises(UnsupportedError) as e:
        check_streamable(compile_program(p))
    assert e.value.mode == "Spark live"
    assert "phrase Leaving reads the composites of StationCall and input events (BusGPS)" in str(e.value)


def test_the_producer_alone_is_not_refused(headway):
    assert [p.name for p in check_streamable(headway, phrases=["StationCall"])] == ["StationCall"]
