"""`--workspace NAME` for read-only SQL: a filter, so the cookbook and queries on the history's own names
show one workspace's rows.

Each history table that carries `workspace_id` is shadowed, for this connection only, by a temporary view
of the named workspace's rows; views of the history (such as `open_issues_now`) read through them too.
So the cookbook's files need no workspace parameter, and a query a user copied from them keeps working.
It is not a boundary: the file stays open, and a qualified name (`h.main.issues`) or `duckdb_tables()`
reaches every workspace; who may read the history file is the boundary (docs/workspaces.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.sqlfiles import read_sql

if TYPE_CHECKING:
    import duckdb


class UnknownWorkspaceError(LookupError):
    """No workspace of the history goes by that name; the message lists the ones it holds."""


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ident(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def scope_to_workspace(conn: duckdb.DuckDBPyConnection, name: str) -> str:
    """Shadow every workspace-carrying table with one workspace's rows; returns the workspace id."""
    found = conn.execute(read_sql("read/workspace_ids.sql"), {"name": name}).fetchall()
    if not found:
        held = conn.execute(read_sql("read/workspace_labels.sql")).fetchall()
        raise UnknownWorkspaceError(f"no workspace named {name!r} in the history; it holds: "
                                    f"{', '.join(r[0] for r in held) or 'none yet'}")
    workspace_id = found[0][0]
    for table, has_label, catalog in conn.execute(read_sql("read/workspace_tables.sql")).fetchall():
        # A failed run recorded before its workspace's id was known carries only the name.
        extra = f" OR (workspace_id IS NULL AND workspace_label = {_literal(name)})" if has_label else ""
        conn.execute(f"CREATE TEMP VIEW {_ident(table)} AS SELECT * FROM {_ident(catalog)}.main.{_ident(table)} "
                     f"WHERE workspace_id = {_literal(workspace_id)}{extra}")
    return workspace_id
