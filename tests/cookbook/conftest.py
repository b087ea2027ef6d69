from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from . import history

# A test that would start this close to a UTC midnight waits for the new day rather than straddle it.
MIDNIGHT_MARGIN = dt.timedelta(seconds=60)


@pytest.fixture(scope="session")
def _story(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Where the hand-made history lives, the day it tells and the moment it was built."""
    return {"folder": tmp_path_factory.mktemp("cookbook"), "day": None, "built_at": None, "path": None}


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
    return _story


@pytest.fixture
def history_db(story_of_today: dict) -> Path:
    return story_of_today["path"]


@pytest.fixture
def built_at(story_of_today: dict) -> dt.datetime:
    return story_of_today["built_at"]
