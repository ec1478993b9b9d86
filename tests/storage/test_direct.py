"""The positioned writer (:mod:`spatec.storage.direct`): whatever its pieces, offsets and
neighbours, the file holds exactly the bytes given at their place and nothing else moved,
with ``O_DIRECT`` where the file system takes it and without."""
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from spatec.storage import direct


@pytest.fixture(params=["direct", "cached"])
def mode(request, monkeypatch):
    # a small buffer: many full writes and a carried remainder in small inputs
    monkeypatch.setattr(direct, "CHUNK", 3 * direct.ALIGN)
    monkeypatch.setattr(direct, "_free", [])
    monkeypatch.setenv("SPATEC_DIRECT_IO", "1" if request.param == "direct" else "0")
    yield request.param


def _ranges(rng: random.Random, total: int, n: int) -> list:
    cuts = sorted(rng.sample(range(1, total), n - 1))
    bounds = [0] + cuts + [total]
    return [(a, b) for a, b in zip(bounds, bounds[1:])]


def _pieces(data: bytes, rng: random.Random) -> list:
    out, at = [], 0
    while at < len(data):
        n = rng.choice([0, 1, 7, direct.ALIGN - 1, direct.ALIGN, direct.ALIGN + 3, 5 * direct.ALIGN + 11])
        out.append(data[at:at + n])
        at += n
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), total=st.integers(2, 12 * 4096 + 77), n=st.integers(1, 6))
def test_ranges_written_in_any_order_make_the_file_byte_for_byte(tmp_path_factory, mode, seed, total, n):
    rng = random.Random(seed)
    n = min(n, total - 1) or 1
    want = bytes(rng.getrandbits(8) for _ in range(total))
    path = str(tmp_path_factory.mktemp("d") / "f")
    with open(path, "wb") as f:
        f.truncate(total)
    ranges = _ranges(rng, total, n) if n > 1 else [(0, total)]
    # a neighbour's bytes written first, last, or while another range is under way
    writers = [(a, direct.PositionedWriter(path, a), _pieces(want[a:b], rng)) for a, b in ranges]
    rng.shuffle(writers)
    busy = list(writers)
    while busy:
        k = rng.randrange(len(busy))
        _a, w, pieces = busy[k]
        if pieces:
            w.write(pieces.pop(0))
        else:
            w.close()
            busy.pop(k)
    with open(path, "rb") as f:
        assert f.read() == want


def test_the_middle_of_a_range_goes_past_the_page_cache_where_the_file_system_takes_it(tmp_path, mode):
    path = tmp_path / "f"
    path.write_bytes(b"\0" * (10 * direct.ALIGN))
    w = direct.PositionedWriter(str(path), 100)
    if mode == "cached":
        assert w.dfd is None
    elif w.dfd is None:
        pytest.skip(f"the file system of {tmp_path} refuses O_DIRECT (the writer then writes through the cache)")
    data = os.urandom(8 * direct.ALIGN)
    w.write(data)
    w.close()
    got = path.read_bytes()
    assert got[100:100 + len(data)] == data
    assert got[:100] == b"\0" * 100 and got[100 + len(data):] == b"\0" * (len(got) - 100 - len(data))


def test_nothing_written_for_nothing_given(tmp_path, mode):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 5000)
    with direct.PositionedWriter(str(path), 4000) as w:
        w.write(b"")
    assert path.read_bytes() == b"x" * 5000
