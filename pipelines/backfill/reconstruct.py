"""Reconstruction: the days before scanwatch first observed a workspace, on either engine of the history.

The database computes everything set-based (`sql/backfill/`, SQL that DuckDB and PostgreSQL both run); this
module only orders the steps. The same temp
tables answer "state at these instants" for the daily rows here and for any step in `tsdb`, so a day's
row and the Prometheus sample at the midnight ending it come from one computation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pipelines.core.sqlfiles import execute_file, read_sql, transaction
from pipelines.core.vocabulary import REMOVAL_REASONS, history_days_params
from pipelines.storage.destinations import Connection

DAY = timedelta(days=1)


@dataclass(frozen=True)
class Reconstruction:
    workspace_id: str
    first_day: date | None
    last_day: date | None
    score_rows: int
    open_issue_rows: int
    rows_changed: int
    recorded: bool  # a reconstruction_runs row was written

    def describe(self) -> str:
        if self.first_day is None or self.last_day is None:
            span = "nothing before the first sync"
        else:
            span = f"{self.first_day} to {self.last_day}"
        return (f"{self.workspace_id}: {span}, {self.score_rows} score rows, {self.open_issue_rows} open-issue rows, "
                f"{self.rows_changed} changed")


def _sql(name: str) -> str:
    return read_sql(f"backfill/{name}.sql")


def _stage(conn: Connection, name: str, params: dict[str, Any] | None = None) -> None:
    """Run `sql/backfill/<name>.sql`, which makes one `_bf_*` temp table or view."""
    execute_file(conn, f"backfill/{name}.sql", params)


def prepare(conn: Connection, workspace_id: str) -> None:
    """Stage one workspace's issue changes and scored scans; bounded by issues and scans, not by days."""
    ws = {"workspace_id": workspace_id}
    drop_temp(conn)  # another workspace's, staged on this connection before (PostgreSQL's views hold their tables)
    _stage(conn, "issue_changes", {**ws, "removal_reasons": list(REMOVAL_REASONS)})
    _stage(conn, "open_running")
    _stage(conn, "open_cells", ws)
    _stage(conn, "target_scans", ws)
    set_instants(conn, datetime(1970, 1, 1, tzinfo=UTC), datetime(1970, 1, 1, tzinfo=UTC), DAY)
    _stage(conn, "open_issues_at")
    _stage(conn, "scores_at")


def set_instants(conn: Connection, start: datetime, stop: datetime, step: timedelta) -> None:
    """The instants the `_bf_open_at` and `_bf_scores_at` views answer for: start, start + step, ... < stop."""
    _stage(conn, "instants", {"start": start, "stop": stop, "step_seconds": int(step.total_seconds())})


def bounds(conn: Connection, workspace_id: str) -> tuple[datetime | None, date | None, date | None]:
    """(first observation, first day to rebuild, last day to rebuild), after `prepare`."""
    rows = conn.execute(_sql("bounds"), {"workspace_id": workspace_id, **history_days_params()}).fetchall()
    if not rows:
        return None, None, None
    first_observed_at, first_day, last_day = rows[0]
    if first_day is None or last_day is None or first_day > last_day:
        return first_observed_at, None, None
    return first_observed_at, first_day, last_day


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def reconstruct_workspace(conn: Connection, workspace_id: str, *, now: datetime) -> Reconstruction:
    """Rebuild one workspace's days before its first observation, in one transaction, changing only what moved.

    A re-run on the same history computes the same rows, so it deletes, inserts and records nothing.
    """
    ws = {"workspace_id": workspace_id}
    try:
        with transaction(conn):
            # Two syncs of one workspace finishing at once take turns here, as their merges do.
            conn.engine.lock_workspace(conn, workspace_id)
            conn.engine.planning_whole_sets(conn)
            prepare(conn, workspace_id)
            first_observed_at, first_day, last_day = bounds(conn, workspace_id)
            if first_day is not None and last_day is not None:
                set_instants(conn, midnight(first_day) + DAY, midnight(last_day) + 2 * DAY, DAY)
            _stage(conn, "daily_scores", ws)
            _stage(conn, "daily_open_issues")
            changed = sum(conn.execute(_sql(name), ws).rowcount for name in (
                "delete_stale_scores", "insert_new_scores", "delete_stale_open_issues", "insert_new_open_issues"))
            score_rows, open_rows = conn.execute(_sql("new_rows")).fetchall()[0]
            first_time = not conn.execute(_sql("reconstructed_before"), ws).fetchall()[0][0]
            recorded = bool(changed) or first_time
            if recorded:
                conn.execute(_sql("record_run"), {**ws, "ran_at": now, "first_observed_at": first_observed_at,
                                                  "first_day": first_day, "last_day": last_day,
                                                  "score_rows": score_rows, "open_issue_rows": open_rows,
                                                  "rows_changed": changed})
    finally:
        drop_temp(conn)
    return Reconstruction(workspace_id, first_day, last_day, score_rows, open_rows, changed, recorded)


def drop_temp(conn: Connection) -> None:
    execute_file(conn, "backfill/drop_temp.sql")


def workspaces(conn: Connection, workspace_id: str | None = None) -> list[tuple[str, bool]]:
    """(workspace_id, reconstructed before) for every workspace scanwatch has observed, or for `workspace_id`
    alone: a workspace's run reads its own rows, not every workspace's (a history may hold a thousand)."""
    return [(ws, bool(done)) for ws, done in
            conn.execute(_sql("workspaces"), {"workspace_id": workspace_id}).fetchall()]


def reconstruct(conn: Connection, *, now: datetime | None = None, only_new: bool = False,
                workspace_id: str | None = None) -> list[Reconstruction]:
    """Reconstruct every observed workspace, or `workspace_id` alone (`only_new`: those never reconstructed,
    as after a first sync).

    A workspace's sync reconstructs its own workspace only: another whose first sync is under way may have
    its account and not yet its issues, and its past reconstructed from that would be recorded as done; and
    a first sync of many workspaces at once would reconstruct each of them once per run, in turn on each
    workspace's lock."""
    now = now or datetime.now(UTC)
    return [reconstruct_workspace(conn, ws, now=now) for ws, done in workspaces(conn, workspace_id)
            if not (only_new and done)]
