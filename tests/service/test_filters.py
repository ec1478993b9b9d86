"""Subscription filters, areas, requests and the covering index (no servers: fast)."""
from __future__ import annotations

import asyncio
import math
import random
import time

import numpy as np
import pytest
import shapely

from spatec.automata.exprs import compile_expr
from spatec.frontend.check import check_file
from spatec.frontend.parse import parse_expr
from spatec.service import batch
from spatec.service.areas import MAX_VERTICES, AreaError, Areas
from spatec.service.filters import FilterError, compile_filter, field_types, values
from spatec.service.hub import Hub
from spatec.service.index import CoveringIndex, Group, covers, members, naive_match
from spatec.service.quality import absence_window
from spatec.service.subscriptions import (
    Checker,
    PushPolicy,
    RenewalIn,
    RequestError,
    Subscription,
    SubscriptionIn,
    parse_body,
)
from spatec.spatial.crs import Projector
from tests.live.conftest import CRS, EXAMPLES


@pytest.fixture(scope="module")
def bunching():
    return check_file(EXAMPLES / "bunching" / "bunching.spatec")


@pytest.fixture(scope="module")
def areas(bunching):
    return Areas(bunching, Projector(CRS))


def env(prog, alert, phrase="Bunching"):
    return values(alert, field_types(prog, phrase))


@pytest.mark.parametrize("text, col, words", [
    ('line == "1" and metre < 50', 17, ["unknown field metre", "metres"]),
    ("metres < 50 m", 1, ["unit mismatch", "`150 m`"]),
    ("line == 1", 1, ["unit mismatch", "string"]),
    ("first_t > 5 min", 1, ["unit mismatch", "time"]),
    ("metres < 10 and metres > 20", 17, ["never match"]),
    ('line == "1" and line == "2"', 17, ["never match"]),
    ("1 > 2", 1, ["never match"]),
    ("A.line == \"1\"", 1, ["output fields, not variables"]),
    ("distance(A, B) < 5 m", 1, ["functions are not available"]),
    ("metres", 1, ["a condition"]),
    ("line == ", 9, ["unexpected end"]),
    ('line == "1"\nor metres < 5', 12, ["one line"]),
])
def test_bad_filters_say_what_and_where(bunching, text, col, words):
    with pytest.raises(FilterError) as e:
        compile_filter(bunching, "Bunching", text)
    assert e.value.column == col, e.value
    for w in words:
        assert w in str(e.value)


def test_filters_evaluate_in_the_alerts_units(bunching):
    f = compile_filter(bunching, "Bunching", 'line == "1" and metres < 50 and first_t >= 2019-10-01T09:00')
    base = {"phrase": "Bunching", "line": "1", "metres": 20.0, "first_t": "2019-10-01T08:00:00Z"}
    assert f.test(env(bunching, base))                                  # 09:00 London is 08:00 UTC
    assert not f.test(env(bunching, {**base, "first_t": "2019-10-01T07:59:59Z"}))
    assert not f.test(env(bunching, {**base, "metres": 50.0})) and not f.test(env(bunching, {**base, "line": "2"}))
    assert not f.test(env(bunching, {**base, "metres": None}))          # a null field matches no comparison
    assert not f.test(env(bunching, {**base, "metres": "20"}))          # nor a value of the wrong kind
    g = compile_filter(bunching, "Bunching", "hi - lo > 30 s or not (metres >= 1)")
    assert g.test(env(bunching, {"lo": "2019-10-01T08:00:00Z", "hi": "2019-10-01T08:01:00Z", "metres": 5}))
    assert g.test(env(bunching, {"lo": "2019-10-01T08:00:00Z", "hi": "2019-10-01T08:00:10Z", "metres": 0.5}))
    assert not g.test(env(bunching, {"lo": "2019-10-01T08:00:00Z", "hi": "2019-10-01T08:00:10Z", "metres": 5}))


def test_a_division_by_zero_is_missing_not_an_error(bunching):
    """The issue's poison filter: the language's own rule (REFERENCE decision 19) makes the
    quotient missing, so it matches nothing and raises nothing."""
    f = compile_filter(bunching, "Bunching", "metres / (metres - metres) > 1")
    for m in (0.0, 20.0, 99.0):
        assert f.test(env(bunching, {"phrase": "Bunching", "metres": m})) is False
    h = compile_filter(bunching, "Bunching", "metres / (metres - 20) > 1 or line == \"4\"")
    assert h.test(env(bunching, {"metres": 20.0, "line": "4"}))         # `or` still decides


def test_long_filters_check_and_evaluate_at_any_depth(bunching):
    """A 480-term and a 10,000-term filter check (no RecursionError, no quadratic analysis)
    and give the same answers as the short filter they spell out."""
    for n in (480, 10_000):
        ors = " or ".join(f'line == "{i}"' for i in range(n))
        ands = " and ".join(f"metres < {n + 100 - i}" for i in range(n))
        f = compile_filter(bunching, "Bunching", f"({ors}) and ({ands})")
        assert len(f.atoms) == n                                           # the conjunction's comparisons
        assert f.test(env(bunching, {"line": str(n - 1), "metres": 50.0}))
        assert not f.test(env(bunching, {"line": str(n), "metres": 50.0}))
        assert not f.test(env(bunching, {"line": "3", "metres": 101.5}))
    deep = "not " * 2001 + 'line == "7"'                                   # 2001 levels of `not`
    f = compile_filter(bunching, "Bunching", deep)
    assert f.test(env(bunching, {"line": "8"})) and not f.test(env(bunching, {"line": "7"}))
    with pytest.raises(FilterError, match="never match"):
        compile_filter(bunching, "Bunching", " and ".join(["metres > 10"] * 5000 + ["metres < 5"]))


def test_the_evaluator_at_any_depth_equals_python():
    """compile_expr (the automata's, used by every runner and the filters) is not limited by
    Python's recursion limit, and deep trees get the values shallow ones would."""
    rng = random.Random(3)
    for depth in (10, 60, 3000):
        text, value = "x", 1.5
        for _ in range(depth):
            op, k = rng.choice("+-*"), rng.randrange(1, 4)
            text = f"({text} {op} {k})"
            value = {"+": value + k, "-": value - k, "*": value * k}[op]
            if abs(value) > 1e12:
                text, value = f"({text} / 1000)", value / 1000
        f = compile_expr(parse_expr(text + " > 0", "<t>"), "UTC")
        assert f({"x": 1.5}, None) is (value > 0)
        g = compile_expr(parse_expr(text, "<t>"), "UTC")
        assert g({"x": 1.5}, None) == pytest.approx(value, rel=1e-12)
        assert g({"x": None}, None) is None                                # missing propagates at any depth


def test_areas(areas):
    h = areas.hull("POLYGON ((0.124 52.205, 0.1241 52.205, 0.1241 52.2051, 0.124 52.205))")
    assert areas.area("centre").test(h) and areas.area("centre", certainly=True).test(h)
    assert not areas.area("hospital").test(h)
    assert areas.area({"circle": [0.1245, 52.2052, 100]}).test(h)
    assert not areas.area({"circle": [0.13, 52.21, 100]}).test(h)
    edge = areas.hull("POLYGON ((0.1255 52.205, 0.1275 52.205, 0.1275 52.206, 0.1255 52.205))")
    assert areas.area("centre").test(edge) and not areas.area("centre", certainly=True).test(edge)
    assert areas.place_names(h) == ["centre"]


@pytest.mark.parametrize("bad, words", [
    ("nowhere", "no place of that name"),
    ({"circle": [0.1, 52]}, "three numbers"),
    ({"circle": [True, 52.2, 10]}, "three numbers"),                    # true is no number
    ({"circle": [0.1, 52.2, "10"]}, "three numbers"),
    ({"circle": [500, 52, 10]}, "not a WGS84"),
    ({"circle": [0.1, 52.2, 1e9]}, "radius"),
    ({"circle": [0.1, 52.2, 10], "x": 1}, "a place name"),
    ({"type": "Polygon"}, "non-empty list"),
    ({"type": "Point", "coordinates": [0.1, 52.2]}, "Polygon or MultiPolygon"),
    ({"type": "Polygon", "coordinates": [[[0.1, 52.2], [0.2, 52.3], [0.2, 52.2], [0.1, 52.3], [0.1, 52.2]]]},
     "Self-intersection"),                                               # the self-crossing polygon
    ({"type": "Polygon", "coordinates": [[[0.1, 52.2], [0.2, 52.2], [0.2, 52.3], [0.1, 52.3]]]}, "end where"),
    ({"type": "Polygon", "coordinates": [[[0.1, 52.2], [0.2, True], [0.2, 52.3], [0.1, 52.2]]]}, "two numbers"),
    ({"type": "Polygon", "coordinates": [[[0.1, 52.2]] * (MAX_VERTICES + 1)]}, "vertices"),
    ({"type": "Polygon", "coordinates": [[[0.1, 52.2], [0.2, 52.2], [0.2, 52.3], [0.1, 52.2]]], "crs": "x"}, "not crs"),
    (5, "a place name"),
])
def test_bad_areas_are_refused_with_the_reason(areas, bad, words):
    with pytest.raises(AreaError, match=words):
        areas.area(bad)


def test_requests_are_typed_strictly():
    for raw, field in [({"certainly": "no"}, "certainly"), ({"certainly": 1}, "certainly"),
                       ({"lease": True}, "lease"), ({"phrase": 5}, "phrase"), ({"bogus": 1}, "bogus"),
                       ({"where": "x" * 270_000}, "where")]:
        with pytest.raises(RequestError) as e:
            parse_body(SubscriptionIn, raw)
        assert e.value.field == field, (raw, e.value.body())
    assert parse_body(SubscriptionIn, {"certainly": True, "lease": 30}).certainly is True
    with pytest.raises(RequestError):
        parse_body(RenewalIn, {"where": "x"})          # a renewal does not change the filter


def test_push_targets_only_where_the_operator_allows(bunching, areas):
    c = Checker(bunching, areas, PushPolicy(frozenset({"hooks.example.org", "127.0.0.1:8099"})))
    ok = [{"webhook": "https://hooks.example.org/bus"}, {"webhook": "http://127.0.0.1:8099/x"},
          {"nats": "spatec.deliver.ops"}, {"nats": "spatec.deliver.team-1.alerts"},
          {"mqtt": {"url": "mqtt://hooks.example.org:1883", "topic": "bus/alerts"}}, {"sse": True}]
    for d in ok:
        assert c.delivery(d) == d
    bad = [({"webhook": "http://0x7f000001:8099/"}, 403), ({"webhook": "http://127.0.0.1:8100/"}, 403),
           ({"webhook": "http://evil.example.org/"}, 403), ({"webhook": "http://127.0.0.1:8099/\r\nX-Y: z"}, 400),
           ({"webhook": "http://u:p@hooks.example.org/"}, 400), ({"webhook": "ftp://hooks.example.org/"}, 400),
           ({"nats": "$KV.spatec_subs.abc"}, 403), ({"nats": "spatec.input.x"}, 403),
           ({"nats": "spatec.deliver.>"}, 403), ({"nats": "spatec.deliver.*"}, 403), ({"nats": "spatec.deliver."}, 403),
           ({"mqtt": {"url": "mqtt://elsewhere:1883", "topic": "a"}}, 403),
           ({"mqtt": {"url": "mqtt://hooks.example.org:1883", "topic": "a/#"}}, 400),
           ({"sse": False}, 400), ({"webhook": "x", "nats": "y"}, 400)]
    for d, status in bad:
        with pytest.raises(RequestError) as e:
            c.delivery(d)
        assert e.value.status == status, (d, e.value.body())
    # the page may not make the service push anywhere
    req = parse_body(SubscriptionIn, {"phrase": "Bunching", "deliver": {"nats": "spatec.deliver.ops"}})
    with pytest.raises(RequestError) as e:
        c.new(req, 1, "page", page=True)
    assert e.value.status == 403


def test_covering(bunching, areas):
    def g(where=None, area=None):
        return Group((where, str(area)), "Bunching", compile_filter(bunching, "Bunching", where) if where else None,
                     areas.area(area) if area is not None else None)

    assert covers(g('line == "1"'), g('line == "1" and metres < 50'))
    assert covers(g("metres < 80"), g("metres < 50")) and not covers(g("metres < 50"), g("metres < 80"))
    assert not covers(g('line == "1" or metres < 5'), g('line == "1"'))          # not a conjunction
    assert covers(g(area={"circle": [0.124, 52.205, 2000]}), g(area="centre"))
    assert not covers(g(area="centre"), g(area={"circle": [0.124, 52.205, 2000]}))
    assert covers(g(), g('line == "2"', "hospital"))


def _random_sub(rng):
    k = rng.randrange(8)
    w = a = None
    if k == 0:
        w = f'line == "{rng.randrange(12)}"'
    elif k == 1:
        w = f'line == "{rng.randrange(12)}" and metres < {rng.randrange(100)}'
    elif k == 2:
        w = f"metres {rng.choice(['<', '<=', '>', '>='])} {rng.randrange(100)}"
    elif k == 3:
        a = {"circle": [0.1 + rng.random() * 0.05, 52.18 + rng.random() * 0.04, rng.randrange(50, 1500)]}
    elif k == 4:
        w = f'metres < {rng.randrange(100)} or line == "3"'
    elif k == 5:
        w, a = f"metres <= {rng.randrange(100)}", rng.choice(["centre", "station", "hospital"])
    elif k == 6:
        lon, lat, d = 0.1 + rng.random() * 0.05, 52.18 + rng.random() * 0.04, rng.random() * 0.02
        a = {"type": "Polygon", "coordinates": [[[lon, lat], [lon + d, lat], [lon + d, lat + d], [lon, lat + d],
                                                 [lon, lat]]]}
    return w, a


def _random_alert(rng):
    lon, lat = 0.1 + rng.random() * 0.05, 52.18 + rng.random() * 0.04
    d = rng.random() * 0.004
    return {"phrase": "Bunching", "line": str(rng.randrange(12)), "metres": float(rng.randrange(100)),
            "hull": f"POLYGON (({lon} {lat}, {lon + d} {lat}, {lon + d} {lat + d}, {lon} {lat}))"}


def test_index_agrees_with_evaluating_every_subscription(bunching, areas):
    rng = random.Random(7)
    idx, subs = CoveringIndex(), {}
    for i in range(1500):
        w, a = _random_sub(rng)
        flt = compile_filter(bunching, "Bunching", w) if w else None
        area = areas.area(a, certainly=rng.random() < 0.3) if a is not None else None
        idx.add(str(i), "Bunching", flt, area)
        subs[str(i)] = ("Bunching", flt, area)
    for i in range(0, 1500, 5):              # some leave: covered groups are indexed on their own again
        idx.remove(str(i))
        del subs[str(i)]
    for i in range(1500, 1700):              # and more come after
        w, a = _random_sub(rng)
        flt = compile_filter(bunching, "Bunching", w) if w else None
        area = areas.area(a) if a is not None else None
        idx.add(str(i), "Bunching", flt, area)
        subs[str(i)] = ("Bunching", flt, area)
    types = field_types(bunching, "Bunching")
    for _ in range(300):
        alert = _random_alert(rng)
        hull = lambda: areas.hull(alert["hull"])  # noqa: E731
        e = values(alert, types)
        got, failed = idx.match(alert, e, hull)
        assert not failed and members(got) == naive_match(subs, alert, e, hull)
    assert len(idx.groups) < len(subs)        # merged
    assert any(g.parent is not None for g in idx.groups.values())          # covered


def _table_sub(rng):
    """A subscription of the kinds the area table matches (and some it does not)."""
    lon, lat = 0.1 + rng.random() * 0.05, 52.18 + rng.random() * 0.04
    d = 0.002 + rng.random() * 0.02
    box = {"type": "Polygon", "coordinates": [[[lon, lat], [lon + d, lat], [lon + d, lat + d], [lon, lat + d],
                                               [lon, lat]]]}
    ell = {"type": "Polygon", "coordinates": [[[lon, lat], [lon + d, lat], [lon + d, lat + d / 3],
                                               [lon + d / 3, lat + d / 3], [lon + d / 3, lat + d], [lon, lat + d],
                                               [lon, lat]]]}                          # not convex
    circle = {"circle": [lon, lat, rng.randrange(20, 1500)]}
    line = f'line == "{rng.randrange(12)}"'
    return rng.choice([
        (None, circle), (None, box), (None, ell), (line, circle), (line, box),
        (f"{line} and metres < {rng.randrange(100)}", circle),             # the filter tested after the place
        (None, rng.choice(["centre", "station", "hospital"])), (line, "centre"),
        (f"metres < {rng.randrange(100)}", circle), (line, None), (None, None)])


def _table_alert(rng):
    lon, lat = 0.1 + rng.random() * 0.05, 52.18 + rng.random() * 0.04
    d = rng.random() * 0.004
    k = rng.random()
    hull = (f"POINT ({lon} {lat})" if k < 0.15 else None if k < 0.2 else
            f"POLYGON (({lon} {lat}, {lon + d} {lat}, {lon + d} {lat + d}, {lon} {lat}))")
    return {"phrase": "Bunching", "line": str(rng.randrange(12)), "metres": float(rng.randrange(100)), "hull": hull}


def test_matching_a_batch_agrees_with_evaluating_every_subscription(bunching, monkeypatch):
    """The area table (a tree of boxes remade as rows come, rows removed and compacted, the
    exact tests over a batch's pairs at once, a CRS decided later) gives every alert of a
    batch what testing each subscription alone gives: circles, boxes, a non-convex polygon,
    places, possibly and certainly, with and without an equality first; point hulls, no hull."""

    monkeypatch.setattr(batch, "FRESH", 40)            # the tree made again often
    areas = Areas(bunching, Projector(CRS))
    rng = random.Random(5)
    idx, subs = CoveringIndex(), {}

    def add(i):
        w, a = _table_sub(rng)
        flt = compile_filter(bunching, "Bunching", w) if w else None
        area = areas.area(a, certainly=rng.random() < 0.4) if a is not None else None
        idx.add(str(i), "Bunching", flt, area)
        subs[str(i)] = ("Bunching", flt, area)

    types = field_types(bunching, "Bunching")

    def check():
        alerts = [_table_alert(rng) for _ in range(150)]
        envs = [values(a, types) for a in alerts]
        items = [(a, e, (lambda a=a: areas.hull(a["hull"])), False) for a, e in zip(alerts, envs)]
        got = idx.match_many(items)
        n = 0
        for a, e, (matched, failed) in zip(alerts, envs, got):
            want = naive_match(subs, a, e, lambda a=a: areas.hull(a["hull"]))
            assert not failed and members(matched) == want
            assert len(matched) == len(set(matched))            # a group once
            n += len(want)
        assert n > 0
        # the groups' numbers, as the matcher process takes them: the same groups, in the same order
        ids = idx.match_many(items, ids=True)
        assert [m for m, _ in ids] == [[g.gid for g in m] for m, _ in got]

    for i in range(600):
        add(i)
    check()
    for i in range(0, 600, 3):               # a third leave: the rows are compacted
        idx.remove(str(i))
        del subs[str(i)]
    for i in range(600, 700):
        add(i)
    check()
    assert any(t.tree is not None for t in idx.tables.values())
    areas.set_crs("EPSG:32630")              # another CRS: the rows' metric parts made again
    check()


def test_a_polygons_inner_box_decides_exactly_what_geos_decides(bunching):
    """A hull whose first vertex (possibly) or whose box (certainly) lies in the rectangle
    found inside a polygon is decided without GEOS (:func:`~spatec.service.batch.inner_boxes`);
    hulls on a grid across a rotated box, a non-convex polygon and a thin one, just inside and
    just outside the rectangles' edges too, get what testing each area alone gives."""
    areas = Areas(bunching, Projector(CRS))
    lon, lat, d = 0.12, 52.2, 0.01
    rotated = [[lon + d / 2, lat], [lon + d, lat + d / 2], [lon + d / 2, lat + d], [lon, lat + d / 2], [lon, lat]]
    rotated[-1] = rotated[0]
    ell = [[lon, lat], [lon + d, lat], [lon + d, lat + d / 3], [lon + d / 3, lat + d / 3], [lon + d / 3, lat + d],
           [lon, lat + d], [lon, lat]]
    thin = [[lon, lat], [lon + d, lat], [lon + d, lat + d / 200], [lon, lat + d / 200], [lon, lat]]
    idx, subs = CoveringIndex(), {}
    for i, ring in enumerate([rotated, ell, thin]):
        for cert in (False, True):
            area = areas.area({"type": "Polygon", "coordinates": [ring]}, certainly=cert)
            idx.add(f"{i}{cert}", "Bunching", None, area)
            subs[f"{i}{cert}"] = ("Bunching", None, area)
    (table,) = idx.tables.values()
    table.prepare()
    boxes = table.ibox[:table.n]
    # a rectangle inside each: the rotated box's about its centre; the L's and the thin strip's
    # (a few metres wide, turned by the grid's convergence) about a point GEOS finds inside
    assert np.isfinite(boxes).all()
    assert (boxes[:, 2] - boxes[:, 0] < table.mbox[:table.n, 2] - table.mbox[:table.n, 0]).all()
    proj = Projector(CRS)
    b = boxes[0]                                              # the rotated box's rectangle, in lon/lat
    edge_lon, edge_lat = proj.inverse(np.array([b[0], b[2]]), np.array([b[1], b[3]]))
    lons = np.r_[np.linspace(lon - d / 10, lon + d * 1.1, 23), edge_lon, np.nextafter(edge_lon, 0)]
    lats = np.r_[np.linspace(lat - d / 10, lat + d * 1.1, 23), edge_lat, np.nextafter(edge_lat, 0)]
    alerts = []
    for x in lons.tolist():
        for y in lats.tolist():
            for size in (0.0, 1e-5, d / 20):
                hull = f"POINT ({x} {y})" if not size else \
                    f"POLYGON (({x} {y}, {x + size} {y}, {x + size} {y + size}, {x} {y}))"
                alerts.append({"phrase": "Bunching", "hull": hull})
    types = field_types(bunching, "Bunching")
    envs = [values(a, types) for a in alerts]
    got = idx.match_many([(a, e, (lambda a=a: areas.hull(a["hull"])), False) for a, e in zip(alerts, envs)])
    matched = 0
    for a, e, (m, failed) in zip(alerts, envs, got):
        assert not failed and members(m) == naive_match(subs, a, e, lambda a=a: areas.hull(a["hull"])), a["hull"]
        matched += len(m)
    assert matched > len(alerts)                              # (many hulls in them, not a test of nothing)
    assert np.isfinite(table.iqbox[:table.n][table.cert[:table.n]]).all()   # the containments' rectangles made


def test_a_filter_failing_in_a_batch_is_never_matched_later_in_it(bunching):
    """A table's group whose filter (more than its one comparison) raises on an alert of a
    batch is failed there, once, and gets none of the batch's later alerts even where its
    filter would now pass; the group beside it, the same area without a filter, gets all."""
    areas = Areas(bunching, Projector(CRS))
    idx = CoveringIndex()
    circle = areas.area({"circle": [0.125, 52.2, 3000]})
    flt = compile_filter(bunching, "Bunching", 'line == "1" and metres < 90')
    calls = []

    def flaky(env):
        calls.append(env["metres"])
        if len(calls) == 1:
            raise OverflowError("int too large to convert to float")
        return True
    flt.test = flaky
    idx.add("flaky", "Bunching", flt, circle)
    idx.add("plain", "Bunching", None, circle)
    types = field_types(bunching, "Bunching")
    alerts = [{"phrase": "Bunching", "line": "1", "metres": float(m), "hull": "POINT (0.125 52.2)"}
              for m in (10, 20, 30)]
    got = idx.match_many([(a, values(a, types), (lambda a=a: areas.hull(a["hull"])), False) for a in alerts])
    assert [sorted(members(m)) for m, _ in got] == [["plain"]] * 3
    assert [[sorted(g.members) for g in f] for _, f in got] == [[["flaky"]], [], []]
    assert "OverflowError" in got[0][1][0].error and calls == [10.0]


def test_an_area_tables_rows_are_the_areas_own_stamps_in_each_crs(bunching):
    """The rows a table projects for all its circles and polygons at once are, to the bit, the
    stamps each area makes alone (:meth:`Areas.stamp`), in the first CRS and after another is
    decided; a named place is its own stamp too."""
    areas = Areas(bunching, Projector(CRS))
    rng = random.Random(11)
    idx = CoveringIndex()
    for i in range(400):
        _, a = _table_sub(rng)
        if a is not None:
            idx.add(str(i), "Bunching", None, areas.area(a, certainly=rng.random() < 0.3))
    for crs in (CRS, "EPSG:32630", "EPSG:27700"):
        areas.set_crs(crs)
        idx.prepare()
        (table,) = idx.tables.values()
        kinds = set()
        for i, g in enumerate(table.rows[:table.n]):
            assert table.ready[i] and i not in table.bad
            alone = Areas(bunching, Projector(crs)).stamp(g.area)
            kinds.add(int(table.kind[i]))
            if alone.xy is not None:
                assert (table.x[i], table.y[i], table.r[i]) == (*alone.xy, alone.r)
                assert shapely.equals_exact(table.geom[i], alone.geom, 0.0)
            else:
                assert table.r[i] == alone.r and shapely.equals_exact(table.geom[i], alone.geom, 0.0)
        assert kinds == {batch.DISC, batch.POLY}


class _NoMetres(Projector):
    """A projection under which nothing has finite metres."""
    __slots__ = ()

    def forward(self, lon, lat):
        x, y = super().forward(lon, lat)
        return x * math.inf, y * math.inf


class Unprojectable(Areas):
    """Areas whose stamps cannot be made: no place projects to finite metres."""

    def set_crs(self, crs):
        super().set_crs(crs)
        self.proj = _NoMetres(crs)


def test_a_failing_area_in_a_batch_is_its_own(bunching, monkeypatch):
    """In a batch matched together (the tree path), a row whose area cannot be made fails at
    the first alert that meets its box, with the reason, once; the rows around it and the
    other alerts of the batch are matched as evaluating each subscription gives."""

    monkeypatch.setattr(batch, "FRESH", 8)

    areas = Areas(bunching, Projector(CRS))
    broken = Unprojectable(bunching, Projector(CRS))
    rng = random.Random(3)
    idx, subs = CoveringIndex(), {}
    for i in range(200):
        lon, lat = 0.1 + rng.random() * 0.05, 52.18 + rng.random() * 0.04
        a = areas.area({"circle": [lon, lat, rng.randrange(100, 2000)]}, certainly=rng.random() < 0.3)
        idx.add(str(i), "Bunching", None, a)
        subs[str(i)] = ("Bunching", None, a)
    bad = broken.area({"circle": [0.125, 52.2, 5000]})          # meets every alert below
    idx.add("bad", "Bunching", None, bad)
    types = field_types(bunching, "Bunching")
    alerts = [_table_alert(rng) for _ in range(60)]
    alerts = [dict(a, hull=a["hull"] or "POINT (0.12 52.2)") for a in alerts]
    envs = [values(a, types) for a in alerts]
    got = idx.match_many([(a, e, (lambda a=a: areas.hull(a["hull"])), False) for a, e in zip(alerts, envs)])
    failed = [g for _, f in got for g in f]
    assert len(failed) == 1 and "bad" in failed[0].members
    assert failed[0].error == f"its circle's centre (0.125, 52.2) does not project to {CRS}"
    assert got[0][1] == failed                                   # at the first alert
    for a, e, (matched, _) in zip(alerts, envs, got):
        assert members(matched) == naive_match(subs, a, e, lambda a=a: areas.hull(a["hull"]))
    again = idx.match_many([(alerts[0], envs[0], (lambda: areas.hull(alerts[0]["hull"])), False)])
    assert again[0][1] == []                                     # never tested again


def test_a_batch_goes_to_each_group_in_log_order(bunching, areas):
    """The hub appends a batch's entries group by group: each subscription still reads its
    alerts in log order, once, and an entry already handled or no alert is skipped."""

    async def run():
        hub = Hub(areas, bunching)
        hub.put(_Sub("a"), None, None)
        hub.put(_Sub("b"), compile_filter(bunching, "Bunching", 'line == "1"'), None)
        ga, gb = hub.subs["a"].current().gid, hub.subs["b"].current().gid
        rows = [(1, "c1", "{}", b"1", None), (2, None, "x", b"", None), (3, "c3", "{}", b"3", None),
                (4, "c4", "{}", b"4", None)]
        await hub.deliver_batch(rows, [(gb, [2, 3]), (ga, [0, 2, 3])])
        await hub.deliver_batch([(4, "c4", "{}", b"4", None), (5, "c5", "{}", b"5", None)], [(ga, [0, 1])])
        assert [e.id for e in hub.subs["a"].entries] == ["c1", "c3", "c4", "c5"]
        assert [e.id for e in hub.subs["b"].entries] == ["c3", "c4"]
        assert hub.processed == 5 and hub.skipped == 1
    asyncio.run(run())


class _Sub:
    def __init__(self, sid, phrase="Bunching"):
        self.id, self.phrase, self.start_seq = sid, phrase, 1


def test_one_failing_subscription_is_suspended_and_the_others_go_on(bunching, areas):
    """A filter or area whose test raises (here made to) is that subscription's alone: it is
    suspended with the reason, never tested again, and every other subscription is served."""

    async def run():
        hub = Hub(areas, bunching)
        told = []
        hub.on_suspend = lambda sid, why: told.append((sid, why))
        good = compile_filter(bunching, "Bunching", "metres < 60")
        poison = compile_filter(bunching, "Bunching", "metres < 70")

        def boom(env):
            raise OverflowError("int too large to convert to float")
        poison.test = boom
        zone = {"type": "Polygon", "coordinates": [[[0.1, 52.1], [0.2, 52.1], [0.2, 52.3], [0.1, 52.3], [0.1, 52.1]]]}
        bad_certain = areas.area(zone, certainly=True)      # its containment polygon cannot be made
        bad_certain.inside = lambda: (_ for _ in ()).throw(ValueError("region geometry is not valid"))

        broken = Unprojectable(bunching, Projector(CRS))
        bad_disc = broken.area({"circle": [0.12, 52.2, 3000]})  # tested with the other circles
        bad_area = broken.area(zone)                        # tested with the other polygons
        hub.put(_Sub("good"), good, None)
        hub.put(_Sub("poison"), poison, None)
        hub.put(_Sub("twin"), poison, None)          # the same filter: one group, both suspended
        hub.put(_Sub("area"), None, bad_area)
        hub.put(_Sub("certain"), None, bad_certain)
        hub.put(_Sub("disc"), None, bad_disc)
        hub.put(_Sub("near"), None, areas.area({"circle": [0.1245, 52.2052, 500]}))
        hub.put(_Sub("zone"), None, areas.area({**zone, "coordinates": [[[0.11, 52.1], *zone["coordinates"][0][1:-1],
                                                                          [0.11, 52.1]]]}))
        hub.put(_Sub("all"), None, None)
        alert = {"phrase": "Bunching", "id": "c1", "line": "1", "metres": 20.0,
                 "hull": "POLYGON ((0.124 52.205, 0.1241 52.205, 0.1241 52.2051, 0.124 52.205))"}
        import json

        for seq in (1, 2, 3):
            hub.handle(seq, json.dumps({**alert, "id": f"c{seq}"}))
        assert [e.id for e in hub.subs["good"].entries] == ["c1", "c2", "c3"]
        assert [e.id for e in hub.subs["all"].entries] == ["c1", "c2", "c3"]
        assert [e.id for e in hub.subs["near"].entries] == ["c1", "c2", "c3"]     # circles tested together
        assert [e.id for e in hub.subs["zone"].entries] == ["c1", "c2", "c3"]     # polygons tested together
        for sid in ("poison", "twin", "area", "certain", "disc"):
            assert hub.subs[sid].suspended is not None and not hub.subs[sid].entries
        assert "OverflowError" in hub.subs["poison"].suspended and "c1" in hub.subs["poison"].suspended
        assert "not valid" in hub.subs["certain"].suspended
        assert "circle's centre (0.12, 52.2) does not project" in hub.subs["disc"].suspended
        assert "polygon does not project" in hub.subs["area"].suspended
        assert sorted(s for s, _ in told) == ["area", "certain", "disc", "poison", "twin"]
        assert hub.suspended() == 5 and hub.skipped == 0
        # a renewal of a suspended one with the same (bad) filter stays suspended; others unaffected
        hub.handle(4, "not json")
        assert hub.skipped == 1 and hub.processed == 4
    asyncio.run(run())


def test_registering_many_is_fast_enough_to_matter(bunching, areas):
    """Not a timing assertion: adding and removing 20,000 subscriptions does bounded work per
    subscription (no rebuild of the spatial index, no linear removal)."""
    rng = random.Random(11)
    idx = CoveringIndex()
    specs = []
    for i in range(20_000):
        w, a = _random_sub(rng)
        specs.append((str(i), compile_filter(bunching, "Bunching", w) if w else None,
                      areas.area(a) if a is not None else None))
    t0 = time.perf_counter()
    for sid, f, a in specs:
        idx.add(sid, "Bunching", f, a)
    added = time.perf_counter() - t0
    t0 = time.perf_counter()
    for sid, _, _ in specs:
        idx.remove(sid)
    removed = time.perf_counter() - t0
    assert not idx.groups and not idx.of_sub
    print(f"20,000 subscriptions: added in {added:.2f} s, removed in {removed:.2f} s")


def test_suspended_subscriptions_survive_as_records():
    s = Subscription("x", "Bunching", suspended="its area failed")
    assert Subscription.from_json(s.to_json()).suspended == "its area failed"


def test_absence_windows():
    from spatec.frontend.check import check_file as cf

    silent = cf(EXAMPLES / "silent" / "silent.spatec").phrase("Silent")
    assert absence_window(silent.phrase.match) == 5 * 60_000_000
    hosp = cf(EXAMPLES / "hospital_to_station" / "hospital_to_station.spatec").phrase("HospitalToStation")
    assert absence_window(hosp.phrase.match) == 0
    bunch = cf(EXAMPLES / "bunching" / "bunching.spatec").phrase("Bunching")
    assert absence_window(bunch.phrase.match) is None          # `not at station` is a pattern


def test_docstring_examples():
    import doctest

    from spatec.frontend import check_fields
    from spatec.service import filters
    from spatec.spatial import stamps

    for module in (check_fields, filters):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
    for fn in (stamps.relate_discs, stamps.overlap_many):
        finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner()
        for t in finder.find(fn, fn.__name__, globs={fn.__name__: fn, "Loc": stamps.Loc}):
            runner.run(t)
        assert runner.tries > 0 and runner.failures == 0, fn.__name__


def test_relate_discs_is_the_scalar_tests_bit_for_bit():
    import shapely

    from spatec.spatial import stamps as S

    rng = random.Random(5)
    for _ in range(400):
        k = rng.random()
        if k < 0.3:
            loc = S.Loc.disc(rng.uniform(-500, 500), rng.uniform(-500, 500), rng.uniform(0, 60))
        elif k < 0.9:
            pts = [(rng.uniform(-400, 400), rng.uniform(-400, 400)) for _ in range(rng.randrange(3, 12))]
            loc = S.Loc.of(shapely.convex_hull(shapely.multipoints(pts)), rng.choice([0.0, 15.0]))
        else:
            loc = S.UNIVERSE
        xs = [rng.uniform(-600, 600) for _ in range(12)]
        ys = [rng.uniform(-600, 600) for _ in range(12)]
        rs = [rng.choice([0.0, rng.uniform(1, 700)]) for _ in range(12)]
        p, c = S.relate_discs(loc, xs, ys, rs)
        for i in range(12):
            region = S.Loc.disc(xs[i], ys[i], rs[i])
            assert p[i] == S.possibly_in(loc, region) and c[i] == S.certainly_in(loc, region)


def test_overlap_many_is_possibly_in_bit_for_bit():
    """The hub's polygon areas of an alert tested at once: what each alone gives."""
    import shapely

    from spatec.spatial import stamps as S

    rng = random.Random(11)

    def stamp(k):
        if k < 0.3:
            return S.Loc.disc(rng.uniform(-500, 500), rng.uniform(-500, 500), rng.uniform(0, 60))
        pts = [(rng.uniform(-400, 400), rng.uniform(-400, 400)) for _ in range(rng.randrange(3, 12))]
        return S.Loc.of(shapely.convex_hull(shapely.multipoints(pts)), rng.choice([0.0, 15.0]))

    for _ in range(300):
        loc = stamp(rng.random()) if rng.random() < 0.9 else S.UNIVERSE
        regions = [stamp(rng.random()) for _ in range(10)]
        got = S.overlap_many(loc, regions)
        assert got.tolist() == [S.possibly_in(loc, r) for r in regions]
    with pytest.raises(ValueError):
        S.overlap_many(S.Loc.disc(0, 0, 1), [S.UNIVERSE])         # as possibly_in: no region


def test_the_program_document_is_made_once(tmp_path, monkeypatch):
    """``GET /program`` is made once, not on each request (the issue: 30 MB rebuilt per
    request let the source's lease lapse), and again only when the CRS is decided."""
    from spatec.frontend import schema
    from spatec.plan.program import compile_program
    from spatec.service.service import Service

    made = []
    real = schema.json_schema
    monkeypatch.setattr(schema, "json_schema", lambda *a: made.append(1) or real(*a))
    svc = Service(compile_program(EXAMPLES / "bunching" / "bunching.spatec"), [], tmp_path / "state")
    first = svc.program_doc()
    assert len(made) == 1 and all(svc.program_doc() is first for _ in range(20)) and len(made) == 1
    svc.set_crs(CRS)
    again = svc.program_doc()
    assert len(made) == 2 and again[1] != first[1] and b'"EPSG:32631"' in again[0]
