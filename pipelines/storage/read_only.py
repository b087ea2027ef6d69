"""The one read-only door to the history, for `scanwatch sql` and `pipelines.history` alike.

Each engine keeps the promise in its own room: DuckDB with a read-only file, its configuration locked and
its parser's statement type (`destinations/impl/duckdb/read_door.py`); PostgreSQL with the server's
protocol, transaction and role (`destinations/impl/postgres/read_door.py`). Rows come a chunk at a time
(`opened`), so a result of any size is never held whole. Every refusal is one line the user can act on
(ReadRefused, whichever engine refused).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipelines.core.history_location import HistoryLocation
from pipelines.storage.destinations.errors import EXIT_BUSY, EXIT_ERROR, ReadRefused
from pipelines.storage.destinations.impl import engine_for, location_of

__all__ = ["DEFAULT_TIMEOUT", "DEFAULT_WAIT", "EXIT_BUSY", "EXIT_ERROR", "MAX_TIMEOUT", "ReadRefused",
           "checked_timeout", "execute_read_only", "opened"]

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 86400.0  # a day: PostgreSQL's statement_timeout stops at 24.8 days, and no read needs more
FETCH_ROWS = 1000
# Read as a role that could write (or a superuser) on purpose: `scanwatch sql --as-writer` sets it too.
AS_WRITER_VARIABLE = "SCANWATCH_SQL_AS_WRITER"
# How long a reader of a DuckDB file waits for a sync to release it. A sync holds the file for a merge or a
# snapshot at a time (seconds, docs/operations.md), so a reader that waits a little is served instead of refused.
DEFAULT_WAIT = 30.0


def checked_timeout(timeout: float | None) -> float | None:
    """`--timeout` as a number of seconds the servers take, or one line saying which are."""
    if timeout is None:
        return None
    if math.isnan(timeout) or not 0 < timeout <= MAX_TIMEOUT:
        raise ReadRefused(f"--timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT:g} (a day); "
                          f"got {timeout:g}")
    return timeout


def execute_read_only(db: Path | str, sql: str, *, timeout: float | None = DEFAULT_TIMEOUT,
                      workspace: str | None = None, as_writer: bool = False, wait: float = DEFAULT_WAIT
                      ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Every row of one read statement (`opened`, collected)."""
    with opened(db, sql, timeout=timeout, workspace=workspace, as_writer=as_writer, wait=wait) as (columns, rows):
        return columns, list(rows)


@contextlib.contextmanager
def opened(db: Path | str | HistoryLocation, sql: str, *, timeout: float | None = DEFAULT_TIMEOUT,
           workspace: str | None = None, as_writer: bool = False, wait: float = DEFAULT_WAIT
           ) -> Iterator[tuple[list[str], Iterator[tuple[Any, ...]]]]:
    """One read statement's columns and its rows, fetched a chunk at a time while the block lasts. With
    `workspace`, every table shows that workspace's rows only. A PostgreSQL door refuses a role that could
    write unless `as_writer`; a DuckDB file a sync is writing is waited for up to `wait` seconds, then refused
    with the busy exit status."""
    timeout = checked_timeout(timeout)
    if not wait >= 0:
        raise ReadRefused(f"--wait must be a number of seconds, 0 or more (got {wait:g})")
    location = location_of(db)
    engine = engine_for(location)
    if not engine.exists(location):
        raise ReadRefused(f"no history yet at {location.masked}: run scanwatch sync")
    with engine.read_only(location, sql, timeout=timeout, workspace=workspace, as_writer=as_writer, wait=wait,
                          scope=_scope, check_schema=lambda con: _check_schema(con, location)) as result:
        yield result


def _scope(conn: Any, workspace: str) -> None:
    """The temporary views of one workspace's rows (`workspace_scope.py`), an unknown name refused."""
    from pipelines.storage.workspace_scope import UnknownWorkspaceError, scope_to_workspace

    try:
        scope_to_workspace(conn, workspace)
    except UnknownWorkspaceError as exc:
        raise ReadRefused(str(exc)) from None


def _check_schema(con: Any, location: HistoryLocation) -> None:
    """A history older than this code lacks tables and views the cookbook reads: say so, not the engine's
    catalog error. Only a sync may upgrade it (this door opens the history read-only)."""
    from pipelines.storage.db import latest_version, schema_version

    have, want = schema_version(con), latest_version()
    if 0 < have < want:  # 0: no migration table, a file scanwatch never wrote; it is read as it is
        raise ReadRefused(f"the history at {location.masked} is at schema {have}, older than this scanwatch's "
                          f"{want}: run scanwatch sync once to bring it up to date (every row is kept), then query it")
