"""Phrases over phrases (SPEC §8) run in the local runners (batch and live,
tests/live/test_live_derived.py): Spark batch and Spark live refuse them with an error
naming the construct, the phrase and what it reads, before starting anything; a program
without them, or a choice of phrases that leaves them out, is not refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from spatec.errors import UnsupportedError
from spatec.plan.program import compile_program
from spatec.runners.live_local import LocalLive
from spatec.runners.spark.batch import raw_outputs, replay_spark
from spatec.runners.spark.live import check_streamable

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def headway():
    return compile_program(EXAMPLES / "headway" / "headway.spatec")


def _refused(e):
    assert e.value.what == "phrases as event types"
    assert "phrase Headway reads the composites of StationCall" in str(e.value)


def test_spark_batch_refuses_before_starting_spark(headway, tmp_path):
    with pytest.raises(UnsupportedError) as e:
        replay_spark(headway, [], tmp_path / "out", spark=None)
    _refused(e)
    assert e.value.mode == "Spark batch"
    with pytest.raises(UnsupportedError) as e:
        raw_outputs(None, headway, {})
    _refused(e)


def test_local_live_accepts(headway, tmp_path):
    live = LocalLive(headway, [], None, tmp_path / "ck", tmp_path / "out")
    assert [p.name for p in live.plans] == ["StationCall", "Headway"]


def test_spark_live_refuses(headway):
    with pytest.raises(UnsupportedError) as e:
        check_streamable(headway)
    _refused(e)
    assert e.value.mode == "Spark live"


def test_the_producer_alone_is_not_refused(headway):
    assert [p.name for p in check_streamable(headway, phrases=["StationCall"])] == ["StationCall"]
