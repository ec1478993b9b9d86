"""The examples in the front end's docstrings run."""
import doctest

import pytest

from spatec.frontend import parse, printer, runs, schema


@pytest.mark.parametrize("module", [parse, printer, runs, schema], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def test_the_grammar_in_lang_is_the_parsers():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert (root / "lang" / "spatec.lark").read_text() == parse.GRAMMAR.read_text()
