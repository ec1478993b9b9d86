"""Buffers known to be in order of ``lo`` (``RunState.lo_sorted``): a join looks only at the
partial matches that can still be within ``within`` of the new one, and pruning drops a prefix.
Both must give exactly what a scan of the whole buffer gives: the same composites in the same
order, the same state left behind — at the window's edge, with equal stamps, and with events
arriving out of order within the lateness bound (the buffer is then scanned whole until pruning
has put it back in order)."""
from __future__ import annotations

import random

import test_against_oracle as T
from automata_support import CRS, US, compile_text, frames, row
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatec.automata.codec import decode_state, encode_state
from spatec.automata.machine import RunState, build
from spatec.automata.step import step
from spatec.runtime.events import event_order, to_evs
from spatec.runtime.routing import partitions
from spatec.spatial.crs import Projector


def _sig(out):
    return [(c.id, c.lo, c.hi, tuple(e.id for e in c.events)) for c in out]


def _buffers(st_):
    return {k: [(pm.lo, pm.hi, tuple(e.id if e is not None else None for e in pm.ev)) for pm in v]
            for k, v in st_.buffers.items()}


def _both(am, batches, final_w):
    """Each batch through two states: one as the runners keep it, one that never knows its
    buffers are in order (scanned whole, pruned pm by pm). Asserts they agree after every step."""
    fast, full = RunState(), RunState()
    got = []
    for evs, wm in batches:
        full.lo_sorted.clear()
        a, la = step(am, fast, list(evs), watermark=wm)
        b, lb = step(am, full, list(evs), watermark=wm)
        assert _sig(a) == _sig(b)
        assert [e.id for e in la] == [e.id for e in lb]
        assert _buffers(fast) == _buffers(full)
        assert fast.size() == full.size()
        got += _sig(a)
    full.lo_sorted.clear()
    a, _ = step(am, fast, [], watermark=final_w, final=True)
    b, _ = step(am, full, [], watermark=final_w, final=True)
    assert _sig(a) == _sig(b)
    return got + _sig(a), fast


def _evs(c, rows):
    proj = Projector(CRS)
    evs = {t: to_evs(df, c.program, proj) for t, df in frames(rows).items()}
    return evs, proj


WITHIN = "phrase Ph per vehicle = Bus -> A ; Bus -> B within 40 s\n"   # Bus is stamped [ts - 30 s, ts]


def _pairs(rows, batches_of=1, lateness=0, order=None):
    c = compile_text(WITHIN)
    evs, proj = _evs(c, rows)
    am = build(c.plan("Ph"), c.program, proj)
    evs = sorted(evs["Bus"], key=event_order) if order is None else [evs["Bus"][i] for i in order]
    batches, seen_hi = [], None
    for i in range(0, len(evs), batches_of):
        chunk = evs[i:i + batches_of]
        seen_hi = max([e.hi for e in chunk] + ([seen_hi] if seen_hi is not None else []))
        batches.append((chunk, seen_hi - lateness))
    return _both(am, batches, max(e.hi for e in evs))


class TestWindowEdge:
    def test_partner_exactly_at_within_is_found(self):
        # A at ts 0 (lo -30 s), B at ts 10: hi - A.lo = 40 s == within: a match
        got, _ = _pairs([row("Bus", "v1", 0), row("Bus", "v1", 10)])
        assert len(got) == 1

    def test_partner_a_microsecond_beyond_within_is_not(self):
        got, _ = _pairs([row("Bus", "v1", 0), row("Bus", "v1", 10.000001)])
        assert got == []

    def test_only_the_recent_partners(self):
        rows = [row("Bus", "v1", t) for t in (0, 2, 4, 6, 8, 10, 12, 14)]
        got, st_ = _pairs(rows)
        # each B pairs with every A up to 10 s before it
        assert len(got) == sum(1 for a in rows for b in rows if 0 < b["t"] - a["t"] <= 10 * US)
        assert st_.lo_sorted


class TestEqualStamps:
    def test_same_lo_on_both_sides_of_the_cut(self):
        # three sources at the same ts: equal lo in the buffer (the cut must keep all of them)
        c = compile_text("phrase Ph = Bus -> A ; Bus -> B within 40 s\n")
        rows = [row("Bus", v, t) for t in (0, 10, 10.5, 40, 41) for v in ("v1", "v2", "v3")]
        evs, proj = _evs(c, rows)
        am = build(c.plan("Ph"), c.program, proj)
        ordered = sorted(evs["Bus"], key=event_order)
        got, _ = _both(am, [([e], e.hi) for e in ordered], max(e.hi for e in ordered))
        assert got


class TestOutOfOrder:
    def test_late_arrival_makes_the_buffer_unsorted_then_pruning_sorts_it(self):
        rows = [row("Bus", "v1", t) for t in (0, 4, 8, 2, 12, 16, 20, 24, 60, 64, 68, 72)]
        got, st_ = _pairs(rows, order=list(range(len(rows))), lateness=10 * US)
        assert got
        assert all(k in st_.lo_sorted for k in st_.buffers)   # back in order once the late one is gone

    def test_an_unsorted_buffer_is_scanned_whole(self):
        rows = [row("Bus", "v1", t) for t in (0, 6, 3, 9)]
        c = compile_text(WITHIN)
        evs, proj = _evs(c, rows)
        am = build(c.plan("Ph"), c.program, proj)
        st_ = RunState()
        out = []
        for e in evs["Bus"]:          # in the order of rows: ts 3 after ts 6
            got, late = step(am, st_, [e], watermark=e.hi - 10 * US)
            assert not late
            out += _sig(got)
        assert any(k not in st_.lo_sorted for k in st_.buffers if st_.buffers[k])
        # A@3 ; B@6 is found although A@3 came after B@6
        assert len(out) == 6


def test_a_state_whose_buffers_are_not_known_sorted():
    """A run state whose buffers are not known sorted (``lo_sorted`` empty, through the state
    codec): its buffers are scanned whole, and known sorted again after the next pruning."""
    rows = [row("Bus", "v1", t) for t in range(0, 100, 5)]
    c = compile_text(WITHIN)
    evs, proj = _evs(c, rows)
    am = build(c.plan("Ph"), c.program, proj)
    ordered = sorted(evs["Bus"], key=event_order)
    st_, ref = RunState(), RunState()
    a_ids, b_ids = [], []
    for i, e in enumerate(ordered):
        if i == 8:
            st_.lo_sorted = set()
            st_ = decode_state(encode_state(st_))
            assert st_.lo_sorted == set()
        a_ids += _sig(step(am, st_, [e], watermark=e.hi)[0])
        b_ids += _sig(step(am, ref, [e], watermark=e.hi)[0])
    assert a_ids == b_ids and a_ids
    st_.since_prune = 1 << 30
    step(am, st_, [], watermark=ordered[-1].hi)
    assert all(k in st_.lo_sorted for k, v in st_.buffers.items() if v)


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_sorted_buffers_equal_whole_scans(data):
    """Random traces and phrases (the oracle test's), with short windows so that the cut
    matters, in random batches and out of order within the lateness bound."""
    rows = data.draw(T.traces())
    types = sorted({r["type"] for r in rows})
    text = data.draw(T.phrases(types))
    within = data.draw(st.sampled_from(["5 s", "20 s", "35 s", "1 min", "3 min"]))
    text = text.replace(" within 3 min\n", f" within {within}\n").replace(" within 10 min\n", f" within {within}\n")
    c = T.compiled_or_reject(text)
    evs_by_type, proj = _evs(c, rows)
    plan = c.plan("Ph")
    am = build(plan, c.program, proj)
    final_w = max(e.hi for evs in evs_by_type.values() for e in evs)
    lateness = data.draw(st.sampled_from([0, 10 * US, 60 * US]))
    rnd = random.Random(data.draw(st.integers(0, 2 ** 16)))
    for _key, evs in partitions(plan, evs_by_type).items():
        order = sorted(evs, key=lambda e: (e.hi - rnd.uniform(0, lateness), event_order(e)))
        batches, i = [], 0
        while i < len(order):
            k = rnd.randint(1, 4)
            i += k
            batches.append((order[i - k:i], max(e.hi for e in order[:i]) - lateness))
        _both(am, batches, final_w)
