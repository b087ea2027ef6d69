"""A first sync of the simulator's world ends with its past reconstructed, agreeing with what the service shows."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx

from tests.backends import rows


def _rows(db: Path | str, sql: str) -> list[tuple]:
    return rows(db, sql)


def _walk(sim, path: str) -> list[dict]:
    out, cursor = [], None
    with httpx.Client(base_url=sim.base_url, headers=sim.headers(), timeout=30) as http:
        while True:
            params = {"limit": 100, **({"starting_after": cursor} if cursor else {})}
            body = http.get(path, params=params).raise_for_status().json()
            out += body["data"]
            if not body["has_more"]:
                return out
            cursor = body["data"][-1]["id"]


def test_the_first_sync_reconstructs_up_to_the_day_before_it(synced) -> None:
    db, _ = synced
    runs = _rows(db, "SELECT first_day, last_day, score_rows, open_issue_rows FROM reconstruction_runs")
    assert len(runs) == 1
    first_day, last_day, score_rows, open_rows = runs[0]
    [(first_observed_day,)] = _rows(db, "SELECT first_observed_day FROM first_observations")
    assert last_day == first_observed_day.fromordinal(first_observed_day.toordinal() - 1)
    assert (last_day - first_day).days > 60 and score_rows > 0 and open_rows > 0
    # Nothing reconstructed is an event, so nothing reconstructed can page.
    assert _rows(db, "SELECT count(*) FROM issue_events e, first_observations f WHERE e.observed_at < "
                     "f.first_observed_at") == [(0,)]


def test_the_last_reconstructed_day_agrees_with_the_service(synced) -> None:
    """The simulator's clock stands before the sync, so the day before it ends in today's state."""
    db, sim = synced
    projects = _walk(sim, "/projects")
    open_now = Counter()
    for p in projects:
        for issue in _walk(sim, f"/projects/{p['id']}/issues"):
            if issue["status"] == "open":
                open_now[(p["id"], issue["severity"])] += 1
    last = _rows(db, "SELECT project_id, severity, open_issues FROM reconstructed_open_issues "
                     "WHERE day = (SELECT max(day) FROM reconstructed_open_issues) AND open_issues > 0")
    assert dict(((p, s), n) for p, s, n in last) == dict(open_now)
    scores = {t["id"]: t["score"] for p in projects for t in p["targets"] if t["score"] is not None}
    rebuilt = _rows(db, "SELECT target_id, score FROM reconstructed_scores "
                        "WHERE day = (SELECT max(day) FROM reconstructed_scores) AND target_id IS NOT NULL")
    assert dict(rebuilt) == scores


def test_scanwatch_backfill_again_changes_nothing(synced) -> None:
    db, _ = synced
    tables = ("reconstructed_scores", "reconstructed_open_issues", "reconstruction_runs")

    def digest() -> list:
        return [sorted(_rows(db, f"SELECT * FROM {t}"), key=repr) for t in tables]

    before = digest()
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "backfill", "--db", str(db)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "0 changed" in done.stdout
    assert digest() == before


def test_a_backfill_of_a_database_never_synced_is_one_line_and_creates_nothing(pg_database: str) -> None:
    """A backfill reads what a sync stored: on an empty PostgreSQL database it says so, with the URL masked, and
    leaves no table behind (it never creates the schema a sync would)."""
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "backfill", "--db", pg_database],
                          capture_output=True, text=True, timeout=120)
    password = pg_database.split(":")[2].split("@")[0]
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "no history at postgresql://postgres:***@" in done.stderr and password not in done.stderr
    assert rows(pg_database, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'") == [(0,)]


def test_the_past_is_kept_as_the_fewest_runs_covering_each_day_once(synced) -> None:
    """The reconstruction's runs (schema 20) give each day of a cell once, as many days as the run recorded,
    and no run is continued by the next day's run of equal values: runs as few as the past allows."""
    db, _ = synced
    [(score_days, open_days)] = _rows(db, "SELECT score_rows, open_issue_rows FROM reconstruction_runs")
    cells = {"reconstructed_scores": ("reconstructed_score_runs", "target_id", ("score", "grade", "scan_id"),
                                      score_days),
             "reconstructed_open_issues": ("reconstructed_open_issue_runs", "severity", ("open_issues",),
                                           open_days)}
    for view, (runs, cell, values, days) in cells.items():
        assert _rows(db, f"SELECT count(*) FROM {view}") == [(days,)], view
        assert _rows(db, f"SELECT count(*) FROM (SELECT 1 FROM {view} GROUP BY workspace_id, project_id, {cell}, day "
                         "HAVING count(*) > 1) AS twice") == [(0,)], view
        same = " AND ".join(f"b.{c} IS NOT DISTINCT FROM a.{c}" for c in ("project_id", cell, *values))
        assert _rows(db, f"SELECT count(*) FROM {runs} AS a JOIN {runs} AS b ON b.workspace_id = a.workspace_id "
                         f"AND b.first_day = a.last_day + 1 AND {same}") == [(0,)], runs
