"""Small histories written row by row, for the reconstruction's edge cases.

Times are days relative to the first sync `FIRST_SYNC` (`at(-3, 12)` is 12:00 three days before it).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from pipelines.storage.db import connect

WS = "ws-1"
FIRST_SYNC = dt.datetime(2026, 6, 1, 10, 30, tzinfo=dt.UTC)
DAY0 = FIRST_SYNC.date()


def at(days: float, hours: float = 0) -> dt.datetime:
    midnight = dt.datetime(DAY0.year, DAY0.month, DAY0.day, tzinfo=dt.UTC)
    return midnight + dt.timedelta(days=days, hours=hours)


def day(offset: int) -> dt.date:
    return DAY0 + dt.timedelta(days=offset)


def insert(conn: Any, table: str, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        cols = ", ".join(f'"{c}"' for c in row)
        conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' for _ in row)})", list(row.values()))


def history(db: Path | str, *, projects: list[str], targets: list[tuple[str, str]] = (), scans: list[tuple] = (),
            issues: list[tuple] = (), events: list[tuple] = ()) -> Any:
    """A history first observed at FIRST_SYNC, in a DuckDB file or a PostgreSQL database (`db`, as SCANWATCH_DB
    names it). scans: (id, target, finished_at, score, status);
    issues: (id, project, severity, status, first_seen_at, fixed_at); events: (issue, event, from, to)."""
    conn = connect(db)
    seen = {"first_observed_at": FIRST_SYNC, "last_observed_at": FIRST_SYNC}
    insert(conn, "accounts", [{"workspace_id": WS, "workspace_name": "Acme", "plan": "pro", **seen}])
    insert(conn, "projects", [{"workspace_id": WS, "id": p, "name": p.upper(), **seen} for p in projects])
    insert(conn, "targets", [{"workspace_id": WS, "id": t, "project_id": p, "kind": "domain",
                              "address": f"{t}.example.com", **seen} for t, p in targets])
    project_of = dict(targets)
    insert(conn, "scans", [{"workspace_id": WS, "id": s, "target_id": t, "project_id": project_of[t],
                            "status": status, "score": score, "grade": "C", "created_at": fin - dt.timedelta(minutes=1),
                            "finished_at": fin, **seen} for s, t, fin, score, status in scans])
    insert(conn, "issues", [{"workspace_id": WS, "id": i, "project_id": p, "target_id": "t-any", "severity": sev,
                             "status": st, "first_seen_at": first, "last_seen_at": fixed or FIRST_SYNC,
                             "fixed_at": fixed, **seen} for i, p, sev, st, first, fixed in issues])
    proj = {i[0]: i[1] for i in issues}
    insert(conn, "issue_events", [{"workspace_id": WS, "issue_id": i, "project_id": proj[i],
                                   "observed_at": at(2 + n), "event": e, "from_value": f, "to_value": t}
                                  for n, (i, e, f, t) in enumerate(events)])
    return conn
