"""A small, hand-checked history: every aggregate the snapshot tests assert can be recounted by eye.

Shared by the exporter, Prometheus and Grafana tests (and usable as a demo fixture), so each layer is
checked against the same known numbers.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb

from pipelines.storage import migrate
from pipelines.storage.destinations import Connection
from tests.helpers import history

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 1, tzinfo=UTC)
DAY = 86400.0


def fresh_db(path: Path | str = ":memory:") -> Connection:
    conn = history(duckdb.connect(str(path)))
    migrate(conn)
    return conn


ACCOUNTS = [
    # workspace_id, name, plan, allowed, trial_ends_at, period_start, period_end, free_fixes, pack scans, pack fixes,
    # projects limit, used, paused
    ("ws-1", "Acme", "pro", True, None, "2026-10-15", "2026-11-14", 0, 5, 2, 3, 2, 1),
    ("ws-2", "Beta", "solo", True, "2026-11-03", "2026-10-20", "2026-11-19", 3, 0, 0, 1, 1, 0),
]
PROJECTS = [
    # workspace, id, name, score, grade, open_issues, paused, removed_at
    ("ws-1", "p1", "Shop", 72, "C", 5, False, None),
    ("ws-1", "p2", "Blog", 90, "A", 1, True, None),
    ("ws-1", "p3", "Old", 50, "D", 0, False, "2026-10-01"),
    ("ws-2", "p4", "Lab", None, None, 0, False, None),
]
TARGETS = [
    # workspace, id, project, kind, address, verified, score, grade, hidden
    ("ws-1", "t1", "p1", "domain", "shop.example.com", True, 70, "C", None),
    ("ws-1", "t2", "p1", "repository", "acme/shop", True, 75, "C", None),
    ("ws-1", "t3", "p2", "domain", "blog.example.com", False, None, None, 4),
]
# s1 was asked as an audit: the site's proof had lapsed, so the service ran a quick scan (audit_fallback).
AUDIT_FALLBACK_SCANS = {"s1"}
SCANS = [
    # workspace, id, target, project, kind, status, coverage, created_at, finished_at
    ("ws-1", "s1", "t1", "p1", "quick", "done", 0.8, "2026-10-30T10:00:00Z", "2026-10-30T10:01:00Z"),
    ("ws-1", "s2", "t1", "p1", "audit", "failed", None, "2026-10-31T10:00:00Z", "2026-10-31T10:05:00Z"),
    ("ws-1", "s3", "t2", "p1", "repository", "done", 0.5, "2026-10-29T10:00:00Z", "2026-10-29T10:03:00Z"),
    ("ws-1", "s4", "t3", "p2", "quick", "queued", None, "2026-10-31T23:59:00Z", None),
]
ISSUES = [
    # id, project, target, family, severity, status, first_seen_at, fixed_at
    ("i1", "p1", "t1", "secrets", "critical", "open", "2026-10-30", None),
    ("i2", "p1", "t1", "configuration", "high", "open", "2026-10-05", None),
    ("i3", "p1", "t2", "vulnerableVersions", "medium", "open", "2026-07-01", None),
    ("i4", "p1", "t1", "server", "high", "fixed", "2026-10-01", "2026-10-02"),
    ("i5", "p1", "t1", "database", "critical", "fixed", "2026-10-10", "2026-10-10T02:00:00Z"),
    ("i6", "p1", "t2", "code", "low", "false_positive", "2026-10-15", None),
    ("i7", "p1", "t1", "secrets", "critical", "open", "2026-10-20", None),
    ("i9", "p1", "t1", "database", "critical", "open", "2026-10-25", None),
    ("i8", "p2", "t3", "aiModels", "info", "open", "2026-01-01", None),
]
EVENTS = [
    # issue, project, severity, observed_at, event, from, to
    ("i1", "p1", "critical", "2026-10-30", "opened", None, "open"),
    ("i2", "p1", "high", "2026-10-05", "opened", None, "open"),
    ("i3", "p1", "medium", "2026-07-01", "opened", None, "open"),
    ("i4", "p1", "high", "2026-10-01", "opened", None, "open"),
    ("i4", "p1", "high", "2026-10-02", "status_changed", "open", "fixed"),
    ("i5", "p1", "critical", "2026-10-10", "opened", None, "open"),
    ("i5", "p1", "critical", "2026-10-10T02:00:00Z", "status_changed", "open", "fixed"),
    ("i6", "p1", "low", "2026-10-15", "opened", None, "open"),
    ("i6", "p1", "low", "2026-10-16", "status_changed", "open", "false_positive"),
    ("i7", "p1", "high", "2026-10-20", "opened", None, "open"),
    ("i7", "p1", "critical", "2026-10-22", "severity_changed", "high", "critical"),
    ("i9", "p1", "critical", "2026-10-25", "opened", None, "open"),
    ("i9", "p1", "critical", "2026-10-26", "status_changed", "open", "fixed"),
    ("i9", "p1", "critical", "2026-10-28", "reopened", "fixed", "open"),
    ("i8", "p2", "info", "2026-01-01", "opened", None, "open"),
]
QUOTAS = [
    # workspace, observed_at, quota, limit, used, remaining
    ("ws-1", "2026-10-31T12:00:00Z", "quick_scans", 100, 10, 90),
    ("ws-1", "2026-10-31T23:31:00Z", "quick_scans", 100, 12, 88),
    ("ws-1", "2026-10-31T23:31:00Z", "audits", 60, 60, 0),
    ("ws-1", "2026-10-31T23:31:00Z", "fixes", 30, 3, 27),
]
SYNC_RUNS = [
    # workspace, run, asset, started, finished, status, requests, retries, rate_limited, remaining, rows
    ("ws-1", "r1", "account", "2026-10-31T23:00:00Z", "2026-10-31T23:00:10Z", "success", 2, 0, 0, 118, 1),
    ("ws-1", "r1", "issues", "2026-10-31T23:00:10Z", "2026-10-31T23:00:40Z", "failure", 30, 3, 2, 5, 0),
    ("ws-1", "r2", "issues", "2026-10-31T23:30:00Z", "2026-10-31T23:31:00Z", "success", 40, 1, 1, 60, 9),
]


def load_history(conn: Connection) -> None:
    """Insert the known history (see the module constants) into a fresh database."""
    seen = "2026-10-31T23:31:00Z"
    for a in ACCOUNTS:
        conn.execute(
            "INSERT INTO accounts (workspace_id, workspace_name, plan, api_access_allowed, trial_ends_at, period_start,"
            " period_end, free_fixes_left, pack_credits_scans, pack_credits_fixes, projects_limit, projects_used,"
            " projects_paused, addresses_per_project, features, service_version, first_observed_at, last_observed_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,20,?,'2026-10-13',?,?)",
            [*a, '{"full_audit": true, "repositories": true, "ai_fix": false, "alerts": true}', seen, seen],
        )
    for ws, pid, name, score, grade, open_issues, paused, removed in PROJECTS:
        conn.execute(
            "INSERT INTO projects VALUES (?,?,?,?,?,?,?,'2026-10-31T10:05:00Z',?,?,?)",
            [ws, pid, name, score, grade, open_issues, paused, seen, seen, removed],
        )
    for ws, tid, pid, kind, address, verified, score, grade, hidden in TARGETS:
        conn.execute(
            "INSERT INTO targets VALUES (?,?,?,?,?,?,?,?,'2026-10-31T10:05:00Z',?,?,?,NULL)",
            [ws, tid, pid, kind, address, verified, score, grade, hidden, seen, seen],
        )
    for ws, sid, tid, pid, kind, status, coverage, created, finished in SCANS:
        conn.execute(
            "INSERT INTO scans VALUES (?,?,?,?,?,?,NULL,NULL,?,?,false,NULL,?,?,?,?)",
            [ws, sid, tid, pid, kind, status, coverage, sid in AUDIT_FALLBACK_SCANS, created, finished, seen, seen],
        )
    for iid, pid, tid, family, severity, status, first_seen, fixed_at in ISSUES:
        ws = "ws-1"
        conn.execute(
            "INSERT INTO issues (workspace_id, id, project_id, target_id, address, control_id, family, severity,"
            " confidence, status, title, explanation, detail, location, evidence, fix_unlocked, first_seen_at,"
            " last_seen_at, fixed_at, first_observed_at, last_observed_at)"
            " VALUES (?,?,?,?,'shop.example.com',?,?,?,'confirmed',?,'A title','x','y','/loc','ev',false,?,?,?,?,?)",
            [ws, iid, pid, tid, f"ctl-{family}", family, severity, status, first_seen, seen, fixed_at, first_seen,
             seen],
        )
    for iid, pid, severity, at, event, old, new in EVENTS:
        conn.execute(
            "INSERT INTO issue_events VALUES ('ws-1',?,?,NULL,?,?,?,?,?)", [iid, pid, severity, at, event, old, new]
        )
    for ws, at, quota, limit, used, remaining in QUOTAS:
        conn.execute(
            "INSERT INTO quota_snapshots VALUES (?,?,?,?,?,?,'2026-10-15','2026-11-14')",
            [ws, at, quota, limit, used, remaining],
        )
    for ws, run, asset, started, finished, status, req, retries, limited, remaining, rows in SYNC_RUNS:
        conn.execute(
            "INSERT INTO sync_runs VALUES (?,?,?,?,?,?,?,?,?,?,?,'2026-10-13',NULL,NULL)",
            [ws, run, asset, started, finished, status, req, retries, limited, remaining, rows],
        )


def add_critical_arrival(conn: Connection) -> None:
    """A critical issue first seen after the history's first successful issues sync (2026-10-31T23:31), so
    the snapshot lists it as a new critical issue; the known history alone has none (all its events are
    the first deployment's backlog)."""
    at = "2026-10-31T23:45:00Z"
    conn.execute(
        "INSERT INTO issues (workspace_id, id, project_id, target_id, address, control_id, family, severity, status,"
        " title, location, first_seen_at, last_seen_at, first_observed_at, last_observed_at)"
        " VALUES ('ws-1','i10','p1','t2','acme/shop','code.sqli','code','critical','open','SQL injection',"
        " 'src/a.py:3@c1',?,?,?,?)", [at, at, at, at])
    conn.execute("INSERT INTO issue_events VALUES ('ws-1','i10','p1','t2','critical',?,'opened',NULL,'open')", [at])
