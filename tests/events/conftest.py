"""Fixtures of the io tests; shared declarations and helpers are in ``events_cases``."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the repository importable when pytest runs from anywhere
    sys.path.insert(0, str(ROOT))

from events_cases import BUS_HEADER  # noqa: E402


@pytest.fixture
def bus_header() -> list[str]:
    return list(BUS_HEADER)
