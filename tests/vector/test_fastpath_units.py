"""The fast paths piece by piece: which phrases take one (by shape), the geometry
against the scalar functions (including the boundary cases the numpy tests
leave to them), grouped search, refusals of unfit data, and the switch."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastpath_support import CRS, SETTINGS, check_same, compile_text, frames, row
from hypothesis import given, settings
from hypothesis import strategies as st

from spatec.automata.machine import Ev
from spatec.errors import UnsupportedError
from spatec.plan.evaluator import chain_preds
from spatec.plan.program import compile_program
from spatec.runners.local import replay_frames
from spatec.runtime.events import to_evs
from spatec.sinks import encoding as E
from spatec.spatial import stamps as S
from spatec.spatial.crs import Projector
from spatec.vector import fastpath as F
from spatec.vector.vexpr import Columns

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------ shapes

def shape(text, name="Ph"):
    c = compile_text(text)
    fp = F.fast_path(c.plan(name))
    return None if fp is None else fp.shape


class TestRecognise:
    @pytest.mark.parametrize("text, want", [
        ("phrase Ph = Bus -> A and at P where A.x > 3 within 1 min\n", "leaf"),
        ("phrase Ph per vehicle = (Bus -> A and Tuesday and certainly at Q)\n", "leaf"),
        ("phrase Ph = Bus and at P within 1 min\n", None),                        # unbound: id without events
        ("phrase Ph = (Bus -> A and at P) or (Bus -> A and at Q) within 1 min\n", None),
        ("phrase Ph per vehicle = Bus -> A ;= Bus -> B ;= Bus -> C where successive(A, B, C)\n", "chain"),
        ("phrase Ph = Bus -> A ; Bus -> B where successive(A, B) and A.x < B.x\n", "chain"),
        ("phrase Ph per line = Bus -> A ;= Bus -> B where successive(A, B)\n", "chain"),
        ("phrase Ph = Bus -> A ; (Bus -> B ;= Bus -> C) where successive(A, B) and successive(B, C)\n", "chain"),
        # (A ; B) a chain, then any C within 5 min: two chains joined at the root
        ("phrase Ph = Bus -> A ; Bus -> B ; Bus -> C where successive(A, B) within 5 min\n", "chains"),
        ("phrase Ph = Bus -> A ; Bus -> B where successive(B, A) within 5 min\n", None),
        ("phrase Ph = Bus -> A ; Bus -> B where not successive(A, B) within 5 min\n", None),
        ("phrase Ph = (Bus -> A ; Bus -> B) and at P where successive(A, B)\n", None),   # a join's patterns
        ("phrase Ph = Bus -> A || Bus -> B where distance(A, B) < 50 m and A.vehicle < B.vehicle\n", "pair"),
        ("phrase Ph per line = Bus -> A ;= Bus -> B within 2 min\n", "pair"),
        ("phrase Ph = (Bus -> A and at P) and (Bus -> B and at Q) within 1 min\n", "pair"),
        ("phrase Ph = (Bus -> A || Bus -> B) and at P\n", None),                 # a join's patterns
        ("phrase Ph = Bus -> A || Tag -> B\n", None),                            # two types
        ("phrase Ph = Bus -> A || Bus -> B || Bus -> C\n", None),                # three events
        ("phrase Ph per vehicle = Bus -> A ; not Bus -> X within 1 min\n", "after"),
        ("phrase Ph per vehicle = (Bus -> A and at P) ;= not (Bus -> X and at Q) within 1 min "
         "where X.x > A.x\n", "after"),
        ("phrase Ph = Bus -> A ; not Bus -> X within 1 min\n", None),              # X of any source
        ("phrase Ph per line = Bus -> A ; not Bus -> X within 1 min\n", None),
        ("phrase Ph per vehicle = Bus -> A ; not Tag -> X within 1 min\n", None),  # X of another type
        ("phrase Ph per vehicle = Bus -> A ; not at P within 1 min\n", None),      # X of any type
        ("phrase Ph per vehicle = Bus -> A ; not Bus -> X ; Bus -> B within 5 min\n", "between"),
        ("phrase Ph per vehicle = Bus -> A ;= not Bus -> X ; Bus -> B where X.x > A.x within 5 min\n",
         "between"),
        ("phrase Ph per vehicle = Bus -> A ; not Bus -> X ;<> Bus -> B within 5 min\n", "between"),
        ("phrase Ph per vehicle = Bus -> A ;= not Bus -> X ;= Bus -> B within 5 min\n", None),  # X to A and B
        ("phrase Ph per vehicle = Bus -> A ; not Bus -> X ; Bus -> B where X.x > A.x + B.x within 5 min\n",
         None),
        ("phrase Ph per vehicle = Bus -> A ; not Bus -> X ; Tag -> B within 5 min\n", None),
        ("phrase Ph per vehicle = (Bus -> A ; not Bus ; Bus -> B) ; Bus -> C within 5 min\n", None),
    ])
    def test_shape(self, text, want):
        assert shape(text) == want

    def test_examples(self):
        want = {"Stuck": "chain", "StuckOnRoad": "chain", "Silent": "after", "HospitalToStation": "between",
                "CentreToHospital": "between", "TuesdayToHospital": "between",
                "OtherWeekdayToHospital": "between", "Bunching": "pair", "ThroughRoadWorks": None,
                "EntersRoadWorks": None, "RainySlowJourney": None,
                # a run alone, with its patterns and places (spatec/vector/runs.py)
                "StuckEpisode": "run", "Crawl": "run", "DwellAtStop": "run", "StationCall": "run",
                # phrases over phrases: the automaton
                "Headway": None, "StuckTogether": None, "Blockage": None,
                # fences: certainly in/out with an absence between
                "EntersCore": "between", "LeavesCore": "between"}
        feed = REPO / "examples" / "off_route" / "cambridge_gtfs.zip"
        if feed.exists():   # (derived from the data set by `spatec datasets gtfs`: not in the repository)
            want.update(OffNetwork="run", OffRouteU="run")
        got = {}
        for path in sorted((REPO / "examples").glob("*/*.spatec")):
            if path.parent.name == "off_route" and not feed.exists():
                continue
            try:
                c = compile_program(path)
            except UnsupportedError:
                continue  # a construct with no plan yet (spatec/plan/support.py)
            for plan in c.plans:
                fp = F.fast_path(plan)
                got[plan.name] = None if fp is None else fp.shape
        assert got == want

    def test_plain_data(self):
        c = compile_text("phrase Ph per vehicle = Bus -> A ; not Bus -> X within 1 min\n")
        fp = F.fast_path(c.plan("Ph"))
        assert fp == F.FastPath("after", "Ph", "Bus", ("A",), c.plan("Ph"))
        assert fp.describe() == "fast path: after over Bus (A)"


# ------------------------------------------------------------------------------ geometry

def columns(xs, ys, rs):
    """Discs in projected metres as columns; events made on demand."""
    xs, ys, rs = (np.asarray(a, dtype=float) for a in (xs, ys, rs))
    n = len(xs)
    evs = [Ev("T", f"T:s:{i}", "s", i, i, i, S.Loc.disc(xs[i], ys[i], rs[i]), {}) for i in range(n)]
    disc = np.ones(n, dtype=bool)
    return Columns(ids=np.array([e.id for e in evs], dtype=object), src_code=np.zeros(n, dtype=np.int64),
                   t=np.arange(n), lo=np.arange(n), hi=np.arange(n), r=rs,
                   locate=lambda rows: (xs, ys, disc) if rows is None else (xs[rows], ys[rows], disc[rows]),
                   attr_values=lambda name, rows: [None] * n,
                   materialise=lambda rows: [evs[i] for i in rows.tolist()],
                   group=np.zeros(n, dtype=np.int64), part=np.zeros(n, dtype=np.int64))


def scalar_overlap(cols, left, right):
    def loc(rows):
        locs = [S.Loc.disc(cols.x[i], cols.y[i], cols.r[i]) for i in rows]
        return locs[0] if len(locs) == 1 else S.hull(locs)
    return [S.overlap(loc([r[i] for r in left]), loc([r[i] for r in right])) for i in range(len(left[0]))]


class TestHullOverlap:
    def check(self, pts, r, split, reps=1):
        k = len(pts)
        cols = columns([p[0] for p in pts] * reps, [p[1] for p in pts] * reps, [r] * k * reps)
        base = np.arange(reps) * k
        left = [base + i for i in range(split)]
        right = [base + i for i in range(split, k)]
        assert F.hull_overlap(cols, left, right).tolist() == scalar_overlap(cols, left, right)

    @pytest.mark.parametrize("pts, r, split", [
        ([(0, 0), (100, 0), (50, 30)], 15.0, 2),          # exactly 2r from the segment: the exact test
        ([(0, 0), (100, 0), (50, 30.000000001)], 15.0, 2),
        ([(0, 0), (100, 0), (50, 29.999999999)], 15.0, 2),
        ([(0, 0), (100, 0), (0, 100), (20, 20)], 15.0, 3),   # inside the triangle
        ([(0, 0), (100, 0), (0, 100), (50, 50)], 0.0, 3),     # on an edge, points without radius
        ([(0, 0), (100, 0), (0, 100), (80, 80)], 0.0, 3),
        ([(0, 0), (50, 0), (100, 0), (50, 0)], 0.0, 3),       # collinear hull, the point on it
        ([(0, 0), (50, 0), (100, 0), (50, 1e-9)], 0.0, 3),
        ([(5, 5), (5, 5), (5, 5), (5, 35)], 15.0, 3),        # the hull is one point
        ([(0, 0), (100, 0), (0, 100), (100, 100), (130, 100)], 15.0, 4),
        ([(0, 0), (10, 0), (40, 0), (70, 0)], 15.0, 2),       # two hulls: the exact test
        ([(0, 0), (60, 0), (30, 30)], 15.0, 1),               # a disc against a segment on the right
    ])
    def test_cases(self, pts, r, split):
        self.check(pts, r, split)

    @settings(max_examples=200, **SETTINGS)
    @given(st.integers(3, 5), st.data())
    def test_random(self, k, data):
        grid = st.integers(-4, 4).map(lambda v: v * 7.5)     # on a grid: ties and tangencies happen
        pts = [(data.draw(grid) + 500000.0, data.draw(grid) + 5780000.0) for _ in range(k)]
        split = data.draw(st.integers(1, k - 1))
        self.check(pts, data.draw(st.sampled_from([0.0, 3.75, 7.5, 15.0])), split)


class TestHullsWkt:
    @pytest.mark.parametrize("r", [0.0, 15.0])
    @pytest.mark.parametrize("k", [1, 2, 4])
    def test_equals_scalar(self, r, k):
        rng = np.random.default_rng(k)
        n = 30
        x = 500000 + rng.integers(-3, 3, n * k) * 10.0
        y = 5780000 + rng.integers(-3, 3, n * k) * 10.0
        cols = columns(x, y, [r] * (n * k))
        vs = "ABCD"[:k]
        fp = F.FastPath("chain", "Ph", "T", tuple(vs), None)
        m = F.Matches(fp, cols, {v: np.arange(n) * k + i for i, v in enumerate(vs)}, np.zeros(n), np.zeros(n))
        proj = Projector(CRS)
        want = [E.to_lonlat_wkt(c.loc, proj) for c in m.composites()]
        assert E.matches_hulls_wkt(m, proj) == want
        assert E.matches_hulls_wkt(m, proj, chunk=7) == want         # in chunks (the last one short)

    def test_unequal_radii_take_the_scalar_path(self):
        cols = columns([500000, 500030, 500000], [5780000, 5780000, 5780040], [15.0, 5.0, 15.0])
        fp = F.FastPath("chain", "Ph", "T", ("A", "B"), None)
        m = F.Matches(fp, cols, {"A": np.array([0, 1]), "B": np.array([1, 2])}, np.zeros(2), np.zeros(2))
        proj = Projector(CRS)
        assert E.matches_hulls_wkt(m, proj) == [E.to_lonlat_wkt(c.loc, proj) for c in m.composites()]


class TestTextColumn:
    def test_rows_asked_for_become_strings(self):
        import pyarrow as pa

        from spatec.vector.vexpr import TextColumn, all_distinct

        arr = pa.chunked_array([["a", "b", "é"], ["d", "a"]])
        col = TextColumn(arr)
        assert len(col) == 5 and col.tolist() == ["a", "b", "é", "d", "a"]
        got = col[np.array([2, 0, 2])]
        assert got.dtype == object and got.tolist() == ["é", "a", "é"]
        assert col[np.array([True, False, False, True, False])].tolist() == ["a", "d"]
        assert col[np.zeros(0, dtype=np.int64)].tolist() == [] and col[3] == "d"
        sub = col.take(np.array([4, 1, 3]))                   # still unmade: rows of rows
        assert len(sub) == 3 and sub[np.array([2, 0])].tolist() == ["d", "a"] and sub[1] == "b"
        assert sub.take(np.array([0])).tolist() == ["a"]
        assert not all_distinct(col) and all_distinct(sub) and not all_distinct(col.take(np.array([0, 4])))
        assert all_distinct(col.take(np.array([1, 2, 3]))) and not all_distinct(col.take(np.array([1, 1])))
        unique = TextColumn(pa.array(["u", "v", "w"]))
        assert all_distinct(unique) and all_distinct(unique.take(np.array([2, 0]))) and all_distinct(unique.take(
            np.zeros(0, dtype=np.int64))) and not all_distinct(unique.take(np.array([2, 0, 2])))
        assert not all_distinct(np.array(["x", "x"], dtype=object)) and all_distinct(np.array(["x", "y"], dtype=object))
        series = pd.Series(pd.array(["p", "q"], dtype=pd.ArrowDtype(pa.string())))
        assert TextColumn.of(series).tolist() == ["p", "q"]
        assert TextColumn.of(pd.Series(["p", "q"], dtype=object)) is None


class TestGroupSearch:
    @settings(max_examples=100, **SETTINGS)
    @given(st.lists(st.tuples(st.integers(0, 3), st.integers(-50, 50)), min_size=1, max_size=30, unique=True),
           st.lists(st.tuples(st.integers(0, 3), st.integers(-60, 60)), min_size=1, max_size=10),
           st.sampled_from(["left", "right"]), st.booleans())
    def test_brute_force(self, rows, queries, side, huge):
        rows.sort()
        scale = 2 ** 56 if huge else 1                     # huge: the key would overflow; per group instead
        g = np.array([r[0] for r in rows], dtype=np.int64)
        v = np.array([r[1] for r in rows], dtype=np.int64) * scale
        gq = np.array([q[0] for q in queries], dtype=np.int64)
        q = np.array([q[1] for q in queries], dtype=np.int64) * scale
        got = F.group_search(g, v, gq, q, side).tolist()
        want = []
        for gg, qq in zip(gq.tolist(), q.tolist()):
            if side == "left":
                want.append(sum(1 for a, b in zip(g.tolist(), v.tolist()) if (a, b) < (gg, qq)))
            else:
                want.append(sum(1 for a, b in zip(g.tolist(), v.tolist()) if (a, b) <= (gg, qq)))
        assert got == want


# ------------------------------------------------------------------------------ refusals and the switch

def _replay_same(c, fr):
    a = replay_frames(c, fr, crs=CRS, fastpath=True).frames["Ph"]
    b = replay_frames(c, fr, crs=CRS, fastpath=False).frames["Ph"]
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
    return b


def _run_frame(c, fr):
    proj = Projector(CRS)
    fp = F.fast_path(c.plan("Ph"))
    final = max(int(df["_hi"].max()) for df in fr.values())
    return F.run_frame(fp, fr[fp.type], c.program, proj, final, lambda d: to_evs(d, c.program, proj))


class TestRefusals:
    def test_repeated_event_is_refused(self):
        rows = [row("Bus", "v1", 0), row("Bus", "v1", 10), row("Bus", "v1", 20)]
        fr = frames(rows + rows[1:2])
        c = compile_text("phrase Ph per vehicle = Bus -> A ;= Bus -> B where successive(A, B)\n")
        assert _run_frame(c, fr) is None
        assert len(_replay_same(c, fr)) == 2

    def test_local_time_outside_stamp_is_refused(self):
        fr = frames([row("Bus", "v1", 0), row("Bus", "v1", 10), row("Bus", "v1", 20)])
        fr["Bus"].loc[1, "_t"] = fr["Bus"].loc[1, "_hi"] + 5_000_000
        c = compile_text("phrase Ph per vehicle = Bus -> A ; not Bus -> X within 15 s\n")
        assert _run_frame(c, fr) is None
        _replay_same(c, fr)

    def test_partition_of_two_sources_is_refused(self):
        fr = frames([row("Bus", "v1", 0), row("Bus", "v1", 40), row("Bus", "v2", 35), row("Bus", "v2", 100)])
        fr["Bus"]["_source"] = ["v1", "w", "v1", "w"]    # the key (vehicle) is not the source
        c = compile_text("phrase Ph per vehicle = Bus -> A ; not Bus ; Bus -> B within 3 min\n")
        assert _run_frame(c, fr) is None
        _replay_same(c, fr)


class TestSwitch:
    body = "phrase Ph per vehicle = Bus -> A ; not Bus -> X within 15 s\n"

    def _rows(self):
        return frames([row("Bus", "v1", 0), row("Bus", "v1", 10), row("Bus", "v1", 40), row("Bus", "v2", 90)])

    def test_off_by_argument_and_environment(self, monkeypatch):
        import spatec.runtime.batch as common

        def boom(*a, **k):
            raise AssertionError("fast path taken")

        monkeypatch.setattr(common, "fast_rows", boom)
        c = compile_text(self.body)
        assert len(replay_frames(c, self._rows(), crs=CRS, fastpath=False).frames["Ph"]) == 2
        monkeypatch.setenv("SPATEC_FASTPATH", "0")
        assert len(replay_frames(c, self._rows(), crs=CRS).frames["Ph"]) == 2
        monkeypatch.setenv("SPATEC_FASTPATH", "1")
        with pytest.raises(AssertionError, match="fast path taken"):
            replay_frames(c, self._rows(), crs=CRS)

    def test_on_by_default(self, monkeypatch):
        monkeypatch.delenv("SPATEC_FASTPATH", raising=False)
        c = compile_text(self.body)
        r = replay_frames(c, self._rows(), crs=CRS)
        assert r.state_sizes["Ph"] == 0 and len(r.frames["Ph"]) == 2


class TestIds:
    def test_batch_ids_equal_composite_id(self):
        from spatec.automata.machine import composite_id

        cols = columns([0.0] * 5, [0.0] * 5, [1.0] * 5)
        cols.ids = np.array(["BusGPS:v1:2019-10-01T07:59:38Z", 'Bus"x\\y:é\n\u2028', "a", "ü\x00", ""], dtype=object)
        for vs in [("A",), ("B", "A"), ("A", "B", "C", "D"), ("X_1", "A")]:
            fp = F.FastPath("chain", 'Ph"ä\\', "T", vs, None)
            rows = {v: np.array([(i + j) % 5 for j in range(5)]) for i, v in enumerate(vs)}
            m = F.Matches(fp, cols, rows, np.zeros(5), np.zeros(5))
            assert m.ids() == [composite_id(fp.phrase, [(v, cols.ids[rows[v][j]]) for v in vs]) for j in range(5)]


# ------------------------------------------------------------------------------ distance pre-filter

@pytest.mark.parametrize("cond, want", [
    ("distance(A, B) < 100 m", 100.0), ("distance(B, A) <= 0.2 km", 200.0), ("40 m > distance(A, B)", 40.0),
    ("distance(A, B) > 100 m", None), ("distance(A, B) / 1 m < 100", None), ("A.x < 3", None),
])
def test_near_reads_only_an_upper_bound_on_the_pair_distance(cond, want):
    c = compile_text(f"phrase Ph = Bus -> A || Bus -> B where {cond} and A.vehicle < B.vehicle\n")
    node = c.plan("Ph").root
    assert F.near_bound(chain_preds(node), "A", "B") == want


def test_pairs_at_the_distance_bound_are_kept():
    """Discs whose gap is just under D (centres D + r_A + r_B apart, less a millimetre,
    in the metric CRS) still pair; just over, they do not: the pre-filter drops only
    what the exact test drops, and the fast path agrees with the automaton."""
    text = "phrase Ph = Bus -> A || Bus -> B where distance(A, B) < 50 m and A.vehicle < B.vehicle\n"
    c = compile_text(text)
    proj = Projector(CRS)
    a = row("Bus", "a", 0)
    x0, y0 = proj.forward(np.array([a["lon"]]), np.array([a["lat"]]))
    out = {}
    for gap, name in ((50.0 - 1e-3, "in"), (50.0 + 1e-3, "out")):
        b = row("Bus", "b", 0)
        lon, lat = proj.inverse(np.array([x0[0] + gap + 2 * a["r"]]), np.array([y0[0]]))
        b["lon"], b["lat"] = float(lon[0]), float(lat[0])
        b["attrs"].update(lon=b["lon"], lat=b["lat"])
        fast = replay_frames(c, frames([a, b]), crs=CRS).frames["Ph"]
        slow = replay_frames(c, frames([a, b]), crs=CRS, fastpath=False).frames["Ph"]
        assert list(fast["id"]) == list(slow["id"]), name
        out[name] = len(fast)
    assert out == {"in": 1, "out": 0}


def test_equal_leaf_patterns_are_tested_once_over_every_row(monkeypatch):
    """Two leaves with the same patterns (bunching's ``not (at ...)`` on A and on B)
    are tested once over the frame's rows, and each gets the answer; a test over
    other rows, or over another frame's columns, is computed afresh."""
    from spatec.vector import vexpr

    text = ("phrase Ph = (Bus -> A and not at P) || (Bus -> B and not at P) "
            "where A.vehicle < B.vehicle and distance(A, B) < 300 m\n")
    rows = [row("Bus", v, t, dx=dx) for t in range(0, 60, 10) for v, dx in (("a", 0.0), ("b", 250.0), ("c", 400.0))]
    calls = []
    real = vexpr.Patterns.relate

    def counted(self, p, cols, rows):
        calls.append((p, id(cols), len(rows)))
        return real(self, p, cols, rows)

    monkeypatch.setattr(vexpr.Patterns, "relate", counted)
    n = check_same(text, rows, "pair")
    assert n > 0
    c = compile_text(text)
    fr = frames(rows)
    calls.clear()
    F.run_frame(F.fast_path(c.plan("Ph")), fr["Bus"], c.program, Projector(CRS), 10 ** 18,
                lambda d: to_evs(d, c.program, Projector(CRS)))
    top = [x for x in calls if type(x[0]).__name__ == "Not"]
    assert len(top) == 1 and top[0][2] == len(fr["Bus"])

    pats = vexpr.Patterns(c.program.places, c.program.timezone, Projector(CRS))
    cols = F.frame_columns(F.fast_path(c.plan("Ph")), fr["Bus"], Projector(CRS), None)
    patterns = c.plan("Ph").root.left.filters
    every = np.arange(cols.n)
    first = pats.mask(patterns, cols, every)
    first[:] = ~first                                   # the caller's copy: not the memo
    calls.clear()
    again = pats.mask(patterns, cols, every)
    assert not calls and (again == ~first).all()
    pats.mask(patterns, cols, every[1:])
    other = F.frame_columns(F.fast_path(c.plan("Ph")), fr["Bus"], Projector(CRS), None)
    pats.mask(patterns, other, every)
    assert len([x for x in calls if type(x[0]).__name__ == "Not"]) == 2


class TestIdsDistinct:
    """_fits refuses rows where two events share an id; with a source on every row the
    ids are told apart by (source, time), otherwise by their text."""

    @staticmethod
    def cols(ids, sources, ts):
        from spatec.vector.vexpr import Columns, source_codes

        t = np.array(ts, dtype=np.int64)
        return Columns(ids=np.array(ids, dtype=object), src_code=source_codes(sources), t=t, lo=t, hi=t,
                       r=np.zeros(len(t)), locate=None, attr_values=None, materialise=None)

    def test_by_source_and_time_or_by_text(self):
        from spatec.vector.fastpath import _ids_distinct

        assert _ids_distinct(self.cols(["B:a:1", "B:a:2", "B:b:1"], ["a", "a", "b"], [1, 2, 1]))
        assert not _ids_distinct(self.cols(["B:a:1", "B:a:1"], ["a", "a"], [1, 1]))
        # an event without a source: its id's text decides
        assert _ids_distinct(self.cols(["C:#1", "C:#2"], [None, None], [1, 1]))
        assert not _ids_distinct(self.cols(["C:#1", "C:#1", "B:a:1"], [None, None, "a"], [1, 2, 1]))
        assert _ids_distinct(self.cols([], [], []))
        huge = [0, 2 ** 62]         # (source, time) too wide for one integer: the text again
        assert _ids_distinct(self.cols(["B:a:0", "B:a:x"], ["a", "a"], huge))

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["a", "b", "c", None]), st.integers(0, 6)),
                    max_size=14))
    def test_grouped_rows_need_no_hashing_where_sources_name_groups(self, rows):
        """Rows sorted by group with local times rising in each (what _fits has checked by
        then): where no source is shared by two groups, ids are distinct without hashing;
        whenever _group_ids_distinct says so, _ids_distinct agrees."""
        from spatec.vector.fastpath import _group_ids_distinct, _ids_distinct

        rows = sorted({(g, t): (g, s, t) for g, s, t in rows}.values(), key=lambda r: (r[0], r[2]))
        g = np.array([r[0] for r in rows], dtype=np.int64)
        ids = [f"B:{s}:{t}" if s is not None else f"C:#{i}" for i, (_, s, t) in enumerate(rows)]
        cols = self.cols(ids, [r[1] for r in rows], [r[2] for r in rows])
        cols.group = g
        same = g[1:] == g[:-1]
        if _group_ids_distinct(cols, same):
            assert _ids_distinct(cols)
            sources = [r[1] for r in rows]
            assert None not in sources
            owner = {}
            assert all(owner.setdefault(s, gg) == gg for gg, s in zip(g.tolist(), sources))
        # one source in two groups at the same time: two events, one id
        two = self.cols(["B:a:1", "B:a:1"], ["a", "a"], [1, 1])
        two.group = np.array([0, 1])
        assert not _group_ids_distinct(two, two.group[1:] == two.group[:-1]) and not _ids_distinct(two)
