"""The roles docs/postgres.md names, on a test server, made by `scanwatch roles` itself (its SQL applied as the
server's superuser, then a password set for each login role): the door's tests read as the roles a deployment
gives its readers, never as the superuser that built the history, unless a test says so."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.commands import roles
from pipelines.core.history_location import HistoryLocation

WRITER, READER, GRAFANA = roles.WRITER, roles.READER, roles.GRAFANA


def password(role: str) -> str:
    return f"{role}-Pw-7q"


def apply_roles(pg_server: Any, admin_url: str, workspaces: Sequence[str] = (), **limits: str) -> None:
    """The recipe (and a role per named workspace) in the database of `admin_url`; every login role of it
    given its test password."""
    location = HistoryLocation.parse(admin_url)
    wanted = {"temp_file_limit": roles.TEMP_FILE_LIMIT, "statement_timeout": roles.STATEMENT_TIMEOUT,
              "work_mem": roles.WORK_MEM, **limits}
    roles.apply(location, roles.recipe_for(location, list(workspaces), wanted))
    for role in (WRITER, READER, GRAFANA, *(roles.workspace_role(w) for w in workspaces)):
        pg_server.psql(f"ALTER ROLE {roles.ident(role)} PASSWORD {roles.literal(password(role))}")


def role_url(pg_server: Any, url: str, role: str) -> str:
    """`url`'s database as `role`."""
    return pg_server.url(url.rsplit("/", 1)[1], user=role, password=password(role))


def reader_url(pg_server: Any, admin_url: str, workspaces: Sequence[str] = ()) -> str:
    """The recipe applied to `admin_url`'s database, and its URL as the docs' reader role."""
    apply_roles(pg_server, admin_url, workspaces)
    return role_url(pg_server, admin_url, READER)
