"""Hostile-service suites: the short forms run in CI, the `slow` long forms only in the soak (`make soak`)."""

from __future__ import annotations

import pytest

from tests.reliability.harness import SOAK


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SOAK:
        return
    skip = pytest.mark.skip(reason="soak only: set SCANWATCH_SOAK=1 (make soak)")
    for item in items:
        if "slow" in item.keywords and "tests/hostile" in str(item.fspath):
            item.add_marker(skip)
