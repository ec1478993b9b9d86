"""Estimates the planner orders joins by (SPEC §10): rates of the input types, their numbers
of sources and the area they cover, from a sample of the input when a runner has the input
(:func:`sample_statistics`), else the declared defaults (:data:`DEFAULTS`); and from them each
leaf's rate and each join's conditions' selectivities (:func:`estimate_join`).

The estimates only choose how a join finds its candidates (:mod:`spatec.plan.order`); every
choice gives the same composites.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from spatec.frontend import ast as A
from spatec.plan.nodes import Join, Leaf, Or, walk_nodes

#: rows of each type the sample reads (evenly spread over the input)
SAMPLE_ROWS = 20_000


@dataclass(frozen=True)
class TypeStats:
    """One input type: events per second, distinct sources, and the area its points cover (m²)."""

    name: str
    rate: float
    sources: int
    area: float


@dataclass(frozen=True)
class Statistics:
    """Where the estimates come from (``"sample"`` or ``"defaults"``) and the types' statistics."""

    origin: str
    types: tuple = ()            # TypeStats
    #: the declared defaults for what the sample does not tell (a type it has no rows of)
    default: TypeStats = TypeStats("*", 1.0, 100, 1.0e8)
    #: selectivity of a leaf's patterns and of a condition with no better estimate
    pattern_selectivity: float = 0.5
    condition_selectivity: float = 0.5
    rows: int = 0                # rows sampled
    seconds: float = 0.0         # the input's time span

    def of(self, type_name) -> TypeStats:
        for t in self.types:
            if t.name == type_name:
                return t
        if type_name is None and self.types:     # a leaf of any type: all of them
            return TypeStats("*", sum(t.rate for t in self.types), sum(t.sources for t in self.types),
                             max(t.area for t in self.types))
        return self.default

    def describe(self) -> str:
        if self.origin == "defaults":
            return ("declared defaults (no input given): "
                    f"{self.default.rate:g} events/s per type, {self.default.sources} sources, "
                    f"{self.default.area / 1e6:g} km²")
        return f"a sample of {self.rows} rows of the input ({self.seconds:.0f} s)"


#: estimates without input (``spatec explain`` without ``--events``, live runners)
DEFAULTS = Statistics("defaults")


def sample_statistics(frames: dict) -> Statistics:
    """Statistics from canonical event frames (type → DataFrame with ``_t`` (µs), ``_source``,
    ``_place``, ``_lon``, ``_lat``): rates over the input's time span (its middle 99.8%),
    sources and area from at most :data:`SAMPLE_ROWS` rows per type spread evenly over it."""
    out = []
    rows = 0
    t0 = t1 = None
    for name, df in sorted(frames.items()):
        if len(df) == 0:
            continue
        ts = df["_t"]
        # the bulk of the times (a few events stamped far off do not stretch the span)
        lo, hi = int(ts.quantile(0.001)), int(ts.quantile(0.999))
        t0 = lo if t0 is None else min(t0, lo)
        t1 = hi if t1 is None else max(t1, hi)
    span = max(1.0, ((t1 - t0) / 1e6) if t0 is not None else 1.0)
    for name, df in sorted(frames.items()):
        n = len(df)
        if n == 0:
            continue
        step = max(1, n // SAMPLE_ROWS)
        s = df.iloc[::step]
        rows += len(s)
        sources = int(s["_source"].nunique()) if "_source" in s else 0
        out.append(TypeStats(name, n / span, max(1, sources), _area(s)))
    if not out:
        return DEFAULTS
    return Statistics("sample", tuple(out), rows=rows, seconds=span)


def _area(s) -> float:
    """m² of the box holding the middle 98% of the sample's points in longitude and in
    latitude (equirectangular; at least 1 km²)."""
    if "_place" not in s or "_lon" not in s:
        return DEFAULTS.default.area
    pts = s[s["_place"] == "point"]
    if len(pts) == 0:
        return DEFAULTS.default.area
    lon, lat = pts["_lon"].astype(float), pts["_lat"].astype(float)
    lat_m = 111_320.0
    lon_m = lat_m * math.cos(math.radians(float(lat.mean())))
    # the box of the middle 98% in each direction (outliers do not stretch it)
    w = (float(lon.quantile(0.99)) - float(lon.quantile(0.01))) * lon_m
    h = (float(lat.quantile(0.99)) - float(lat.quantile(0.01))) * lat_m
    return max(1.0e6, w * h)


def leaf_rate(stats: Statistics, leaf: Leaf) -> float:
    """Events per second reaching ``leaf``: its type's rate, times the pattern selectivity for
    each of its patterns and conditions."""
    r = stats.of(leaf.type).rate
    for _ in tuple(leaf.filters) + tuple(leaf.preds):
        r *= stats.pattern_selectivity
    return r


def node_rate(stats: Statistics, plan, node) -> float:
    """Partial matches per second ``node`` passes up (see :func:`node_rates`)."""
    return node_rates(stats, plan, node)[node.id]


def node_rates(stats: Statistics, plan, node=None) -> dict:
    """node id → partial matches per second it passes up, for ``node`` (default: the root)
    and the nodes below it (a join: pairs within the span bound times the selectivities of
    its patterns and conditions)."""
    node = plan.root if node is None else node
    rates = {}
    window = _window(plan)
    for n in walk_nodes(node):
        if isinstance(n, Leaf):
            rates[n.id] = leaf_rate(stats, n)
        elif isinstance(n, Join):
            r = rates[n.left.id] * rates[n.right.id] * window
            for c in tuple(n.filters) + tuple(n.preds):
                r *= selectivity(stats, plan, c)
            rates[n.id] = r
        elif isinstance(n, Or):
            rates[n.id] = rates[n.left.id] + rates[n.right.id]
        else:
            rates[n.id] = rates[n.left.id]
    return rates


def selectivity(stats: Statistics, plan, c) -> float:
    """The fraction of pairs meeting at a join that condition ``c`` keeps (estimated)."""
    if isinstance(c, A.Call) and c.func == "successive":
        # each later event is the next of the one before's source: one of the type's events
        # in the window
        t = stats.of(_type(plan, c.args[0]))
        return (1.0 / max(1.0, t.rate * _window(plan))) ** max(1, len(c.args) - 1)
    if isinstance(c, A.BinOp) and c.op in ("<", "<=") and isinstance(c.left, A.Call) \
            and c.left.func == "distance" and isinstance(c.right, A.Quantity) and c.right.unit in A.DIST_UNITS:
        t = stats.of(_type(plan, c.left.args[0]))
        return min(1.0, math.pi * c.right.metres() ** 2 / t.area)
    if isinstance(c, A.BinOp) and c.op == "==":
        return min(stats.condition_selectivity, 1.0 / stats.default.sources)
    return stats.condition_selectivity


def estimate_join(stats: Statistics, plan, node: Join, access) -> tuple:
    """((left rate, right rate), fraction of the other side's buffer tried) under ``access``."""
    rates = (node_rate(stats, plan, node.left), node_rate(stats, plan, node.right))
    if access.kind == "source":
        t = stats.of(plan.vars.get(access.vars[0]))
        return rates, 1.0 / t.sources
    if access.kind == "near":
        t = stats.of(plan.vars.get(access.vars[0]))
        return rates, min(1.0, 9 * access.cell ** 2 / t.area)
    return rates, 1.0


def _window(plan) -> float:
    """Seconds over which partial matches meet at a join: ``within``, else the span bound,
    else a minute."""
    return (plan.within or plan.span_bound or 60_000_000) / 1e6


def _type(plan, e):
    return plan.vars.get(e.name) if isinstance(e, A.Var) else None
