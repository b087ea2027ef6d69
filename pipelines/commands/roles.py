"""`scanwatch roles`: the roles of a PostgreSQL history, as SQL to read or to apply as an administrator.

The roles are the boundary of who reads what (docs/postgres.md, "Roles: who gets what"): the read door
refuses a role that could write, and a reader's role is what stops whatever it types. The recipe lives in
`sql/roles/`; this command fills in the names (quoted), the limits, and, for `--workspace`, the history's
own tables and the workspace's id, so a workspace role's policies cover every table that holds workspace
rows at the time it runs (run it again after an upgrade that adds one: a table it never granted stays
closed to that role).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pipelines.core.sqlfiles import fill, read_sql

if TYPE_CHECKING:
    from pipelines.core.history_location import HistoryLocation
    from pipelines.storage.destinations import Connection

WRITER, READER, VIEWS, GRAFANA = "scanwatch_writer", "scanwatch_reader", "scanwatch_views", "scanwatch_grafana"
# A reader's limits: a query that runs for long, spills gigabytes to temporary files or sorts in a large
# memory budget slows every sync sharing the server. temp_file_limit may be set by a superuser alone, so a
# reader cannot raise it; the read door sets its own statement_timeout (--timeout) under this one's role.
STATEMENT_TIMEOUT = "5min"
TEMP_FILE_LIMIT = "1GB"
WORK_MEM = "16MB"
WORKSPACE_ROLE_PREFIX = "scanwatch_ws_"
MAX_IDENTIFIER = 63


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", metavar="NAME", action="append", default=[],
                        help="also a role that reads this workspace's rows and no other's (row-level security on "
                             "every table holding workspace rows); may be given more than once; needs the history")
    parser.add_argument("--apply", action="store_true",
                        help="apply the SQL with --db (an administrator's URL: a superuser, or the tables' owner "
                             "with CREATEROLE) instead of printing it")
    parser.add_argument("--db", help="the history's postgresql:// URL (default: SCANWATCH_DB); needed by "
                                     "--workspace and --apply")
    parser.add_argument("--temp-file-limit", default=TEMP_FILE_LIMIT,
                        help=f"temporary files a reader's query may write (default {TEMP_FILE_LIMIT})")
    parser.add_argument("--statement-timeout", default=STATEMENT_TIMEOUT,
                        help=f"how long a reader's statement may run (default {STATEMENT_TIMEOUT})")
    parser.add_argument("--work-mem", default=WORK_MEM,
                        help=f"memory a reader's sort or hash may take before it spills (default {WORK_MEM})")


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def workspace_role(label: str) -> str:
    return (WORKSPACE_ROLE_PREFIX + label)[:MAX_IDENTIFIER]


def reader_limits(role: str, *, temp_file_limit: str, statement_timeout: str, work_mem: str) -> str:
    """The limits every reading role gets (the reader, Grafana's, each workspace's), from one file."""
    return fill(read_sql("roles/reader_limits.sql"), dict(
        role=ident(role), temp_file_limit=literal(temp_file_limit), statement_timeout=literal(statement_timeout),
        work_mem=literal(work_mem))).rstrip("\n")


def recipe(*, schema: str = "public", temp_file_limit: str = TEMP_FILE_LIMIT,
           statement_timeout: str = STATEMENT_TIMEOUT, work_mem: str = WORK_MEM) -> str:
    """The roles every history has: writer, reader, views and Grafana's, with the revocations."""
    limits = {"temp_file_limit": temp_file_limit, "statement_timeout": statement_timeout, "work_mem": work_mem}
    return fill(read_sql("roles/base.sql"), dict(
        writer=ident(WRITER), reader=ident(READER), views=ident(VIEWS), grafana=ident(GRAFANA),
        schema=ident(schema), reader_limits=reader_limits(READER, **limits),
        grafana_limits=reader_limits(GRAFANA, **limits)))


def workspace_recipe(conn: Connection, label: str, *, schema: str, temp_file_limit: str = TEMP_FILE_LIMIT,
                     statement_timeout: str = STATEMENT_TIMEOUT, work_mem: str = WORK_MEM) -> str:
    """One workspace's role and its policies on every table of the history that holds workspace rows; `conn`
    is a history `Connection`, read to find the workspace's id and the tables."""
    from pipelines.storage.workspace_scope import workspace_id_of

    workspace_id = workspace_id_of(conn, label)
    role = ident(workspace_role(label))
    parts = [fill(read_sql("roles/workspace.sql"), dict(
        role=role, schema=ident(schema),
        limits=reader_limits(workspace_role(label), temp_file_limit=temp_file_limit,
                             statement_timeout=statement_timeout, work_mem=work_mem)))]
    for table, column, has_label, _, _ in conn.execute(read_sql("read/history_tables.sql")).fetchall():
        if column is None:
            parts.append(fill(read_sql("roles/shared_table.sql"), {"table": ident(table), "role": role}))
            continue
        condition = f"{ident(column)} = {literal(workspace_id)}"
        if column == "name":  # a snapshot part is named by the id, or by the followed name before the id is known
            condition += f" OR {ident(column)} = {literal(label)}"
        elif has_label:  # a failed run recorded before its workspace's id was known carries only the name
            condition += f" OR (workspace_id IS NULL AND workspace_label = {literal(label)})"
        parts.append(fill(read_sql("roles/workspace_table.sql"), dict(
            table=ident(table), reader=ident(READER), role=role, condition=condition,
            policy=role)))  # one policy per role: two names of one workspace are two roles
    return "\n".join(parts)


def run(args: argparse.Namespace) -> int:
    from pipelines.core import settings
    from pipelines.core.credentials import ConfigError
    from pipelines.core.history_location import HistoryLocation
    from pipelines.core.text import printable

    limits = {"temp_file_limit": args.temp_file_limit, "statement_timeout": args.statement_timeout,
              "work_mem": args.work_mem}
    if not args.workspace and not args.apply:
        sys.stdout.write(recipe(**limits))
        return 0
    try:
        location = settings.Settings.load().history if args.db is None else HistoryLocation.parse(args.db, "--db")
    except ConfigError as exc:
        print(f"scanwatch roles: {printable(exc)}", file=sys.stderr)
        return 1
    from pipelines.storage.destinations.impl import engine_for

    if not engine_for(location).capabilities.has_roles:
        print(f"scanwatch roles: the history at {location.masked} is a DuckDB file: its readers are whoever may "
              "read the file (docs/workspaces.md); roles are PostgreSQL's", file=sys.stderr)
        return 1
    try:
        text = recipe_for(location, args.workspace, limits)
        if args.apply:
            apply(location, text)
            print(f"scanwatch roles: applied to {location.masked}"
                  + (f" (workspace roles: {', '.join(workspace_role(w) for w in args.workspace)})"
                     if args.workspace else ""))
        else:
            sys.stdout.write(text)
    except RolesRefused as exc:
        print(f"scanwatch roles: {printable(exc)}", file=sys.stderr)
        return 1
    return 0


class RolesRefused(Exception):
    """One line saying why the recipe could not be made or applied."""


def recipe_for(location: HistoryLocation, labels: list[str], limits: dict[str, str]) -> str:
    from pipelines.storage.destinations import HistoryQueryError, HistoryUnavailableError
    from pipelines.storage.destinations.impl import engine_for
    from pipelines.storage.workspace_scope import UnknownWorkspaceError

    try:
        conn = engine_for(location).connect_reader(location)
    except HistoryUnavailableError as exc:
        raise RolesRefused(str(exc)) from None
    try:
        with conn.engine.mapped(conn):
            schema = conn.execute("SELECT current_schema()").fetchone()[0] or "public"
            parts = [recipe(schema=schema, **limits)]
            for label in labels:
                parts.append(workspace_recipe(conn, label, schema=schema, **limits))
            return "\n".join(parts)
    except UnknownWorkspaceError as exc:
        raise RolesRefused(str(exc)) from None
    except HistoryQueryError as exc:
        raise RolesRefused(f"cannot read the history at {location.masked}: {exc.line}") from None
    finally:
        conn.close()


def apply(location: HistoryLocation, text: str) -> None:
    """The whole recipe in one transaction: applied entirely or not at all."""
    from pipelines.storage.destinations import HistoryQueryError, HistoryUnavailableError
    from pipelines.storage.destinations.impl import engine_for

    try:
        # an administrator's role may default to read-only: the transaction says READ WRITE itself
        conn = engine_for(location).connect_reader(location)
    except HistoryUnavailableError as exc:
        raise RolesRefused(str(exc)) from None
    try:
        with conn.engine.mapped(conn):
            conn.execute("BEGIN READ WRITE")
            conn.execute(text)
            conn.execute("COMMIT")
    except (HistoryQueryError, HistoryUnavailableError) as exc:
        line = exc.line if isinstance(exc, HistoryQueryError) else str(exc)
        raise RolesRefused(f"the roles were not applied ({line}): run this as an administrator "
                           "(a superuser, or the tables' owner with CREATEROLE)") from None
    finally:
        conn.close()
