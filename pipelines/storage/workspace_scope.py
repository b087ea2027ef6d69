"""`--workspace NAME` for read-only SQL: a filter, so the cookbook and queries on the history's own names
show one workspace's rows.

Each history table that carries `workspace_id` is shadowed, for this connection (DuckDB) or this transaction
(PostgreSQL) only, by a temporary view of the named workspace's rows, and each view of the views layer (such as
`open_issues_now`) by a temporary copy of itself that reads those: PostgreSQL binds a view to the tables it
named when it was created, so the history's own views would still read every workspace. Temporary objects are
found before the history's own on both engines, so the cookbook's files need no workspace parameter, and a
query a user copied from them keeps working. The metrics snapshot's parts (`snapshot_parts`, named by the
workspace's id) are shadowed too.

It is a filter, not a boundary: a qualified name (`h.main.issues`, `public.issues`) or the catalog reaches
every workspace the role may read. The role is the boundary: on PostgreSQL, `scanwatch roles --workspace
NAME` makes a role that row-level security keeps to one workspace's rows (docs/postgres.md); on DuckDB,
whoever may read the file reads every workspace (docs/workspaces.md).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pipelines.core.settings import DEFAULT_WORKSPACE
from pipelines.core.sqlfiles import read_sql
from pipelines.storage.views import definitions

if TYPE_CHECKING:
    from pipelines.storage.destinations import Connection

_CREATE_VIEW = re.compile(r"\bCREATE\s+VIEW\b", re.IGNORECASE)


class UnknownWorkspaceError(LookupError):
    """No workspace of the history goes by that name; the message lists the ones it holds."""


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ident(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def workspace_id_of(conn: Connection, name: str) -> str:
    """The service's id of the workspace followed as `name`, or UnknownWorkspaceError naming those held."""
    default = {"default_workspace": DEFAULT_WORKSPACE}
    found = conn.execute(read_sql("read/workspace_ids.sql"), {"name": name, **default}).fetchall()
    if not found:
        held = conn.execute(read_sql("read/workspace_labels.sql"), default).fetchall()
        raise UnknownWorkspaceError(f"no workspace named {name!r} in the history; it holds: "
                                    f"{', '.join(r[0] for r in held) or 'none yet'}")
    workspace_id: str = found[0][0]
    return workspace_id


def scope_to_workspace(conn: Connection, name: str) -> str:
    """Shadow every workspace-carrying table, and every view of the views layer, with one workspace's rows;
    returns the workspace id. `conn` takes the files' `$name` parameters (DuckDB's own, or a history
    `Connection`)."""
    workspace_id = workspace_id_of(conn, name)
    for table, column, has_label, catalog, schema in conn.execute(read_sql("read/history_tables.sql")).fetchall():
        if column is None:
            continue
        where = f"{_ident(column)} = {_literal(workspace_id)}"
        if column == "name":  # a snapshot part is named by the id, or by the followed name before it is known
            where += f" OR {_ident(column)} = {_literal(name)}"
        elif has_label:  # a failed run recorded before its workspace's id was known carries only the name
            where += f" OR (workspace_id IS NULL AND workspace_label = {_literal(name)})"
        conn.execute(f"CREATE TEMP VIEW {_ident(table)} AS SELECT * FROM {_ident(catalog)}.{_ident(schema)}."
                     f"{_ident(table)} WHERE {where}")
    for text in definitions().values():  # in the order they read each other
        conn.execute(_CREATE_VIEW.sub("CREATE TEMP VIEW", text, count=1))
    return workspace_id
