"""print → parse gives back the same AST (spans aside)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from lang_strategies import exprs, matches, modules

from spatec.frontend import ast as A
from spatec.frontend.parse import parse_text
from spatec.frontend.printer import print_expr, print_match, print_module, print_string

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def reparse_match(m: A.Match) -> A.Match:
    return parse_text(f"phrase P = {print_match(m)}").decls[0].match


def reparse_expr(e: A.Expr) -> A.Expr:
    return parse_text(f"phrase P = E where {print_expr(e)}").decls[0].where


@SETTINGS
@given(matches)
def test_match_roundtrip(m):
    assert reparse_match(m) == m


@SETTINGS
@given(exprs)
def test_expr_roundtrip(e):
    assert reparse_expr(e) == e


@settings(SETTINGS, max_examples=150)
@given(modules)
def test_module_roundtrip(m):
    text = print_module(m)
    assert parse_text(text, "gen.spatec") == m, text


X = A.EventRef("BusGPS", "X")
Aa, B = A.EventRef("BusGPS", "A"), A.EventRef("BusGPS", "B")
FIVE = A.Quantity(5, "min")


@pytest.mark.parametrize("m, text", [
    (A.Binary(";", A.Binary(";", Aa, A.Not(X)), B), "BusGPS -> A ; not BusGPS -> X ; BusGPS -> B"),
    (A.Binary(";", Aa, A.Not(X, FIVE)), "BusGPS -> A ; not BusGPS -> X within 5 min"),
    (A.Binary(";", Aa, A.Binary(";", B, X)), "BusGPS -> A ; (BusGPS -> B ; BusGPS -> X)"),
    (A.Binary("and", A.Binary("or", Aa, B), X), "(BusGPS -> A or BusGPS -> B) and BusGPS -> X"),
    (A.Binary("||", Aa, A.Binary("and", B, A.AtPlace("station"))), "BusGPS -> A || (BusGPS -> B and at station)"),
    (A.Not(A.Binary("or", A.AtPlace("a"), A.AtPlace("b"))), "not (at a or at b)"),
    (A.Certainly(A.DayPattern("Tuesday")), "certainly Tuesday"),
    (A.InShape(A.Circle(-0.5, 52.0, A.Quantity(1.5, "km"))), "in circle(-0.5, 52, 1.5 km)"),
])
def test_match_text(m, text):
    assert print_match(m) == text
    assert reparse_match(m) == m


@pytest.mark.parametrize("e, text", [
    (A.BinOp("-", A.Num(1), A.BinOp("-", A.Num(2), A.Num(3))), "1 - (2 - 3)"),
    (A.BinOp("-", A.BinOp("-", A.Num(1), A.Num(2)), A.Num(3)), "1 - 2 - 3"),
    (A.BinOp("*", A.UnaryOp("-", A.Num(2)), A.Quantity(3, "km/h")), "-2 * 3 km/h"),
    (A.UnaryOp("-", A.BinOp("*", A.Num(2), A.Num(3))), "-(2 * 3)"),
    (A.BinOp("<", A.BinOp("<", A.Num(1), A.Num(2)), A.BoolLit(True)), "(1 < 2) < true"),
    (A.UnaryOp("not", A.BoolOp("and", A.Var("a"), A.Var("b"))), "not (a and b)"),
    (A.BoolOp("and", A.UnaryOp("not", A.Var("a")), A.Var("b")), "not a and b"),
    (A.BoolOp("and", A.BoolOp("or", A.Var("a"), A.Var("b")), A.Var("c")), "(a or b) and c"),
    (A.BinOp("==", A.Attr("A", "line"), A.Str('C "1"\\\n')), 'A.line == "C \\"1\\"\\\\\\n"'),
])
def test_expr_text(e, text):
    assert print_expr(e) == text
    assert reparse_expr(e) == e


def test_phrase_window_after_open_absence_is_kept_apart():
    p = A.Phrase("P", A.Binary(";", Aa, A.Not(X)), within=FIVE)
    m = A.Module("x.spatec", (p,))
    text = print_module(m)
    assert "(BusGPS -> A ; not BusGPS -> X)\n  within 5 min" in text
    assert parse_text(text, "x.spatec") == m


def test_strings_escape_controls():
    assert print_string("a\tb\x00\u2028") == '"a\\tb\\u0000\\u2028"'
