"""Reliability suites: the short forms run in CI, the `slow` soak only with SCANWATCH_SOAK=1 (tests/conftest.py).

Every suite adds its figures to one report printed at the end of the session (tests/figures.py).
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.figures import FIGURES, NOTES


@pytest.fixture
def figures() -> Counter[str]:
    return FIGURES


@pytest.fixture
def notes() -> list[str]:
    return NOTES
