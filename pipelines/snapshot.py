"""The metrics snapshot: what the exporter serves, built from the DuckDB history after each sync.

The exporter must never open the database (a read-write holder locks the file even for readers), so the
pipeline hands it a small JSON document instead. DuckDB computes every aggregate (`sql/snapshot/*.sql`,
one query per table); this module only runs them in one read transaction, labels the result and writes
it atomically, so a scrape sees either the previous snapshot or the new one, never half of either.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exporters.snapshot_format import SCHEMA_VERSION, TABLES, encode_snapshot
from pipelines import milestones, settings, vocabulary

if TYPE_CHECKING:  # duckdb stays out of the exporter's imports
    import duckdb

# An open issue is "due soon" once less than this share of its SLA window is left.
DUE_SOON_FRACTION = 0.25
# Upper bounds of the time-to-fix histogram, seconds: 1h, 4h, 12h, 1d, 3d, 7d, 14d, 30d, 90d, 180d, 365d.
TTF_BUCKETS: tuple[float, ...] = (
    3600.0, 14400.0, 43200.0, 86400.0, 259200.0, 604800.0, 1209600.0, 2592000.0, 7776000.0, 15552000.0,
    31536000.0,
)
# Most new critical issues listed per workspace (SecscanNewCriticalIssue pages on each listed one).
CRITICAL_NEW_LIMIT = 100


def _load_queries() -> dict[str, str]:
    from pipelines.sqlfiles import read_sql  # one answer to "where are the SQL files" (checkout or wheel)

    return {name: read_sql(f"snapshot/{name}.sql") for name in TABLES}


def _jsonable(value: Any) -> Any:
    # JSON has no NaN/inf; DuckDB lists arrive as lists, decimals should not appear (queries cast).
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.timestamp()
    return value


def _run(conn: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    wanted = {k: v for k, v in params.items() if re.search(rf"\${k}\b", sql)}
    cursor = conn.execute(sql, wanted) if wanted else conn.execute(sql)
    columns = [d[0] for d in cursor.description]
    return [{c: _jsonable(v) for c, v in zip(columns, row, strict=True)} for row in cursor.fetchall()]


def build_snapshot(
    conn: duckdb.DuckDBPyConnection,
    *,
    now: datetime,
    sla_days: dict[str, int] | None = None,
    critical_info_limit: int = 50,
    critical_new_limit: int = CRITICAL_NEW_LIMIT,
) -> dict:
    """Aggregate the whole history (every workspace) into the document the exporter serves.

    All queries run in one read transaction on a cursor, so the tables agree with each other even if a
    writer commits meanwhile. Only committed data is seen: call it after the sync has committed.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")
    from pipelines.storage.reference import write_sla_policy  # duckdb: not at import, for the exporter

    sla_days = vocabulary.sla_policy({}, sla_days)
    writer = conn.cursor()  # its own transaction: a caller's open one stays untouched
    try:
        write_sla_policy(writer, sla_days)  # the policy the SQL reads, and the cookbook after it
    finally:
        writer.close()
    params: dict[str, Any] = {
        "now": now.astimezone(UTC).isoformat(),
        "due_soon_fraction": DUE_SOON_FRACTION,
        "ttf_buckets": list(TTF_BUCKETS),
        "critical_limit": max(0, int(critical_info_limit)),
        "critical_new_limit": max(1, int(critical_new_limit)),  # the cut is counted from listed rows
    }
    queries = _load_queries()
    # A cursor is a second connection to the same database: its own transaction gives every query the
    # same committed state, and never touches (or aborts) a transaction the caller may hold open.
    cursor = conn.cursor()
    try:
        cursor.execute("BEGIN TRANSACTION")
        tables = {name: _run(cursor, sql, params) for name, sql in queries.items()}
        cursor.execute("ROLLBACK")
    finally:
        cursor.close()
    return {
        "schema": SCHEMA_VERSION,
        "generated_at": now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "generated_at_seconds": now.timestamp(),
        "sla_days": sla_days,
        "due_soon_fraction": DUE_SOON_FRACTION,
        "ttf_buckets": list(TTF_BUCKETS),
        "critical_info_limit": params["critical_limit"],
        "critical_new_limit": params["critical_new_limit"],
        "tables": tables,
    }


def refresh_snapshot(conn: duckdb.DuckDBPyConnection, *, path: Path | None = None, now: datetime | None = None,
                     sla_days: dict[str, int] | None = None, critical_info_limit: int = 50,
                     critical_new_limit: int = CRITICAL_NEW_LIMIT) -> Path:
    """Build the snapshot from committed history and replace the file atomically.

    Also called after a failed run (the CLI's failure path and the run-failure sensor): Dagster skips this
    asset when an upstream one fails, and without a fresh snapshot the failure would stay invisible on
    /metrics until the staleness alert.
    """
    path = path or settings.Settings.load().paths.snapshot
    snapshot = build_snapshot(conn, now=now or datetime.now(UTC), critical_info_limit=critical_info_limit,
                              critical_new_limit=critical_new_limit,
                              sla_days=vocabulary.sla_policy(overrides=sla_days))
    milestones.reached("snapshot.built")
    write_snapshot(snapshot, path)
    return path


def _remove_stale_temp_files(path: Path, *, older_than_seconds: float = 600.0) -> None:
    """A writer killed mid-write leaves its temp file; a live writer's file is recent, so it stays."""
    cutoff = time.time() - older_than_seconds
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            if leftover.stat().st_mtime < cutoff:
                leftover.unlink()
        except OSError:  # another writer removed it first
            continue


def write_snapshot(snapshot: dict, path: Path) -> None:
    """Replace the snapshot atomically: a temp file in the same directory, fsync, then os.replace.

    A reader opening the path at any moment gets a complete document, old or new.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = encode_snapshot(snapshot)
    _remove_stale_temp_files(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data[: len(data) // 2])
            milestones.reached("snapshot.mid_write")
            fh.write(data[len(data) // 2 :])
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        milestones.reached("snapshot.before_replace")
        os.replace(tmp, path)
        milestones.reached("snapshot.replaced")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable; not every filesystem allows opening a directory
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


