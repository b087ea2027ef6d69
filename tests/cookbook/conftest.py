from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from . import history


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dt.datetime]:
    """The hand-made history, built once: its file and the moment sync_runs were placed around."""
    path = tmp_path_factory.mktemp("cookbook") / "history.duckdb"
    return path, history.build(path)


@pytest.fixture(scope="session")
def history_db(built: tuple[Path, dt.datetime]) -> Path:
    return built[0]


@pytest.fixture(scope="session")
def built_at(built: tuple[Path, dt.datetime]) -> dt.datetime:
    return built[1]
