"""Mutated programs never crash the front end.

Thousands of mutations of the example and corpus programs (deleted, inserted,
swapped characters and tokens, truncations, stray Unicode) go through
parse + check. The only acceptable outcomes are a checked program or a
ParseError/CheckError whose every diagnostic is positioned (line, col >= 1).
"""
from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatec.errors import ProgramError
from spatec.frontend.check import check_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT.parent / "shared" / "spec" / "examples"
SEEDS = sorted((ROOT / "lang" / "corpus" / "valid").glob("*.spatec")) + sorted(EXAMPLES.glob("*.spatec"))
TEXTS = [(p, p.read_text(encoding="utf-8")) for p in SEEDS]

TOKEN = re.compile(r"\s+|[A-Za-z_][A-Za-z0-9_]*|\d[\d.:T-]*|\"[^\"\n]*\"|[^\w\s]+|.", re.S)
VOCAB = ["phrase", "event", "place", "places", "include", "timezone", "crs", "source", "time", "per",
         "where", "within", "emit", "not", "and", "or", "certainly", "at", "in", "of", "between",
         "on", "from", "to", "circle", "polygon", "point", ";", "||", "=", "<>", ";=", ";<>", "||=",
         "||<>", "‖", "≠", "±", "->", "(", ")", ",", ".", "..", "==", "<", "+", "-", "*", "/",
         "5 min", "1e999 s", "1e300 d", "5 m", "0 m", "-3", "12 km/h", '"x"', '"\\q"', '"\\u00e9"', "'", '"',
         "07:00", "25:61", "2026-02-30", "2026-12-24T09:00Z", "Tuesday", "weekend", "BusGPS", "A",
         "X", "successive", "duration(", "hull_area()", "t", "lo", "_x", "speed", "#", "\n", "\t"]
ODD = ["\x00", "\ufeff", "\u2028", "\U0001F68C", "é", "\\", "ß", "€", "\r", "\x7f", "‖", "≠", "±"]


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.choice((1, 1, 1, 2, 3, 6))):
        text = rng.choice(_MUTATIONS)(text, rng)
    return text


def _char_delete(t, rng):
    if not t:
        return t
    i = rng.randrange(len(t))
    return t[:i] + t[i + rng.choice((1, 1, 2, 5)):]


def _char_insert(t, rng):
    i = rng.randrange(len(t) + 1)
    if rng.random() < 0.3:
        ch = rng.choice(ODD)
    else:
        ch = chr(rng.choice((rng.randrange(32, 127), rng.randrange(0x80, 0x3000))))
    return t[:i] + ch + t[i:]


def _char_swap(t, rng):
    if len(t) < 2:
        return t
    i = rng.randrange(len(t) - 1)
    return t[:i] + t[i + 1] + t[i] + t[i + 2:]


def _truncate(t, rng):
    return t[: rng.randrange(len(t) + 1)]


def _tokens(t):
    return TOKEN.findall(t)


def _token_delete(t, rng):
    toks = _tokens(t)
    if toks:
        del toks[rng.randrange(len(toks))]
    return "".join(toks)


def _token_insert(t, rng):
    toks = _tokens(t)
    toks.insert(rng.randrange(len(toks) + 1), f" {rng.choice(VOCAB)} ")
    return "".join(toks)


def _token_replace(t, rng):
    toks = _tokens(t)
    if toks:
        toks[rng.randrange(len(toks))] = rng.choice(VOCAB + toks)
    return "".join(toks)


def _token_swap(t, rng):
    toks = _tokens(t)
    if len(toks) >= 2:
        i, j = rng.randrange(len(toks)), rng.randrange(len(toks))
        toks[i], toks[j] = toks[j], toks[i]
    return "".join(toks)


def _token_duplicate(t, rng):
    toks = _tokens(t)
    if toks:
        i = rng.randrange(len(toks))
        toks.insert(i, toks[i])
    return "".join(toks)


_MUTATIONS = (_char_delete, _char_insert, _char_swap, _truncate, _token_delete, _token_insert,
              _token_replace, _token_swap, _token_duplicate)


def assert_clean_or_positioned(path: Path, text: str) -> None:
    try:
        check_file(path, text=text)
    except ProgramError as e:
        assert e.diagnostics, "an error without diagnostics"
        for d in e.diagnostics:
            assert d.span.line >= 1 and d.span.col >= 1, f"unpositioned: {d.render()}\n--- program:\n{text}"
            d.render()


@pytest.mark.parametrize("seed", range(6))
def test_mutations_never_crash(seed):
    rng = random.Random(seed)
    for _ in range(500):
        path, text = rng.choice(TEXTS)
        mutant = mutate(text, rng)
        try:
            assert_clean_or_positioned(path, mutant)
        except AssertionError:
            raise
        except Exception as e:  # noqa: BLE001 - the point: show the program that crashed
            raise AssertionError(f"{type(e).__name__}: {e}\n--- program ({path.name}):\n{mutant}") from e


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_hypothesis_mutations(data):
    path, text = data.draw(st.sampled_from(TEXTS))
    seed = data.draw(st.integers(0, 2**32))
    assert_clean_or_positioned(path, mutate(text, random.Random(seed)))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(VOCAB + ODD + ["B", "1", "T", "->"]), max_size=40).map(" ".join))
def test_random_token_soup(soup):
    assert_clean_or_positioned(ROOT / "lang" / "corpus" / "valid" / "soup.spatec", soup)
