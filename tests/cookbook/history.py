"""A small history whose every cookbook answer was worked out by hand (see the tables in the tests).

Times are placed relative to the story's UTC midnight `M` (`at(-3, 12)` is 12:00 three days before it), at
hours chosen so no answer depends on the time of day the tests run: ages that matter start at 00:00, and the
7-day windows hold nothing within hours of their edge. The story's day is today's when the history is built
(`tell(day)`, by the cookbook's conftest), never the day this module was imported: a run that crosses a UTC
midnight builds the history again for the new day instead of asking today's queries about yesterday's.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from pipelines.storage.db import connect
from tests.backends import executemany

WS = "ws-1"
_story: dict[str, dt.date] = {}


def utc_today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def tell(day: dt.date) -> None:
    """Place the story on `day` (its M is that day's UTC midnight)."""
    _story["day"] = day


def today() -> dt.date:
    """The story's day."""
    return _story.setdefault("day", utc_today())


def midnight() -> dt.datetime:
    day = today()
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def at(days: int, hours: float = 0) -> dt.datetime:
    return midnight() + dt.timedelta(days=days, hours=hours)


def projects() -> list[tuple[Any, ...]]:
    """id, name, score, grade, removed_at"""
    return [
        ("p1", "shop", 70, "C", None),
        ("p2", "blog", 90, "A", None),
        ("p3", "gone", 50, "D", at(-30)),
        ("p4", "empty", None, None, None),
    ]


def targets() -> list[tuple[Any, ...]]:
    """id, project, kind, address, verified, hidden_issues, removed_at"""
    return [
        ("t1", "p1", "domain", "shop.example", True, None, None),
        ("t2", "p1", "repository", "acme/shop", True, None, None),
        ("t3", "p2", "domain", "blog.example", False, 4, None),
        ("t4", "p2", "domain", "old.example", False, 2, at(-3)),
        ("t5", "p1", "domain", "staging.shop.example", False, None, None),
    ]


def issues() -> list[tuple[Any, ...]]:
    """id, project, target, control_id, family, severity, status, first_seen_at, fixed_at"""
    return [
        ("i01", "p1", "t1", "tls.weak", "configuration", "critical", "open", at(-9), None),
        ("i02", "p1", "t2", "secrets.aws", "secrets", "critical", "fixed", at(-3), at(-1, 12)),
        ("i03", "p1", "t1", "headers.csp", "configuration", "high", "open", at(-40), None),
        ("i04", "p1", "t1", "headers.csp", "configuration", "medium", "fixed", at(-6, 6), at(-4, 6)),
        ("i05", "p2", "t3", "headers.csp", "configuration", "low", "accepted_risk", at(-8), None),
        ("i06", "p2", "t3", "tls.weak", "configuration", "high", "open", at(-7), None),
        ("i07", "p1", "t2", "code.sqli", "code", "high", "open", at(-2), None),
        ("i08", "p2", "t3", "info.banner", "server", "info", "open", at(-1), None),
        ("i09", "p1", "t1", "headers.csp", "configuration", "low", "false_positive", at(-20), None),
        ("i10", "p2", "t3", "db.exposed", "database", "critical", "fixed", at(-12), at(-11, 12)),
        ("i11", "p2", "t3", "headers.hsts", "configuration", "critical", "open", at(-7), None),
        ("i12", "p1", "t1", "headers.xfo", "configuration", "low", "fixed", at(-4), at(-1, 2)),
    ]


def events() -> list[tuple[Any, ...]]:
    """issue, observed_at, event, from_value, to_value, severity then"""
    return [
        ("i01", at(-9, 1), "opened", None, "open", "critical"),
        ("i02", at(-3, 1), "opened", None, "open", "critical"),
        ("i02", at(-1, 18), "status_changed", "open", "fixed", "critical"),
        ("i03", at(-9, 1), "opened", None, "open", "high"),
        ("i05", at(-8, 1), "opened", None, "open", "low"),
        ("i05", at(-5, 2), "status_changed", "open", "accepted_risk", "low"),
        ("i06", at(-7), "opened", None, "open", "high"),
        ("i06", at(-5, 3), "status_changed", "open", "fixed", "high"),
        ("i06", at(-2, 3), "reopened", "fixed", "open", "high"),
        ("i07", at(-2, 1), "opened", None, "open", "medium"),
        ("i07", at(-1, 5), "severity_changed", "medium", "high", "high"),
        ("i08", at(-1, 1), "opened", None, "open", "info"),
        ("i10", at(-9, 1), "opened", None, "fixed", "critical"),  # first observed already fixed
        ("i11", at(-7), "opened", None, "open", "critical"),
        ("i12", at(-4, 1), "opened", None, "open", "low"),
        ("i12", at(-3, 1), "status_changed", "open", "fixed", "low"),
        # Back and fixed again between two syncs: one sync records both changes at the same moment.
        ("i12", at(-1, 6), "reopened", "fixed", "open", "low"),
        ("i12", at(-1, 6), "status_changed", "open", "fixed", "low"),
    ]


def scores() -> list[tuple[Any, ...]]:
    """observed_at, project, target, score, grade, open_issues, hidden_issues"""
    return [
        (at(-2, 1), "p1", None, 60, "D", 4, None),
        (at(-2, 13), "p1", None, 65, "D", 3, None),
        (at(-1, 1), "p1", None, 70, "C", 3, None),
        (at(-1, 1), "p2", None, 90, "A", 2, None),
        (at(-1, 1), "p1", "t1", 72, "C", 2, None),
        (at(-2, 1), "p2", "t3", 80, "B", 2, 4),
        (at(-1, 1), "p2", "t3", 85, "B", 2, 4),
    ]


def quota_at() -> dt.datetime:
    return at(-1)


def quotas() -> list[tuple[Any, ...]]:
    """observed_at, quota, limit, used, remaining, period_start, period_end"""
    return [
        (at(-2), "quick_scans", 100, 40, 60, at(-11), at(19)),
        (quota_at(), "quick_scans", 100, 50, 50, at(-11), at(19)),
        (quota_at(), "audits", 60, 10, 50, at(-11), at(19)),
        (quota_at(), "fixes", 30, 30, 0, at(-11), at(19)),
    ]


def sync_runs(now: dt.datetime) -> list[tuple[Any, ...]]:
    """Relative to the moment the history is built, since sync health is about the last hours."""
    h = dt.timedelta(hours=1)
    return [
            # run_id, asset, started_at, finished_at, status, requests, retries, rate_limited, rows, error
            ("r1", "issues", now - 3 * h, now - 3 * h + dt.timedelta(seconds=30), "success", 40, 0, 0, 11, None),
            ("r2", "issues", now - h, now - h + dt.timedelta(seconds=5), "failure", 3, 2, 1, 0, "rate limited"),
            ("r0", "projects", now - 30 * h, now - 30 * h, "failure", 1, 0, 0, 0, "connection refused"),
            ("r1", "projects", now - 2 * h, now - 2 * h + dt.timedelta(seconds=10), "success", 2, 0, 0, 4, None),
            ("r2", "projects", now - h, now - h + dt.timedelta(seconds=12.5), "success", 2, 0, 0, 4, None),
    ]


def _insert(con: Any, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """Rows through the engine's own driver."""
    cols = ", ".join(f'"{c}"' for c in columns)
    executemany(con, f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' for _ in columns)})", rows)


def build(db: Path | str) -> dt.datetime:
    """Create the schema from the migrations, as the pipeline does, then write the history above: in a DuckDB
    file (a path) or a PostgreSQL database (a URL)."""
    con = connect(db)
    try:
        seen = at(-40)
        _insert(con, "accounts",
                ["workspace_id", "workspace_name", "plan", "first_observed_at", "last_observed_at"],
                [(WS, "Acme Corp", "pro", seen, midnight())])
        _insert(
            con,
            "projects",
            ["workspace_id", "id", "name", "score", "grade", "open_issues", "paused", "first_observed_at",
             "last_observed_at", "removed_at"],
            [(WS, i, n, s, g, 0, False, seen, midnight(), r) for i, n, s, g, r in projects()],
        )
        _insert(
            con,
            "targets",
            ["workspace_id", "id", "project_id", "kind", "address", "verified", "hidden_issues",
             "first_observed_at", "last_observed_at", "removed_at"],
            [(WS, i, p, k, a, v, h, seen, midnight(), r) for i, p, k, a, v, h, r in targets()],
        )
        address = {t[0]: t[3] for t in targets()}
        _insert(
            con,
            "issues",
            ["workspace_id", "id", "project_id", "target_id", "address", "control_id", "family", "severity",
             "status", "title", "first_seen_at", "last_seen_at", "fixed_at", "first_observed_at", "last_observed_at"],
            [
                (WS, i, p, t, address[t], c, f, sev, st, f"{c} on {address[t]}", first, fixed or at(-1), fixed,
                 max(first, at(-9)), at(-1))
                for i, p, t, c, f, sev, st, first, fixed in issues()
            ],
        )
        project_of = {i[0]: (i[1], i[2]) for i in issues()}
        _insert(
            con,
            "issue_events",
            ["workspace_id", "issue_id", "project_id", "target_id", "severity", "observed_at", "event",
             "from_value", "to_value"],
            [(WS, i, *project_of[i], sev, o, e, f, t) for i, o, e, f, t, sev in events()],
        )
        _insert(
            con,
            "score_snapshots",
            ["workspace_id", "observed_at", "project_id", "target_id", "score", "grade", "open_issues",
             "hidden_issues"],
            [(WS, *row) for row in scores()],
        )
        _insert(
            con,
            "quota_snapshots",
            ["workspace_id", "observed_at", "quota", "limit", "used", "remaining", "period_start", "period_end"],
            [(WS, *row) for row in quotas()],
        )
        now = dt.datetime.now(dt.UTC)
        _insert(
            con,
            "sync_runs",
            ["workspace_id", "run_id", "asset", "started_at", "finished_at", "status", "requests", "retries",
             "rate_limited", "rows_written", "error"],
            [(WS, *row) for row in sync_runs(now)],
        )
    finally:
        con.close()
    return now
