"""`--workspace NAME` for read-only SQL: a filter, so the cookbook and queries on the history's own names
show one workspace's rows.

Each history table that carries `workspace_id` is shadowed, for this connection (DuckDB) or this transaction
(PostgreSQL) only, by a temporary view of the named workspace's rows, and each view of the views layer (such as
`open_issues_now`) by a temporary copy of itself that reads those: PostgreSQL binds a view to the tables it
named when it was created, so the history's own views would still read every workspace. Temporary objects are
found before the history's own on both engines, so the cookbook's files need no workspace parameter, and a
query a user copied from them keeps working. It is not a boundary: a qualified name (`h.main.issues`,
`public.issues`) or the catalog reaches every workspace; who may read the history is the boundary
(docs/workspaces.md).
"""

from __future__ import annotations

import re
from typing import Any

from pipelines.sqlfiles import read_sql
from pipelines.storage.views import definitions

_CREATE_VIEW = re.compile(r"\bCREATE\s+VIEW\b", re.IGNORECASE)


class UnknownWorkspaceError(LookupError):
    """No workspace of the history goes by that name; the message lists the ones it holds."""


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ident(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def scope_to_workspace(conn: Any, name: str) -> str:
    """Shadow every workspace-carrying table, and every view of the views layer, with one workspace's rows;
    returns the workspace id. `conn` takes the files' `$name` parameters (DuckDB's own, or a history
    `Connection`)."""
    found = conn.execute(read_sql("read/workspace_ids.sql"), {"name": name}).fetchall()
    if not found:
        held = conn.execute(read_sql("read/workspace_labels.sql")).fetchall()
        raise UnknownWorkspaceError(f"no workspace named {name!r} in the history; it holds: "
                                    f"{', '.join(r[0] for r in held) or 'none yet'}")
    workspace_id = found[0][0]
    for table, has_label, catalog, schema in conn.execute(read_sql("read/workspace_tables.sql")).fetchall():
        # A failed run recorded before its workspace's id was known carries only the name.
        extra = f" OR (workspace_id IS NULL AND workspace_label = {_literal(name)})" if has_label else ""
        conn.execute(f"CREATE TEMP VIEW {_ident(table)} AS SELECT * FROM {_ident(catalog)}.{_ident(schema)}."
                     f"{_ident(table)} WHERE workspace_id = {_literal(workspace_id)}{extra}")
    for text in definitions().values():  # in the order they read each other
        conn.execute(_CREATE_VIEW.sub("CREATE TEMP VIEW", text, count=1))
    return workspace_id
