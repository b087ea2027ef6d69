"""The one factory: the engine of a history, chosen by its location (`SCANWATCH_DB`, a path or a
`postgresql://` URL). The rest of scanwatch sees a `Connection` that takes the SQL files' `$name` parameters
whichever engine answers, and asks the engine itself for whatever differs.

An engine's module (and its driver) is imported only when a history of that engine is opened: the exporter
asks this factory for a PostgreSQL history's snapshot and never loads DuckDB.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.core.history_location import HistoryLocation
from pipelines.storage.destinations.base import Engine

if TYPE_CHECKING:
    from pipelines.storage.destinations.impl.duckdb.factory import DUCKDB

__all__ = ["DUCKDB", "engine_for", "location_of"]


def __getattr__(name: str) -> Any:
    if name == "DUCKDB":
        from pipelines.storage.destinations.impl.duckdb.factory import DUCKDB

        return DUCKDB
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def location_of(db: str | Path | HistoryLocation) -> HistoryLocation:
    """`db` as a location: a given location as it is, a `Path` always a DuckDB file, text as the setting reads."""
    if isinstance(db, HistoryLocation):
        return db
    if isinstance(db, Path):
        return HistoryLocation(str(db))
    if not isinstance(db, str):
        raise TypeError(f"a history is a path or a URL, not {type(db).__name__}")
    return HistoryLocation.parse(db)


def engine_for(db: str | Path | HistoryLocation) -> Engine:
    """The engine of the history at `db`: the one place scanwatch decides it. Each engine's driver is imported
    only for a history of that engine."""
    if location_of(db).is_postgres:
        from pipelines.storage.destinations.impl.postgres.factory import POSTGRES

        return POSTGRES
    from pipelines.storage.destinations.impl.duckdb.factory import DUCKDB

    return DUCKDB

