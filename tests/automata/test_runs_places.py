"""Runs (SPEC §7) and place sets (SPEC §9) in the automaton against the brute-force oracle
(tests/oracle.py): random small traces, random phrases from templates (runs with and
without `while`, `gap`, patterns, aggregates; runs joined to other events; place sets as
patterns and bound places, the nearest of them too); the same events stepped live in random batches, shuffled
within the lateness, and through the state codec between batches."""
from __future__ import annotations

import os
import random

import pytest
from automata_support import CRS, US, frames, row, write_stops, compiled_or_reject
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oracle
from spatec.automata.codec import decode_state, encode_state
from spatec.automata.machine import RunState, build
from spatec.automata.step import step
from spatec.runners.local import replay_frames
from spatec.runtime.batch import run_partition
from spatec.runtime.events import event_order, to_evs
from spatec.runtime.routing import partitions
from spatec.spatial.crs import Projector

FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
EXAMPLES = int(os.environ.get("ORACLE_EXAMPLES", 1000)) // 4 or 1
LIVE_EXAMPLES = int(os.environ.get("ORACLE_LIVE_EXAMPLES", 600)) // 4 or 1

# stops: two 40 m discs 30 m apart (a fix between them is inside their union, maybe in neither),
# one on the 90 m anchor, one far away
STOPS = [("s1", "First", 0, 0), ("s2", "Second", 30, 0), ("s3", "Third", 90, 10), ("s4", "Far", 2000, 0)]


@pytest.fixture(scope="module")
def stops_file(tmp_path_factory):
    return write_stops(tmp_path_factory.mktemp("stops") / "stops.csv", STOPS)


def places_decl(path) -> str:
    return f'places stops = "{path}"\n    place point(lon, lat) ± 40 m\n\n'


# ------------------------------------------------------------------------------ traces

ANCHORS = [(0, 0), (15, 0), (30, 0), (90, 10), (200, 0), (2000, 0)]


@st.composite
def traces(draw):
    types = draw(st.sampled_from([("Bus",), ("Bus",), ("Bus", "Tag")]))
    sources = ["v1", "v2", "v3"][:draw(st.integers(1, 3))]
    n = draw(st.integers(3, 14))
    rows, seen = [], set()
    for _ in range(n):
        t = draw(st.sampled_from(types))
        src = draw(st.sampled_from(sources))
        ts = draw(st.integers(0, 40)) * 10
        ax, ay = draw(st.sampled_from(ANCHORS))
        dx, dy = ax + draw(st.floats(-12, 12)), ay + draw(st.floats(-12, 12))
        key = (t, src, ts)
        if key in seen:
            continue
        seen.add(key)
        rows.append(row(t, src, ts, dx, dy, x=draw(st.one_of(st.none(), st.integers(0, 6))),
                        line=draw(st.sampled_from(["a", "a", "b"]))))
    return rows


# ------------------------------------------------------------------------------ phrases

CONDS = ["", " while overlap(R.first, R.this)", " while distance(R.prev, R.this) < 20 m",
         " while R.this.x >= R.prev.x", " while R.this.line == R.first.line",
         " while duration(R.first, R.this) < 2 min and not disjoint(R.first, R.this)"]
GAPS = ["", "", " gap 30 s", " gap 2 min"]
SOURCES = ["Bus", "Bus", "(Bus and not at P)", "(Bus and within 40 m of P)", "(Bus and not at stops)"]
RUN_WHERE = ["count(R) >= 2", "duration(R) > 30 s", "max(R.x) > 2", "avg(R.x) < 3", "hull_area(R) > 3000",
             'R.line == "a"', "distance(R.first, R.last) < 20 m", "min(R.x) >= 1"]
EMIT = ("n = count(R), mx = max(R.x), av = avg(R.x), mn = min(R.x), since = R.first.t, until = R.last.t, "
        "v = R.vehicle, lasting = duration(R)")


@st.composite
def run_expr(draw):
    return f"run {draw(st.sampled_from(SOURCES))} -> R{draw(st.sampled_from(CONDS))}{draw(st.sampled_from(GAPS))}"


@st.composite
def phrases(draw):
    run = draw(run_expr())
    per = draw(st.sampled_from(["", "", " per vehicle", " per line"]))
    form = draw(st.sampled_from(["alone", "alone", "next", "and", "conc", "before", "same", "after",
                                 "set", "set", "setrun", "pair_at", "single"]))
    where = [draw(st.sampled_from(RUN_WHERE))] if draw(st.booleans()) else []
    emit = EMIT
    within = ""
    if form == "alone":
        body = run
    elif form == "next":
        body = f"({run}) ; Bus -> B"
        where.append("successive(R.last, B)")
    elif form == "and":
        body = f"({run}) and Tag -> B"
        within = " within 3 min"
    elif form == "conc":
        body = f"({run}) || Bus -> B"
        where.append("R.vehicle != B.vehicle")
        within = " within 4 min"
    elif form == "before":
        body = f"Bus -> B ; ({run})"
        within = " within 5 min"
    elif form == "same":
        body = f"({run}) ;= Bus -> B"
        within = " within 5 min"
    elif form == "after":
        body = f"({run}) ; not Bus -> X within 1 min"
        if draw(st.booleans()):
            where.append("X.vehicle == R.vehicle")
    elif form == "set":
        body = draw(st.sampled_from(["Bus -> A and at stops -> S", "Bus -> A and certainly at stops -> S",
                                     "Bus -> A and at stops", "Bus -> A and certainly at stops",
                                     "Bus -> A and not at stops", "Bus -> A and certainly not at stops",
                                     "Bus -> A and (at stops or at P)", "Bus -> A and within 30 m of stops",
                                     "Bus -> A and at stops -> S and not at P",
                                     "Bus -> A and at nearest stops -> S", "Bus -> A and certainly at nearest stops -> S",
                                     "Bus -> A and at nearest stops -> S and not at P"]))
        where = [draw(st.sampled_from(["", 'S.name != "Second"', "distance(A, S) < 10 m", "A.x > 2"]))] \
            if "-> S" in body else [draw(st.sampled_from(["", "A.x > 2"]))]
        emit = "v = A.vehicle" + (", stop = S.stop_id, name = S.name" if "-> S" in body else "")
    elif form == "setrun":
        body = draw(st.sampled_from([f"({run}) and certainly at stops -> S", f"({run}) and at stops -> S",
                                     f"({run}) and not at stops", f"({run}) and at nearest stops -> S",
                                     f"({run}) and certainly at nearest stops -> S"]))
        if "-> S" in body:
            where.append(draw(st.sampled_from(["distance(R, S) < 5 m", "S.stop_id != \"s3\"",
                                               "overlap(R.last, S)"])))
            emit = EMIT + ", stop = S.stop_id"
    elif form == "pair_at":
        body = draw(st.sampled_from(["(Bus -> A ; Bus -> B) and at stops -> S",
                                     "(Bus -> A ; Bus -> B) and at nearest stops -> S"]))
        within = " within 2 min"
        emit = "stop = S.name"
    else:
        body = draw(st.sampled_from(["Bus -> A and at P -> H", "Bus -> A and certainly at P -> H"]))
        emit = "place = H.name"
    where = [w for w in where if w]
    text = f"phrase Ph{per} =\n    {body}\n"
    if where:
        text += "  where " + " and ".join(where) + "\n"
    text += within + "\n"
    if emit and ("R" in body or "A" in body):
        text += f"  emit {emit}\n"
    return text


def compiled_with_stops(stops, text):
    return compiled_or_reject(places_decl(stops) + text)


# ------------------------------------------------------------------------------ comparisons

def sut(compiled, rows, name="Ph"):
    """(id, lo, hi, bindings with places) and the emit values of the local runner's rows."""
    df = replay_frames(compiled, frames(rows), crs=CRS).frames[name]
    std = {"phrase", "id", "lo", "hi", "hull", "events", "places"}
    out, emits = [], {}
    for r in df.to_dict("records"):
        binds = dict(r["events"])
        binds.update(r.get("places") or {})
        out.append((r["id"], int(r["lo"]), int(r["hi"]), tuple(sorted(binds.items()))))
        emits[r["id"]] = {k: _norm(v) for k, v in r.items() if k not in std}
    return sorted(out), emits


def orc(compiled, rows, name="Ph"):
    proj = Projector(CRS)
    o = oracle.Oracle(compiled.program, proj, oracle.oevents(compiled.program, rows, proj))
    got = sorted(g[:4] for g in o.phrase(name))
    info = compiled.program.phrase(name)
    emits = {}
    if info.phrase.emit:
        for x, binds, cid in o.composites(name):
            env = dict(x.binds)
            emits[cid] = {f.name: _norm(_unit(o.where.val(f.expr, env), t)) for f, (_n, t) in
                          zip(info.phrase.emit, info.schema)}
    return got, emits


def _unit(v, t):
    return v / 1e6 if t == "duration" and v is not None else v


def _norm(v):
    if v is None or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, float):
        return round(v, 6)
    return v


@settings(max_examples=EXAMPLES, **FAST)
@given(st.data())
def test_runs_and_places_equal_the_oracle(stops_file, data):
    rows = data.draw(traces())
    text = data.draw(phrases())
    c = compiled_with_stops(stops_file, text)
    got, got_emit = sut(c, rows)
    want, want_emit = orc(c, rows)
    assert got == want, text
    assert got_emit == {k: want_emit[k] for k in got_emit} if want_emit else True, text


# ------------------------------------------------------------------------------ live

@settings(max_examples=LIVE_EXAMPLES, **FAST)
@given(st.data())
def test_live_in_random_batches_equals_batch(stops_file, data):
    """The same events in random batches, shuffled within the lateness, the state written and
    read back between batches: the same composites as a replay, each once."""
    rows = data.draw(traces())
    text = data.draw(phrases())
    c = compiled_with_stops(stops_file, text)
    proj = Projector(CRS)
    evs_by_type = {t: to_evs(df, c.program, proj) for t, df in frames(rows).items()}
    plan = c.plan("Ph")
    am = build(plan, c.program, proj)
    final_w = max(e.hi for evs in evs_by_type.values() for e in evs)
    lateness = data.draw(st.sampled_from([0, 10 * US, 60 * US, 300 * US]))
    rnd = random.Random(data.draw(st.integers(0, 2 ** 16)))
    for _key, evs in partitions(plan, evs_by_type).items():
        batch, _ = run_partition(am, list(evs), final_w, fastpath=False)
        want = {x.id: (x.lo, x.hi) for x in batch}
        order = sorted(evs, key=lambda e: (e.hi - rnd.uniform(0, lateness), event_order(e)))
        st_ = RunState()
        got = {}
        i = 0
        while i < len(order):
            k = rnd.randint(1, 4)
            chunk = sorted(order[i:i + k], key=event_order)
            i += k
            seen_hi = max(e.hi for e in order[:i])
            out, late = step(am, st_, chunk, watermark=seen_hi - lateness)
            assert not late, "events within the lateness bound are never late"
            for x in out:
                assert x.id not in got, f"reported twice: {x.id}\n{text}"
                got[x.id] = (x.lo, x.hi)
            if rnd.random() < 0.3:
                st_ = decode_state(encode_state(st_))
        # mid-stream, live never reports what the replay does not
        assert set(got) <= set(want), text
        out, _ = step(am, st_, [], watermark=final_w, final=True)
        for x in out:
            assert x.id not in got, f"reported twice: {x.id}\n{text}"
            got[x.id] = (x.lo, x.hi)
        assert got == want, text
