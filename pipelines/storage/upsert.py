"""Merge statements generated from an entity's column list, as dlt generates its merge jobs.

The statement shapes live in `sql/merge/upsert.sql` and `sql/merge/unchanged.sql`; only their `{slot}`s are
filled in here (`sqlfiles.fill`): the column lists from `Entity.columns`, and the row hash from the history's
engine, so a field added to an entity (and its migration) reaches the stage, the unchanged test, the UPDATE
and the INSERT with no other edit.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.core.sqlfiles import fill, read_sql
from pipelines.storage.destinations import Connection, Engine
from pipelines.storage.destinations.impl import DUCKDB
from pipelines.storage.entities import Entity


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _fields(entity: Entity, engine: Engine) -> dict[str, str]:
    columns = ", ".join(quote(c) for c in entity.columns)
    return {
        "table": quote(entity.name),
        "stage": quote(f"stg_{entity.name}"),
        "key": quote(entity.key),
        "columns": columns,
        "staged": ", ".join(f"s.{quote(c)}" for c in entity.columns),
        "row_hash": engine.row_hash(columns),
        "updates": ", ".join(f"{quote(c)} = {entity.update_rules.get(c, f's.{quote(c)}')}" for c in entity.columns
                             if c != entity.key and c not in entity.immutable),
        "revive": ", removed_at = NULL" if entity.tracks_removal else "",
    }


def statements(template: str, entity: Entity, engine: Engine = DUCKDB) -> str:
    """`template` (`upsert` or `unchanged`) filled for `entity` on `engine`: the SQL that runs, for reading or
    testing."""
    return fill(read_sql(f"merge/{template}.sql"), _fields(entity, engine))


def touch_unchanged(conn: Connection, entity: Entity) -> None:
    """Mark the staged rows the history holds as they are seen, and take them out of the stage."""
    conn.execute(statements("unchanged", entity, conn.engine))


def upsert(conn: Connection, entity: Entity) -> None:
    """Write the staged rows of `entity` into its table (update the known ones, insert the new)."""
    conn.execute(statements("upsert", entity, conn.engine))


def rows_digest(engine: Engine, tables: Sequence[tuple[Entity, str, str]]) -> str:
    """An expression for the digest of a list's rows as they are now: per (entity, table, condition), the
    count of the rows `condition` picks and the sum of the engine's row hash over every API field of the
    entity. A row another writer touched, added or took out of the list moves it."""
    return " || '/' || ".join(
        f"(SELECT CAST(count(*) AS VARCHAR) || ':' || coalesce(CAST(sum("
        f"{engine.row_hash(', '.join(quote(c) for c in entity.columns))}) AS VARCHAR), '') "
        f"FROM {quote(table)} WHERE {condition})" for entity, table, condition in tables)


def digest_counts(digest: object) -> tuple[int, ...]:
    """The row counts a `rows_digest` holds, one per table in its order: read where the digest is made, so its
    form has one home."""
    return tuple(int(part.split(":", 1)[0]) for part in str(digest).split("/"))
