"""The history dashboard (Grafana's PostgreSQL data source) against a real PostgreSQL after real syncs.

Two syncs of the simulator's world into a PostgreSQL history, with a fixed issue found open again and an open
critical one fixed between them. Then each panel's SQL runs as Grafana would send it (`$workspace` as the
quoted list of the variable's values, `$__timeFilter` expanded as Grafana's macro engine writes it), as the
role Grafana's data source would use (a member of `scanwatch_views`, which the writer grants SELECT on the
views and nothing else), and returns the rows the service's own state says (`tests/service_truth.py`, an
independent walk of the API): never the history's tables read back. An ownership map gives the project of the
issue found open again to the team `payments`; every other project is `unowned` (docs/ownership.md).
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pipelines.core.vocabulary import DEFAULT_SLA_DAYS
from simulator.testing import SimConfig, serve_simulator
from tests import backends, service_truth
from tests.grafana.queries import expand_sql, load_dashboards, panels, sql_queries

pytestmark = pytest.mark.timeout(600)
GRAFANA_ROLE = "scanwatch_grafana"


@dataclass
class Synced:
    grafana_url: str  # the history, as Grafana's data source role
    writer_url: str
    before: service_truth.Truth
    after: service_truth.Truth
    payments: str  # the project the ownership map gives to `payments`


@pytest.fixture(scope="module")
def synced(pg_server, tmp_path_factory) -> Iterator[Synced]:
    password = secrets.token_hex(8)
    pg_server.psql("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'scanwatch_views') THEN "
                   "CREATE ROLE scanwatch_views NOLOGIN; END IF; "
                   f"IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{GRAFANA_ROLE}') THEN "
                   f"CREATE ROLE {GRAFANA_ROLE} LOGIN IN ROLE scanwatch_views; END IF; END $$")
    pg_server.psql(f"ALTER ROLE {GRAFANA_ROLE} PASSWORD '{password}'")
    name = pg_server.create_database()
    writer = pg_server.url(name)
    with serve_simulator(SimConfig(seed=11, scale="small", clock="driven", rate_limit=100000)) as sim, \
            pytest.MonkeyPatch.context() as mp:
        backends.point_at(mp, sim, writer)
        first = backends.sync_history()
        assert first.success, backends.failure(first)
        before = service_truth.walk(sim.base_url, sim.api_key)
        issues = before.issues()
        came_back = min(i for i, x in issues.items() if x["status"] == "fixed")
        fixed_now = min(i for i, x in issues.items() if x["status"] == "open" and x["severity"] == "critical")
        sim.advance(3600)
        sim.scan_finds(came_back, status="open")
        sim.scan_finds(fixed_now, status="fixed")
        second = backends.sync_history(full_reconcile=True)
        assert second.success, backends.failure(second)
        after = service_truth.walk(sim.base_url, sim.api_key)
        payments = _issue_projects(after)[came_back]
        ownership = tmp_path_factory.mktemp("ownership") / "ownership.yml"
        ownership.write_text(f"rules:\n  - team: payments\n    project_id: {payments}\n")
        mp.setenv("SCANWATCH_OWNERSHIP_FILE", str(ownership))
        _record_owners(writer, sim.workspace_id)
    yield Synced(pg_server.url(name, user=GRAFANA_ROLE, password=password), writer, before, after, payments)


def _record_owners(writer: str, workspace_id: str) -> None:
    """The sync's metrics snapshot step, which applies the ownership map to the history's projects."""
    from pipelines.storage.db import connect
    from pipelines.sync.snapshot import refresh_snapshot

    conn = connect(writer)
    try:
        refresh_snapshot(conn, workspace_id=workspace_id, label=None)
    finally:
        conn.close()


def _as_grafana(url: str, sql: str) -> list[dict[str, Any]]:
    """One query on Grafana's connection: its role, a read-only session."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = on")
        cursor = conn.execute(sql)
        columns = [d.name for d in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def _panel_sql(title: str) -> str:
    (query,) = [q for q in sql_queries() if q.kind == "panel" and q.title == title]
    return query.expr


def _run(synced: Synced, title: str, *, start: datetime, end: datetime, workspaces: list[str] | None = None,
         teams: list[str] | None = None) -> list[dict[str, Any]]:
    """A panel's rows with the variables at All (Grafana's list of every value), or at the values given."""
    if workspaces is None:
        workspaces = [r["workspace"] for r in _as_grafana(synced.grafana_url, _variable_sql())]
    if teams is None:
        teams = _teams(synced, workspaces)
    return _as_grafana(synced.grafana_url, expand_sql(_panel_sql(title), workspaces=workspaces, start=start,
                                                      end=end, teams=teams))


def _variable_sql(name: str = "workspace") -> str:
    (query,) = [q for q in sql_queries() if q.kind == "variable" and q.title == name]
    return query.expr


def _teams(synced: Synced, workspaces: list[str]) -> list[str]:
    start, end = _window()
    sql = expand_sql(_variable_sql("team"), workspaces=workspaces, start=start, end=end)
    return [r["team"] for r in _as_grafana(synced.grafana_url, sql)]


def _instant(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _project_names(truth: service_truth.Truth) -> dict[str, str]:
    return {pid: p.get("name") or pid for pid, p in truth.projects().items()}


def _issue_projects(truth: service_truth.Truth) -> dict[str, str]:
    return {i["id"]: pid for pid, rows in truth.state.issues.items() for i in rows}


def _window() -> tuple[datetime, datetime]:
    """The dashboard's default range, last 30 days, as Grafana would ask it now."""
    end = datetime.now(UTC)
    return end - timedelta(days=30), end


def test_the_workspace_variable_lists_the_workspace_by_its_metrics_name(synced: Synced) -> None:
    assert _as_grafana(synced.grafana_url, _variable_sql()) == [{"workspace": synced.after.account["workspace"]
                                                                 ["name"]}]


def test_open_critical_issues_are_the_services_with_their_text(synced: Synced) -> None:
    truth = synced.after
    names, project_of = _project_names(truth), _issue_projects(truth)
    want = sorted(
        (_instant(i["first_seen_at"]), names[project_of[iid]], i["title"], i["address"], i["location"], iid)
        for iid, i in truth.issues().items() if i["status"] == "open" and i["severity"] == "critical")
    start, end = _window()
    got = [(r["first_seen"], r["project"], r["title"], r["address"], r["location"], r["issue_id"])
           for r in _run(synced, "Open critical issues", start=start, end=end)]
    assert len(want) > 5 and sorted(got) == want
    assert [g[0] for g in got] == sorted(g[0] for g in got)  # oldest first
    fixed_between = [iid for iid, i in synced.before.issues().items() if i["status"] == "open"
                     and i["severity"] == "critical" and truth.issues()[iid]["status"] == "fixed"]
    assert fixed_between and not {g[-1] for g in got} & set(fixed_between)


def _percentile(values: list[float], q: float) -> float:
    """PostgreSQL's percentile_cont: linear between the two nearest ranks."""
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def test_time_to_fix_by_project_counts_the_fixes_of_the_time_range(synced: Synced) -> None:
    truth = synced.after
    names, project_of = _project_names(truth), _issue_projects(truth)
    start, end = _window()
    samples: dict[str, list[float]] = {}
    for iid, i in truth.issues().items():
        fixed_at = _instant(i["fixed_at"])
        if i["status"] == "fixed" and fixed_at is not None and start <= fixed_at <= end:
            seconds = max((fixed_at - _instant(i["first_seen_at"])).total_seconds(), 0.0)
            samples.setdefault(project_of[iid], []).append(seconds)
    rows = _run(synced, "Time to fix by project", start=start, end=end)
    got = {r["project_id"]: (r["project"], r["fixed"], r["mean"], r["p50"], r["p90"]) for r in rows}
    assert len(samples) >= 2 and set(got) == set(samples)
    for pid, values in samples.items():
        project, fixed, mean, p50, p90 = got[pid]
        assert (project, fixed) == (names[pid], len(values))
        assert math.isclose(mean, sum(values) / len(values), rel_tol=1e-9)
        assert math.isclose(p50, _percentile(values, 0.5), rel_tol=1e-9)
        assert math.isclose(p90, _percentile(values, 0.9), rel_tol=1e-9)
    # A narrower range takes fewer fixes: the macro bounds the sample.
    narrow = _run(synced, "Time to fix by project", start=end - timedelta(days=3), end=end)
    assert sum(r["fixed"] for r in narrow) < sum(r["fixed"] for r in rows)


def _breaches(truth: service_truth.Truth, now: datetime) -> set[str]:
    out = set()
    for iid, i in truth.issues().items():
        days = DEFAULT_SLA_DAYS.get(i["severity"])
        if i["status"] == "open" and days is not None and now > _instant(i["first_seen_at"]) + timedelta(days=days):
            out.add(iid)
    return out


def test_sla_breaches_are_the_open_issues_past_the_policy(synced: Synced) -> None:
    truth = synced.after
    start, end = _window()
    earlier = _breaches(truth, datetime.now(UTC))
    rows = _run(synced, "SLA breaches", start=start, end=end)
    later = _breaches(truth, datetime.now(UTC))
    got = {r["issue_id"] for r in rows}
    assert len(earlier) > 5 and earlier <= got <= later  # a breach may fall between the two clocks
    for r in rows:
        issue = truth.issues()[r["issue_id"]]
        assert (r["severity"], r["sla_days"], r["title"]) == (issue["severity"], DEFAULT_SLA_DAYS[issue["severity"]],
                                                               issue["title"])
        assert r["overdue"] > 0
    assert [r["overdue"] for r in rows] == sorted((r["overdue"] for r in rows), reverse=True)


def test_regressions_are_the_issues_found_open_again(synced: Synced) -> None:
    expected = {iid for (iid, event, _, _), n in service_truth.expected_events(synced.before, synced.after).items()
                if event == "reopened" and n}
    truth = synced.after
    start, end = _window()
    rows = _run(synced, "Regressions", start=start, end=end)
    assert expected and {r["issue_id"] for r in rows} == expected
    for r in rows:
        issue = truth.issues()[r["issue_id"]]
        assert (r["times_reopened"], r["status_now"], r["severity"], r["title"]) == (
            1, issue["status"], issue["severity"], issue["title"])
        assert start <= r["last_reopened"] <= end
    # Before the second sync nothing had come back: a range that ends then holds no regression.
    assert _run(synced, "Regressions", start=start, end=min(r["last_reopened"] for r in rows)
                - timedelta(seconds=1)) == []


def test_every_panel_follows_the_workspace_variable(synced: Synced) -> None:
    start, end = _window()
    for query in sql_queries():
        if query.kind != "panel":
            continue
        assert "$workspace" in query.expr, query.title
        assert _as_grafana(synced.grafana_url, expand_sql(query.expr, workspaces=["no such workspace"],
                                                          start=start, end=end, teams=["unowned"])) == [], query.title


def _steady(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without what moves with the clock between two queries (`overdue` is now() minus the deadline)."""
    return [{k: v for k, v in r.items() if k != "overdue"} for r in rows]


def test_the_team_variable_lists_the_teams_of_the_chosen_workspaces(synced: Synced) -> None:
    workspace = synced.after.account["workspace"]["name"]
    assert _teams(synced, [workspace]) == ["payments", "unowned"]
    assert _teams(synced, ["no such workspace"]) == []


def test_every_panel_carries_the_team_and_follows_the_team_variable(synced: Synced) -> None:
    """Each row names its project's team, the one the map gives it; picking a team keeps its rows and only
    them. Mutation that fails it: a panel's `team IN ($team)` dropped, or its team read from another project."""
    start, end = _window()
    names = _project_names(synced.after)
    titles = sorted({q.title for q in sql_queries() if q.kind == "panel"})
    payments_rows = 0
    for title in titles:
        every = _run(synced, title, start=start, end=end)
        for row in every:
            assert row["team"] == ("payments" if row["project"] == names[synced.payments] else "unowned"), (title, row)
        for team in ("payments", "unowned"):
            assert _steady(_run(synced, title, start=start, end=end, teams=[team])) == _steady(
                [r for r in every if r["team"] == team]), (title, team)
        assert _run(synced, title, start=start, end=end, teams=["no such team"]) == [], title
        payments_rows += sum(r["team"] == "payments" for r in every)
    assert payments_rows > 0  # the regression at least is payments'



def test_the_stats_count_the_rows_of_their_tables(synced: Synced) -> None:
    """A stat and its table share one query (one home per rule); the stat counts its rows."""
    dash = load_dashboards()["scanwatch-history"]
    tables = {p["targets"][0]["rawSql"] for p in panels(dash) if p["type"] == "table"}
    stats = [p for p in panels(dash) if p["type"] == "stat"]
    assert len(stats) == 3
    for p in stats:
        assert p["targets"][0]["rawSql"] in tables, p["title"]
        assert p["options"]["reduceOptions"]["calcs"] == ["count"]


def test_grafanas_role_reads_the_views_and_no_table(synced: Synced) -> None:
    """Every panel above ran as this role; the tables themselves stay closed to it."""
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        _as_grafana(synced.grafana_url, "SELECT count(*) FROM issues")
    assert _as_grafana(synced.grafana_url, "SELECT count(*) AS n FROM open_issues_now")[0]["n"] > 0
