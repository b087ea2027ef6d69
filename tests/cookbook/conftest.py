from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pipelines.storage.db import connect
from tests.backends import BACKENDS, backend_of

from . import history

# A test that would start this close to a UTC midnight waits for the new day rather than straddle it.
MIDNIGHT_MARGIN = dt.timedelta(seconds=60)


@pytest.fixture(scope="session")
def _story(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Where the hand-made history lives, the day it tells and the moment it was built."""
    return {"folder": tmp_path_factory.mktemp("cookbook"), "day": None, "built_at": None, "path": None,
            "stories": {}, "built_at_of": {}}


@pytest.fixture(autouse=True)
def story_of_today(_story: dict) -> dict:
    """The hand-made history, told relative to today's UTC midnight and built once a day.

    The queries read the clock when they run, so the story must be today's when they do: a test never
    begins within a minute of a UTC midnight (it waits for the new day), and the history is built again
    once the day has changed, under a new file (earlier ones may still be open)."""
    now = dt.datetime.now(dt.UTC)
    next_midnight = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), dt.UTC)
    if next_midnight - now < MIDNIGHT_MARGIN:
        time.sleep((next_midnight - now).total_seconds() + 0.5)
    today = history.utc_today()
    if _story["day"] != today:
        history.tell(today)
        path = _story["folder"] / f"history-{today.isoformat()}.duckdb"
        _story.update(day=today, path=path, built_at=history.build(path))
        _story["stories"][("duckdb", today)] = path
        _story["built_at_of"][str(path)] = _story["built_at"]
    return _story


@pytest.fixture
def history_db(story_of_today: dict) -> Path:
    return story_of_today["path"]


@pytest.fixture
def built_at(story_of_today: dict) -> dt.datetime:
    return story_of_today["built_at"]


@pytest.fixture
def as_reader(request: pytest.FixtureRequest) -> Callable[[Path | str], Path | str]:
    """Maps a history to what the cookbook's readers are given: a DuckDB file as it is; a PostgreSQL database,
    built by the superuser, read as the reader role of `scanwatch roles` (the read door refuses a role that
    could write)."""
    def reader(db: Path | str) -> Path | str:
        return backend_of(db).as_reader(request, db)

    return reader


@pytest.fixture(params=["duckdb", "postgres"])
def story_db(request: pytest.FixtureRequest, story_of_today: dict,
             as_reader: Callable[[Path | str], Path | str]) -> Path | str:
    """The same hand-made history on each engine: the DuckDB file, then a PostgreSQL database built alike (once
    a day, as the file is) and read as the reader role, so every cookbook answer is checked on both."""
    key = (request.param, story_of_today["day"])
    if key not in story_of_today["stories"]:  # the DuckDB file is today's story already
        db = BACKENDS[request.param].fresh(request, story_of_today["folder"] / "story.duckdb")
        built = history.build(db)
        story_of_today["stories"][key] = as_reader(db)
        story_of_today["built_at_of"][str(as_reader(db))] = built
    return story_of_today["stories"][key]


@pytest.fixture
def story_built_at(story_db: Path | str, story_of_today: dict) -> dt.datetime:
    """When the story of `story_db` was built."""
    return story_of_today["built_at_of"][str(story_db)]


@pytest.fixture
def story_copy(story_db: Path | str, request: pytest.FixtureRequest, tmp_path: Path):
    """Makes a copy of `story_db` on its engine that a test may change (`Backend.copy`)."""
    def make() -> Path | str:
        return backend_of(story_db).copy(request, story_db, tmp_path / f"copy-{len(list(tmp_path.glob('copy-*')))}"
                                                                       ".duckdb")

    return make  # the superuser's URL: a test writes its change, then reads through `as_reader`


@pytest.fixture
def story_empty(story_db: Path | str, request: pytest.FixtureRequest, tmp_path: Path,
                as_reader: Callable[[Path | str], Path | str]):
    """Makes an empty history, migrated, on the engine of `story_db`, as its reader reads it."""
    def make() -> Path | str:
        db = backend_of(story_db).fresh(request, tmp_path / f"empty-{len(list(tmp_path.glob('empty-*')))}.duckdb")
        connect(db).close()
        return as_reader(db)

    return make
