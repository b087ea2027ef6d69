"""The history as pandas DataFrames, for analysts who work in notebooks.

    from pipelines import history
    breaches = history.query("sla_breaches")            # a cookbook query by name
    opened = history.query("SELECT * FROM issue_events WHERE event = 'opened'")
    history.cookbook()                                   # name -> description

It goes through the same read-only door as `scanwatch sql` (read-only file, read statements only, no file
access from SQL), so a notebook can never change the history or hold its write lock for long: the sync
keeps running on schedule while someone explores.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["cookbook", "query"]


def cookbook() -> dict[str, str]:
    """Cookbook query names and what each answers, as `scanwatch sql` lists them."""
    from pipelines.core import sqlfiles

    return {name: q.description for name, q in sqlfiles.cookbook().items()}


def query(name_or_sql: str, *, db: str | Path | None = None, workspace: str | None = None,
          as_writer: bool = False) -> pd.DataFrame:
    """Run a cookbook query by name, or one read-only SQL statement, and return its rows as a DataFrame.

    `db` defaults to `SCANWATCH_DB` (else `data/scanwatch.duckdb`), the history `scanwatch sync` writes: a
    DuckDB file or a `postgresql://` URL.
    Raises `ValueError` with the same one-line reason `scanwatch sql` prints (no history yet, a sync is
    writing, a refused statement, an unknown cookbook name). `workspace` limits every table to one followed
    workspace, as `scanwatch sql --workspace` does. On PostgreSQL a role that could write the history (or a
    superuser) is refused unless `as_writer`, as `scanwatch sql --as-writer` does.
    """
    import pandas as pd

    from pipelines.core import settings, sqlfiles
    from pipelines.storage.read_only import ReadRefused, execute_read_only

    try:
        sql = sqlfiles.cookbook_sql(name_or_sql)
    except KeyError:
        raise ValueError(f"no cookbook query named {name_or_sql.strip()!r}; history.cookbook() lists them") from None
    try:
        columns, rows = execute_read_only(str(db) if db is not None else settings.Settings.load().history.value,
                                          sql, workspace=workspace, as_writer=as_writer)
    except ReadRefused as exc:
        raise ValueError(str(exc)) from None
    return pd.DataFrame.from_records(rows, columns=columns)
