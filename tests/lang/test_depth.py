"""No depth limits: 10,000-term chains parse, check and print, at the default recursion limit.

Each chain is a left-deep tree 10,000 levels deep, ten times Python's default
recursion limit: the parser builds the AST bottom-up in a loop, and the
checker, printer, equality and hashing walk it without recursion.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spatec.errors import CheckError
from spatec.frontend import ast as A
from spatec.frontend.check import check_file
from spatec.frontend.parse import parse_text
from spatec.frontend.printer import print_phrase

N = 10_000
BUS = (Path(__file__).resolve().parents[2] / "examples" / "bus.spatec").read_text(encoding="utf-8")
PLACES = ("at hospital", "at station", "at centre")

CHAINS = {
    # 500 stops joined by `or` crashed the checker before
    "or": "phrase P =\n    BusGPS -> A and (" + " or ".join(PLACES[i % 3] for i in range(N)) + ")\n",
    "where": "phrase P =\n    BusGPS -> A\n  where " + " and ".join(f"A.lon > {i}" for i in range(N)) + "\n",
    # a sequence of 10,000 variables, bounded by `successive` linking each to the next
    "seq": ("phrase P per vehicle =\n    " + " ; ".join(f"BusGPS -> A{i}" for i in range(N))
            + "\n  where successive(" + ", ".join(f"A{i}" for i in range(N)) + ")\n"),
}


def depth(m) -> int:
    d, node = 0, m
    while isinstance(node, (A.Binary, A.BoolOp)):
        d, node = d + 1, node.left
    return d


@pytest.mark.parametrize("kind", sorted(CHAINS))
def test_a_10000_term_chain_checks_and_prints(kind):
    assert sys.getrecursionlimit() <= 3000  # nothing raised it
    program = check_file("chain.spatec", BUS + "\n" + CHAINS[kind])
    info = program.phrase("P")
    p = info.phrase
    tree = p.where if kind == "where" else p.match.right if kind == "or" else p.match
    assert depth(tree) == N - 1
    if kind == "seq":
        assert len(info.vars) == N and info.span_bound is None  # bounded by successive, not by a window
    else:
        assert info.types.get(p.where) == "bool" if kind == "where" else info.vars == {"A": "BusGPS"}
    text = print_phrase(p)
    assert len(text) > 5 * N
    again = parse_text(text, "again.spatec").decls[0]
    assert again == p and hash(again) == hash(p)
    assert repr(again) == repr(p)
    assert sum(1 for _ in A.walk(again)) == sum(1 for _ in A.walk(p))


def test_an_unbounded_10000_term_sequence_is_reported_not_crashed():
    text = BUS + "\nphrase P =\n    " + " ; ".join(f"BusGPS -> A{i}" for i in range(N)) + "\n"
    with pytest.raises(CheckError) as e:
        check_file("chain.spatec", text)
    assert "phrase P is unbounded" in str(e.value)
