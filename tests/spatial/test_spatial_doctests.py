"""The examples in the spatial modules' docstrings are tests."""
import doctest

import pytest

from spatec.spatial import approx, crs, engines, stamps


@pytest.mark.parametrize("module", [approx, crs, stamps, engines], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
