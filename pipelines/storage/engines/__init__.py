"""The history's engines: DuckDB (a file on one machine, the default) and PostgreSQL (a server many share).

`open_engine` picks one from `SCANWATCH_DB` (a path or a `postgresql://` URL); the rest of scanwatch sees a
`Connection` that takes the SQL files' `$name` parameters whichever engine answers.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.core.history_location import HistoryLocation
from pipelines.storage.engines.base import Capabilities, Connection, Engine, HistoryUnavailableError
from pipelines.storage.engines.duckdb_engine import DUCKDB, HistoryLockedError

__all__ = ["DUCKDB", "Capabilities", "Connection", "Engine", "HistoryLockedError", "HistoryUnavailableError",
           "location_of"]


def location_of(db: str | Path | HistoryLocation) -> HistoryLocation:
    """`db` as a location: a given location as it is, a `Path` always a DuckDB file, text as the setting reads."""
    if isinstance(db, HistoryLocation):
        return db
    if isinstance(db, Path):
        return HistoryLocation(str(db))
    if not isinstance(db, str):
        raise TypeError(f"a history is a path or a URL, not {type(db).__name__}")
    return HistoryLocation.parse(db)

