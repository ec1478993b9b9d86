"""Syntax and operator trees of any depth pickle (with pickle and with Spark's cloudpickle)
without recursion on their depth, read back equal with their shared nodes shared
(:mod:`spatec.frontend.flatpickle`, REFERENCE decision 35); shallow ones pickle byte for
byte as before."""
from __future__ import annotations

import dataclasses
import io
import pickle
import sys
from pathlib import Path

import pytest

from spatec.frontend import ast as A
from spatec.frontend.flatpickle import DEEP, FlatContainer, FlatPickled
from spatec.plan.nodes import Join, Leaf, walk_nodes
from spatec.plan.program import compile_program

REPO = Path(__file__).resolve().parents[2]
BUS = (REPO / "examples" / "bus.spatec").read_text(encoding="utf-8")
N = 10_000


def dumpers():
    from pyspark import cloudpickle

    return {"pickle": pickle.dumps, "cloudpickle": cloudpickle.dumps}


def deep_plan(n: int):
    """A phrase plan with an operator tree ``n`` levels deep (``A0 ; A1 ; ...``), its leaves
    (nodes of the tree), a where-expression ``n`` levels deep on the root and a types map
    keyed by every subexpression of it, as the checker's is (shared subtrees)."""
    small = compile_program("c.spatec", BUS + "\nphrase P =\n    BusGPS -> A ; BusGPS -> B\n  within 1 h\n").plans[0]
    leaves = [Leaf(id=i, slot=i, type="BusGPS", var=f"A{i}", bound=True) for i in range(n)]
    expr = A.BinOp(">", A.Attr("A0", "lon"), A.Num(0.0))
    types = {expr: "bool", expr.left: "float", expr.right: "float"}
    for i in range(1, n):
        term = A.BinOp(">", A.Attr(f"A{i}", "lon"), A.Num(-float(i)))
        expr = A.BoolOp("and", expr, term)
        types.update({term: "bool", expr: "bool"})
    root = leaves[0]
    for i in range(1, n):
        root = Join(id=n + i, op=";", left=root, right=leaves[i], preds=(expr,) if i == n - 1 else ())
    return dataclasses.replace(small, root=root, leaves=tuple(leaves), types=types)


@pytest.fixture(scope="module")
def plan():
    return deep_plan(N)


@pytest.mark.parametrize("how,n", [("pickle", N), ("cloudpickle", 2_000)])
def test_a_10000_deep_plan_round_trips_with_its_shared_nodes(plan, how, n):
    """(Spark's cloudpickle 2,000 deep, to keep the suite fast: it is pickle's pickler with
    hooks for functions and classes, which tree nodes do not reach.)"""
    assert sys.getrecursionlimit() <= 3000  # nothing raised it
    if n != N:
        plan = deep_plan(n)
    back = pickle.loads(dumpers()[how](plan))
    assert back == plan and back.root == plan.root
    tree = {id(x) for x in walk_nodes(back.root)}
    assert len(tree) == 2 * n - 1
    assert all(id(leaf) in tree for leaf in back.leaves)          # the leaves are the tree's nodes
    expr = back.root.preds[0]
    sub = {id(x) for x in A.walk(expr)}
    assert list(back.types.values()) == list(plan.types.values())
    assert len(back.types) == len(plan.types) and all(id(k) in sub for k in back.types)
    assert expr == plan.root.preds[0]
    # a bare tree too (not inside a plan), and overlapping subtrees: each read back once
    keys = list(plan.types)
    again = pickle.loads(dumpers()[how]((plan.root, keys[-1], keys[-2], keys[-1].left)))
    assert again[0] == plan.root and again[1] == keys[-1]
    assert again[3] is again[1].left and again[2] is again[1].right


def test_pickling_a_deep_tree_needs_a_bounded_stack(plan):
    """Pickled from deep inside the interpreter's stack (a few hundred frames left): the
    pickler's depth depends on :data:`DEEP`, not on the tree's 10,000 levels."""
    limit = sys.getrecursionlimit()

    def at_depth(d):
        return at_depth(d - 1) if d else pickle.dumps(plan)

    frame = sys._getframe()
    used = 0
    while frame is not None:
        used, frame = used + 1, frame.f_back
    data = at_depth(limit - used - 20 * DEEP)
    assert pickle.loads(data) == plan


def test_shallow_trees_pickle_byte_for_byte_as_before():
    """Every example's compiled program pickles to the bytes a pickler that ignores the
    flattening (the plain reduction of every node) writes."""

    class Plain(pickle.Pickler):
        def reducer_override(self, obj):
            if isinstance(obj, (FlatPickled, FlatContainer)):
                return object.__reduce_ex__(obj, 5)
            return NotImplemented

    for path in sorted((REPO / "examples").glob("*/*.spatec")):
        if path.parent.name == "off_route" and not (path.parent / "cambridge_gtfs.zip").exists():
            continue  # its feed is derived from the data set (`spatec datasets gtfs`), not in the repository
        c = compile_program(path)
        buf = io.BytesIO()
        Plain(buf, 5).dump(c)
        assert pickle.dumps(c, 5) == buf.getvalue(), path.name
