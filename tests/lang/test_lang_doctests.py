"""The examples in the front end's docstrings run."""
import doctest

import pytest

from spatec.frontend import parse, printer, schema


@pytest.mark.parametrize("module", [parse, printer, schema], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
