"""Subscription filters, areas and the covering index (no servers: fast)."""
from __future__ import annotations

import random

import pytest

from spatec.frontend.check import check_file
from spatec.service.areas import AreaError, Areas, service_crs
from spatec.service.filters import FilterError, compile_filter
from spatec.service.index import CoveringIndex, covers, naive_match
from spatec.service.quality import absence_window
from spatec.spatial.crs import Projector
from tests.live.conftest import EXAMPLES


@pytest.fixture(scope="module")
def bunching():
    return check_file(EXAMPLES / "bunching" / "bunching.spatec")


@pytest.fixture(scope="module")
def areas(bunching):
    return Areas(bunching, Projector(service_crs(bunching)))


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
    assert f.test(base)                                        # 09:00 London is 08:00 UTC
    assert not f.test({**base, "first_t": "2019-10-01T07:59:59Z"})
    assert not f.test({**base, "metres": 50.0}) and not f.test({**base, "line": "2"})
    assert not f.test({**base, "metres": None})                # a null field matches no comparison
    g = compile_filter(bunching, "Bunching", "hi - lo > 30 s or not (metres >= 1)")
    assert g.test({"lo": "2019-10-01T08:00:00Z", "hi": "2019-10-01T08:01:00Z", "metres": 5})
    assert g.test({"lo": "2019-10-01T08:00:00Z", "hi": "2019-10-01T08:00:10Z", "metres": 0.5})
    assert not g.test({"lo": "2019-10-01T08:00:00Z", "hi": "2019-10-01T08:00:10Z", "metres": 5})


def test_areas(areas):
    h = areas.hull("POLYGON ((0.124 52.205, 0.1241 52.205, 0.1241 52.2051, 0.124 52.205))")
    assert areas.area("centre").test(h) and areas.area("centre", certainly=True).test(h)
    assert not areas.area("hospital").test(h)
    assert areas.area({"circle": [0.1245, 52.2052, 100]}).test(h)
    assert not areas.area({"circle": [0.13, 52.21, 100]}).test(h)
    edge = areas.hull("POLYGON ((0.1255 52.205, 0.1275 52.205, 0.1275 52.206, 0.1255 52.205))")
    assert areas.area("centre").test(edge) and not areas.area("centre", certainly=True).test(edge)
    assert areas.place_names(h) == ["centre"]
    for bad in ("nowhere", {"circle": [0.1, 52]}, {"circle": [500, 52, 10]}, {"type": "Polygon"}, 5):
        with pytest.raises(AreaError):
            areas.area(bad)


def test_covering(bunching, areas):
    from spatec.service.index import Group

    def g(where=None, area=None):
        return Group((where, str(area)), "Bunching", compile_filter(bunching, "Bunching", where) if where else None,
                     areas.area(area) if area is not None else None)

    assert covers(g('line == "1"'), g('line == "1" and metres < 50'))
    assert covers(g("metres < 80"), g("metres < 50")) and not covers(g("metres < 50"), g("metres < 80"))
    assert not covers(g('line == "1" or metres < 5'), g('line == "1"'))          # not a conjunction
    assert covers(g(area={"circle": [0.124, 52.205, 2000]}), g(area="centre"))
    assert not covers(g(area="centre"), g(area={"circle": [0.124, 52.205, 2000]}))
    assert covers(g(), g('line == "2"', "hospital"))


def test_index_agrees_with_evaluating_every_subscription(bunching, areas):
    rng = random.Random(7)
    idx, subs = CoveringIndex(), {}
    for i in range(600):
        k = rng.randrange(7)
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
        flt = compile_filter(bunching, "Bunching", w) if w else None
        area = areas.area(a, certainly=rng.random() < 0.3) if a is not None else None
        idx.add(str(i), "Bunching", flt, area)
        subs[str(i)] = ("Bunching", flt, area)
    for i in range(0, 600, 5):               # some leave: covered groups are indexed on their own again
        idx.remove(str(i))
        del subs[str(i)]
    for _ in range(200):
        lon, lat = 0.1 + rng.random() * 0.05, 52.18 + rng.random() * 0.04
        d = rng.random() * 0.004
        alert = {"phrase": "Bunching", "line": str(rng.randrange(12)), "metres": float(rng.randrange(100)),
                 "hull": f"POLYGON (({lon} {lat}, {lon + d} {lat}, {lon + d} {lat + d}, {lon} {lat}))"}
        hull = lambda: areas.hull(alert["hull"])  # noqa: E731
        assert idx.match(alert, hull) == naive_match(subs, alert, hull)
    assert len(idx.groups) < len(subs)        # merged


def test_absence_windows():
    from spatec.frontend.check import check_file as cf

    silent = cf(EXAMPLES / "silent" / "silent.spatec").phrase("Silent")
    assert absence_window(silent.phrase.match) == 5 * 60_000_000
    hosp = cf(EXAMPLES / "hospital_to_station" / "hospital_to_station.spatec").phrase("HospitalToStation")
    assert absence_window(hosp.phrase.match) == 0
    bunch = cf(EXAMPLES / "bunching" / "bunching.spatec").phrase("Bunching")
    assert absence_window(bunch.phrase.match) is None          # `not at station` is a pattern
