"""The metrics snapshot: what the exporter serves, built from the history after each workspace's run.

The exporter never opens a DuckDB history (a read-write holder locks the file even for readers), so the
pipeline hands it small JSON documents instead: one part per workspace (`pipelines/snapshot/store.py`), as
files in a folder beside a DuckDB history, or as rows of a PostgreSQL history's own `snapshot_parts` table
(`storage/destinations/impl/postgres/snapshot_store.py`), so that run pods and the exporter share no disk. The
database computes every aggregate (`sql/snapshot/*.sql`, one text both engines run, one query per table, each
filtered to the part's workspace first, so a part costs what its workspace holds); this module runs them in one read
transaction, labels the result and replaces the workspace's part atomically. A workspace's run rebuilds its
own part only: a tick of K workspaces costs K builds of one workspace, not K builds of all of them.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.core import milestones, settings, vocabulary
from pipelines.snapshot.catalogue import CRITICAL_INFO_LIMIT, CRITICAL_NEW_LIMIT, TTF_BUCKETS
from pipelines.snapshot.format import SCHEMA_VERSION, TABLES, encode_snapshot
from pipelines.snapshot.labels import LABEL_CAPS
from pipelines.snapshot.store import FileStore, SnapshotStore
from pipelines.storage.entities import ISSUE, SCAN

if TYPE_CHECKING:  # the engines (and duckdb) stay out of the exporter's imports
    from pipelines.core.history_location import HistoryLocation
    from pipelines.storage.destinations import Connection


def _load_queries() -> dict[str, str]:
    from pipelines.core.sqlfiles import read_sql  # one answer to "where are the SQL files" (checkout or wheel)

    return {name: read_sql(f"snapshot/{name}.sql") for name in TABLES}


def _jsonable(value: Any) -> Any:
    # JSON has no NaN/inf; arrays arrive as lists, decimals should not appear (queries cast).
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.timestamp()
    return value


def _run(conn: Connection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    wanted = {k: params[k] for k in _named(sql, tuple(params))}
    cursor = conn.execute(sql, wanted) if wanted else conn.execute(sql)
    columns = [d[0] for d in cursor.description]
    return [{c: _jsonable(v) for c, v in zip(columns, row, strict=True)} for row in cursor.fetchall()]


@functools.lru_cache(maxsize=256)
def _named(sql: str, offered: tuple[str, ...]) -> tuple[str, ...]:
    """The parameters of `offered` that the query names: looked for once per query, not at every part (a
    twentieth of an unchanged workspace's interpreter lock, searched again at each)."""
    return tuple(k for k in offered if re.search(rf"\${k}\b", sql))


def part_name(workspace_id: str | None, label: str | None) -> str:
    """A part's name in the store: the service's workspace id once the history holds it, before that the
    followed name (`default` for the one workspace of the two variables)."""
    return workspace_id or label or settings.DEFAULT_WORKSPACE


@dataclass(frozen=True)
class _Build:
    now: datetime
    sla_days: dict[str, int]
    sla_profiles: dict[str, dict[str, int]]  # the ownership map's named profiles (docs/ownership.md)
    critical_info_limit: int
    critical_new_limit: int

    def params(self) -> dict[str, Any]:
        return {"now": self.now.astimezone(UTC).isoformat(), "ttf_buckets": list(TTF_BUCKETS),
                "critical_limit": self.critical_info_limit, "critical_new_limit": self.critical_new_limit,
                "families": list(ISSUE.enums["family"]), "scan_kinds": list(SCAN.enums["kind"]),
                "hidden_reasons": list(vocabulary.HIDDEN_REASONS),
                "title_cap": LABEL_CAPS["title"], "location_cap": LABEL_CAPS["location"]}

    def header(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION,
            "generated_at": self.now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "generated_at_seconds": self.now.timestamp(),
            "sla_days": self.sla_days,
            "sla_profiles": self.sla_profiles,
            "ttf_buckets": list(TTF_BUCKETS),
            "critical_info_limit": self.critical_info_limit,
            "critical_new_limit": self.critical_new_limit,
        }


def _prepare(conn: Connection, now: datetime, sla_days: dict[str, int] | None,
             critical_info_limit: int, critical_new_limit: int) -> _Build:
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")
    from pipelines.core.sqlfiles import read_sql
    from pipelines.storage.reference import write_sla_policy  # duckdb: not at import, for the exporter

    sla = vocabulary.sla_policy({}, sla_days)
    with conn.engine.session(conn) as writer:  # its own transaction: a caller's open one stays untouched
        # The policy the SQL reads, and the cookbook after it; written only when it changed (each workspace's
        # run builds a part, and the policy moves only with SCANWATCH_SLA_DAYS).
        if dict(writer.execute(read_sql("reference/sla_policy_in_force.sql")).fetchall()) != dict(sla):
            write_sla_policy(writer, sla)
    profiles: dict[str, dict[str, int]] = {}
    for profile, severity, days in conn.execute(read_sql("reference/sla_profiles_in_force.sql")).fetchall():
        profiles.setdefault(profile, {})[severity] = int(days)
    # The cut of new critical issues is counted from listed rows, so at least one is listed.
    return _Build(now, sla, profiles, max(0, int(critical_info_limit)), max(1, int(critical_new_limit)))


def _part(cursor: Connection, build: _Build, queries: dict[str, str], workspace_id: str | None,
          label: str | None) -> dict[str, Any]:
    from pipelines.core.sqlfiles import read_sql

    params = {**build.params(), "workspace_id": workspace_id, "label": label}
    workspace = cursor.execute(read_sql("snapshot/part.sql"), {"workspace_id": workspace_id, "label": label}
                               ).fetchall()[0][0] or part_name(workspace_id, label)
    tables = {name: _run(cursor, sql, params) for name, sql in queries.items()}
    for rows in tables.values():
        for row in rows:
            row["workspace"] = workspace
    return {**build.header(), "workspace_id": workspace_id, "workspace": workspace, "tables": tables}


def build_part(conn: Connection, *, workspace_id: str | None, label: str | None, now: datetime,
               sla_days: dict[str, int] | None = None, critical_info_limit: int = CRITICAL_INFO_LIMIT,
               critical_new_limit: int = CRITICAL_NEW_LIMIT) -> dict[str, Any]:
    """One workspace's part: the workspace the history holds as `workspace_id`, followed as `label` (None for
    the one workspace of the two variables; a workspace never read yet has only its runs, under that name).

    Every query of the part runs in one read transaction, so its tables agree with each other even if a
    writer commits meanwhile. Only committed data is seen: call it after the sync has committed.
    """
    build = _prepare(conn, now, sla_days, critical_info_limit, critical_new_limit)
    queries = _load_queries()
    return conn.engine.read_committed(conn, lambda cursor: _part(cursor, build, queries, workspace_id, label))


def build_parts(conn: Connection, *, now: datetime, sla_days: dict[str, int] | None = None,
                critical_info_limit: int = CRITICAL_INFO_LIMIT,
                critical_new_limit: int = CRITICAL_NEW_LIMIT) -> dict[str, dict[str, Any]]:
    """Every part the history holds (`sql/snapshot/parts.sql`), by name, from one read transaction."""
    from pipelines.core.sqlfiles import read_sql

    build = _prepare(conn, now, sla_days, critical_info_limit, critical_new_limit)
    queries = _load_queries()

    def every(cursor: Connection) -> dict[str, dict[str, Any]]:
        return {part_name(wid, label): _part(cursor, build, queries, wid, label)
                for wid, label in cursor.execute(read_sql("snapshot/parts.sql")).fetchall()}

    return conn.engine.read_committed(conn, every, beside=False)  # written whole before any other part


@dataclass(frozen=True)
class Refreshed:
    location: str  # where the part is (a file, or the history's table), as it may be shown
    bytes: int
    parts: int  # parts written: 1, or every part when the store was empty or a single old file
    warnings: tuple[str, ...] = ()  # about the ownership map, one line each


def store_at(path: Path | None, conn: Connection | None, found: settings.Settings) -> SnapshotStore:
    """The snapshot's store: the folder `path` or `SCANWATCH_SNAPSHOT` (of `found`) names; without either, a
    PostgreSQL history's own `snapshot_parts` table (written on `conn`, the run's connection), else a folder
    beside the DuckDB file."""
    if path is None and conn is not None and conn.engine.capabilities.holds_snapshot and found.snapshot_in_history:
        return conn.engine.snapshot_store(conn, milestones.reached)
    return FileStore(Path(path) if path else found.paths.snapshot, milestone=milestones.reached)


def _record_owners(conn: Connection, workspace_id: str | None, workspace: str | None, label: str | None,
                   now: datetime, found: settings.Settings) -> tuple[str, ...]:
    """The ownership map (`SCANWATCH_OWNERSHIP_FILE`, read again at each run) applied to the workspace's
    projects before its part is built, so the part names each project's team from this sync on. A map that
    became unreadable while scanwatch runs changes nothing: the owners recorded stay, and it is said."""
    from pipelines.core.credentials import ConfigError
    from pipelines.core.sqlfiles import read_sql
    from pipelines.storage.ownership import record_owners

    try:
        ownership = found.ownership
    except ConfigError as exc:
        return tuple(f"the ownership map was not applied, the owners recorded stay: {line}"
                     for line in str(exc).splitlines())
    shown = conn.execute(read_sql("snapshot/part.sql"), {"workspace_id": workspace_id, "label": label}
                         ).fetchall()[0][0]
    names = (workspace or (settings.DEFAULT_WORKSPACE if label is None else label), label, shown)
    with conn.engine.session(conn) as writer:  # its own transactions: a caller's open one stays untouched
        return tuple(record_owners(writer, workspace_id=workspace_id, names=names, ownership=ownership, now=now))


def refresh_snapshot(conn: Connection, *, workspace_id: str | None, label: str | None,
                     path: Path | None = None, now: datetime | None = None,
                     sla_days: dict[str, int] | None = None, critical_info_limit: int = CRITICAL_INFO_LIMIT,
                     critical_new_limit: int = CRITICAL_NEW_LIMIT, workspace: str | None = None,
                     found: settings.Settings | None = None) -> Refreshed:
    """Rebuild one workspace's part from committed history and replace it atomically. The first write to an
    empty store, or over a single-file snapshot of an older scanwatch, writes every part of the history.
    `workspace`: its name in the workspaces file, which the ownership map's rules may name (default: `label`).

    The SLA policy is the settings' (`SCANWATCH_SLA_DAYS`), then `sla_days` over it (the asset's config).
    `found`: the settings the caller was given (the pipeline's resources); read here only for a caller with
    none (a notebook, a test)."""
    found = found or settings.Settings.load()
    store = store_at(path, conn, found)
    name = part_name(workspace_id, label)
    now = now or datetime.now(UTC)
    warnings = _record_owners(conn, workspace_id, workspace, label, now, found)
    options: dict[str, Any] = {"now": now, "sla_days": vocabulary.sla_policy({}, {**found.sla_days,
                                                                                 **(sla_days or {})}),
               "critical_info_limit": critical_info_limit, "critical_new_limit": critical_new_limit}
    if store.needs_all():
        parts = build_parts(conn, **options)
        if name not in parts:
            parts[name] = build_part(conn, workspace_id=workspace_id, label=label, **options)
        milestones.reached("snapshot.built")
        encoded = {n: encode_snapshot(doc) for n, doc in parts.items()}
        store.replace_all(encoded, own=name)
        return Refreshed(store.location(name), len(encoded[name]), len(encoded), warnings)
    data = encode_snapshot(build_part(conn, workspace_id=workspace_id, label=label, **options))
    milestones.reached("snapshot.built")
    store.write(name, data)
    if name != part_name(None, label):  # its runs from before the workspace was read were a part of their own
        store.remove(part_name(None, label))
    return Refreshed(store.location(name), len(data), 1, warnings)


def refresh_after_failure(db: HistoryLocation, label: str | None, *, found: settings.Settings,
                          workspace: str | None = None) -> str | None:
    """Rebuild the part of the workspace followed as `label` whose run failed (in the history `db`), taking
    the history's writer as a sync does; the reason it could not, or None. Dagster skips the snapshot asset
    when an upstream asset fails, and without a fresh part the failure would stay invisible on /metrics until
    the staleness alert."""
    from pipelines.storage import writer
    from pipelines.storage.workspaces import current_workspace

    try:
        with writer(db, wait_seconds=5) as conn:
            refresh_snapshot(conn, workspace_id=current_workspace(conn, label), label=label, workspace=workspace,
                             found=found)
    except Exception as exc:  # the run's own failure is what the user must see, not this one
        return f"{type(exc).__name__}: {exc}"
    return None
