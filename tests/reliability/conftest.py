"""Reliability suites: the short forms run in CI, the `slow` soak only with SCANWATCH_SOAK=1 (tests/conftest.py).

Every suite adds its figures (runs, divergences, kill points, scrapes...) to one report printed at the end
of the session, so a CI log or a soak run states what was tried, not only that it passed.
"""

from __future__ import annotations

from collections import Counter

import pytest

FIGURES: Counter[str] = Counter()
NOTES: list[str] = []


def pytest_terminal_summary(terminalreporter) -> None:
    if not FIGURES:
        return
    terminalreporter.section("scanwatch reliability figures")
    for key in sorted(FIGURES):
        terminalreporter.write_line(f"{key:<48} {FIGURES[key]}")
    for note in NOTES[-30:]:
        terminalreporter.write_line(f"  {note}")


@pytest.fixture
def figures() -> Counter[str]:
    return FIGURES


@pytest.fixture
def notes() -> list[str]:
    return NOTES
