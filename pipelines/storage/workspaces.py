"""Which workspace of the history a followed name stands for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.core.sqlfiles import read_sql

if TYPE_CHECKING:
    from pipelines.storage.destinations import Connection


def current_workspace(conn: Connection, label: str | None) -> str | None:
    """The service's id of the workspace followed as `label` (None: the one workspace of the two variables),
    or None while the history has never read it."""
    rows = conn.execute(read_sql("sync/current_workspace.sql"), {"label": label}).fetchall()
    return rows[0][0] if rows else None
