"""Ownership end to end, over real HTTP and on both engines: two Pro workspaces of the simulator, `acme` and
`globex`, followed with a map giving one acme project to `payments` (on a tight `tier1` SLA profile), all but
one globex project to `web`, and the rest to nobody (`unowned`). A real `scanwatch sync` of both, then the map
edited (the payments project moves to `platform`, on the default profile) and a sync of acme alone.

Checked: every series and cookbook row of a project carries its team; the backfilled past and the live series
of a project have one label set; the tier1 issue breaches on its own days while default-profile issues of the
same age do not; the moved project's issues carry the new team from the sync that read the new map, the history
says when, and the series count does not change."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pipelines.backfill import tsdb
from pipelines.core import sqlfiles
from pipelines.storage.db import connect
from pipelines.storage.read_only import execute_read_only
from simulator.testing import SimConfig, serve_simulator
from tests.backends import BACKENDS, rows
from tests.e2e.stack import ROOT
from tests.helpers import build_registry
from tests.reliability import forked

pytestmark = pytest.mark.timeout(900)

DAY = 86400.0
SCRAPE = {"job": "scanwatch", "instance": "localhost:9817"}
WORKSPACES = """workspaces:
  - name: acme
    api_key_env: SCANWATCH_KEY_ACME
  - name: globex
    api_key_env: SCANWATCH_KEY_GLOBEX
"""
MAP = """
sla_profiles:
  tier1: {{critical: 1, high: 1, medium: 1, low: 1}}
teams:
  payments: {{sla_profile: tier1}}
rules:
  - team: {pay_team}
    workspace: acme
    project: "{pay_name}"
  - team: web
    workspace: globex
    project_id: [{web_ids}]
  - team: ghost
    workspace: acme
    project: "no such project *"
"""


@dataclass
class State:
    metrics: str
    samples: list[tuple[str, dict[str, str], float]]


@dataclass
class Owned:
    db: str
    env: dict[str, str]
    teams: dict[str, str]  # project id -> team after the first sync
    pay: str  # the payments project
    unowned: dict[str, int]  # workspace -> projects no rule claims
    first: State
    first_sync: object
    backfill: list[tuple[str, dict[str, str]]]
    breaches: list[dict]  # the cookbook's sla_breaches after the first sync
    moved: State
    second_sync: object


def _state(snapshot: Path) -> State:
    text = generate_latest(build_registry(snapshot, critical_info_limit=50)).decode()
    samples = [(s.name, dict(s.labels), s.value) for f in text_string_to_metric_families(text) for s in f.samples]
    return State(text, samples)


def _old_open(sim, pid: str) -> int:
    """Open issues above info of the project first seen more than a day ago (the simulator's clock)."""
    now = sim.now()
    return sum(1 for i in sim.world.issues.values() if i.project_id == pid and i.status == "open"
               and i.severity != "info" and i.first_seen_at < now - 2 * DAY)


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def owned(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Owned]:
    backend = BACKENDS[request.param]
    tmp = tmp_path_factory.mktemp("ownership")
    db = backend.fresh(request, tmp / "history.duckdb")
    with serve_simulator(SimConfig(seed=7, scale="small", clock="driven", control=True, rate_limit=100000,
                                   pro_workspaces=2)) as sim:
        acme, globex = sim.project_ids("pro"), sim.project_ids("pro_2")
        pay = max(acme, key=lambda pid: _old_open(sim, pid))
        names = {pid: sim.world.projects[pid].name for pid in acme}
        assert _old_open(sim, pay) > 0 and list(names.values()).count(names[pay]) == 1
        web = globex[:-1]
        (tmp / "workspaces.yml").write_text(WORKSPACES)
        owners = tmp / "ownership.yml"
        owners.write_text(MAP.format(pay_team="payments", pay_name=names[pay], web_ids=", ".join(web)))
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_") and k != "DAGSTER_HOME"}
        env.update({
            "SCANWATCH_WORKSPACES_FILE": str(tmp / "workspaces.yml"), "SCANWATCH_BASE_URL": sim.base_url,
            "SCANWATCH_KEY_ACME": sim.keys["pro"], "SCANWATCH_KEY_GLOBEX": sim.keys["pro_2"],
            "SCANWATCH_DB": db, "SCANWATCH_SNAPSHOT": str(tmp / "metrics.json"),
            "SCANWATCH_OWNERSHIP_FILE": str(owners),
            # The default profile so long that no issue of the world breaches it; tier1's day they do.
            "SCANWATCH_SLA_DAYS": "critical=3650,high=3650,medium=3650,low=3650",
        })
        first_sync = forked.run(["sync"], env, timeout=600, cwd=ROOT)
        assert first_sync.returncode == 0, first_sync.stderr
        teams = {**dict.fromkeys(acme + globex, "unowned"), pay: "payments", **dict.fromkeys(web, "web")}
        first = _state(tmp / "metrics.json")
        with connect(db) as conn:
            tsdb.write_series(conn, tsdb.Plan(None, labels=SCRAPE), tmp / "series.om")
        document = (tmp / "series.om").read_text().removesuffix("# EOF\n")
        backfill = [(s.name, dict(s.labels)) for f in text_string_to_metric_families(document) for s in f.samples]
        columns, found = execute_read_only(db, sqlfiles.cookbook()["sla_breaches"].sql, as_writer=True)
        breaches = [dict(zip(columns, row, strict=True)) for row in found]
        # The map changes while scanwatch runs: the payments project moves to platform (the default profile).
        owners.write_text(MAP.format(pay_team="platform", pay_name=names[pay], web_ids=", ".join(web)))
        second_sync = forked.run(["sync", "--quiet", "--workspace", "acme"], env, timeout=600, cwd=ROOT)
        assert second_sync.returncode == 0, second_sync.stderr
        moved = _state(tmp / "metrics.json")
        yield Owned(db, env, teams, pay, {"acme": len(acme) - 1, "globex": 1}, first, first_sync, backfill,
                    breaches, moved, second_sync)
    backend.drop(request, db)


def _project_samples(state: State) -> list[tuple[str, dict[str, str], float]]:
    return [s for s in state.samples if "project_id" in s[1]]


def test_every_project_and_issue_series_carries_its_projects_team(owned: Owned) -> None:
    """Mutation that fails it: any project-level family of the catalogue without `team` (its samples have a
    project_id and no team), or a snapshot query that leaves the column out (an empty team)."""
    samples = _project_samples(owned.first)
    families = {name for name, _, _ in samples}
    for needed in ("secscan_project_score", "secscan_issues_open", "secscan_issues_detected_total",
                   "secscan_target_score", "secscan_issues_sla_breached", "secscan_scans_total",
                   "secscan_issue_time_to_fix_seconds_bucket", "secscan_critical_issue_info"):
        assert needed in families, needed
    wrong = [(name, labels) for name, labels, _ in samples if labels.get("team") != owned.teams[labels["project_id"]]]
    assert not wrong, wrong[:3]
    assert {labels["team"] for _, labels, _ in samples} == {"payments", "web", "unowned"}


def test_the_unowned_projects_are_counted_per_workspace(owned: Owned) -> None:
    counted = {labels["workspace"]: value for name, labels, value in owned.first.samples
               if name == "secscan_projects_unowned"}
    assert counted == {"acme": owned.unowned["acme"], "globex": owned.unowned["globex"]}


def test_a_rule_that_claims_nothing_is_a_warning_of_the_sync(owned: Owned) -> None:
    assert "rules[2] (team ghost) matches no project of workspace acme" in owned.first_sync.stderr


def test_every_cookbook_row_about_a_project_or_an_issue_carries_its_team(owned: Owned) -> None:
    issue_project = dict(rows(owned.db, "SELECT id, project_id FROM issues"))
    now = {**owned.teams, owned.pay: "platform"}  # the cookbook reads the history after the move
    checked: Counter[str] = Counter()
    for name, query in sqlfiles.cookbook().items():
        if name == "project_owners":
            continue  # the history of ownership itself: checked below
        columns, found = execute_read_only(owned.db, query.sql, as_writer=True)
        if "team" not in columns:
            assert "project" not in columns, f"{name} has rows about projects and no team column"
            continue
        for row in found:
            record = dict(zip(columns, row, strict=True))
            pid = record.get("project_id") or issue_project.get(record.get("issue_id"))
            if pid is None:  # a target's row: its project by its name
                continue
            assert record["team"] == now[pid], (name, record)
            checked[name] += 1
    assert {"open_issues_by_project", "project_score_history", "recent_changes"} <= set(checked), checked


def test_the_backfilled_past_and_the_live_series_of_a_project_are_one_series(owned: Owned) -> None:
    """Mutation that fails it: the backfill without the team column (its series then lack the label)."""
    live = {(name, frozenset({**labels, **SCRAPE}.items())) for name, labels, _ in owned.first.samples}
    past = [(name, labels) for name, labels in owned.backfill if "project_id" in labels]
    assert past
    apart = [(name, labels) for name, labels in past if (name, frozenset(labels.items())) not in live]
    assert not apart, apart[:3]
    assert {labels["team"] for _, labels in past} == {"payments", "web", "unowned"}


def test_a_tier1_issue_breaches_on_its_own_days_while_default_profile_issues_do_not(owned: Owned) -> None:
    breached = Counter()
    for name, labels, value in owned.first.samples:
        if name == "secscan_issues_sla_breached":
            breached[labels["project_id"]] += value
    assert breached[owned.pay] > 0
    assert {pid for pid, n in breached.items() if n} == {owned.pay}
    # Other projects hold open issues just as old, which the default profile (3650 days) does not breach.
    [(older,)] = rows(owned.db, f"SELECT count(*) FROM open_issues_now WHERE project_id <> '{owned.pay}' AND "
                                "severity <> 'info' AND first_seen_at < now() - INTERVAL '2 days'")
    assert older > 0
    windows = {(labels["profile"], labels["severity"]): value for name, labels, value in owned.first.samples
               if name == "secscan_sla_seconds"}
    assert windows[("tier1", "critical")] == DAY and windows[("default", "critical")] == 3650 * DAY


def test_the_cookbook_counts_sla_breaches_as_the_metrics_do(owned: Owned) -> None:
    issue_project = dict(rows(owned.db, "SELECT id, project_id FROM issues"))
    breached = sum(v for n, _, v in owned.first.samples if n == "secscan_issues_sla_breached")
    assert len(owned.breaches) == breached > 0
    assert {(issue_project[r["issue_id"]], r["team"], r["sla_profile"], r["sla_days"]) for r in owned.breaches} == {
        (owned.pay, "payments", "tier1", 1)}
    # After the move the project is on the default profile: nothing breaches, in the cookbook as in /metrics.
    _, found = execute_read_only(owned.db, sqlfiles.cookbook()["sla_breaches"].sql, as_writer=True)
    assert found == []
    assert sum(v for n, _, v in owned.moved.samples if n == "secscan_issues_sla_breached") == 0


def test_a_map_change_moves_the_projects_issues_to_the_new_team_from_that_sync(owned: Owned) -> None:
    """Mutation that fails it: recording owners only for projects never seen before (the move is lost)."""
    mine = [(n, labels) for n, labels, _ in _project_samples(owned.moved) if labels["project_id"] == owned.pay]
    assert mine and {labels["team"] for _, labels in mine} == {"platform"}
    periods = rows(owned.db, f"SELECT team, sla_profile, valid_from, valid_to FROM project_owners "
                             f"WHERE project_id = '{owned.pay}' ORDER BY valid_from")
    assert [(t, p) for t, p, _, _ in periods] == [("payments", "tier1"), ("platform", "default")]
    assert periods[0][3] == periods[1][2] and periods[1][3] is None
    # the other projects keep one period each
    [(others,)] = rows(owned.db, f"SELECT count(*) FROM project_owners WHERE project_id <> '{owned.pay}' "
                                 "AND valid_to IS NOT NULL")
    assert others == 0
    columns, found = execute_read_only(owned.db, sqlfiles.cookbook()["open_issues_by_project"].sql, as_writer=True)
    teams = {dict(zip(columns, r, strict=True))["project_id"]: dict(zip(columns, r, strict=True))["team"]
             for r in found}
    assert teams[owned.pay] == "platform"


def test_one_more_label_never_more_series(owned: Owned) -> None:
    """A project that changes team changes one label of its series: as many project-level series after the move
    as before (the pipeline's own series may grow with the assets a run adds)."""
    before = Counter(name for name, _, _ in _project_samples(owned.first))
    after = Counter(name for name, _, _ in _project_samples(owned.moved))
    assert before == after and sum(before.values()) > 1000


def test_a_map_broken_while_scanwatch_runs_changes_no_owner_and_says_why(owned: Owned, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduled run whose map was broken meanwhile: its snapshot step keeps the owners recorded and logs one
    warning per problem (`scanwatch sync` refuses such a map before it starts)."""
    from pipelines.storage.workspaces import current_workspace
    from pipelines.sync.snapshot import refresh_snapshot

    broken = tmp_path / "ownership.yml"
    broken.write_text("rules:\n  - team: Payments\n    project: shop\n  - team: web\n")
    monkeypatch.setenv("SCANWATCH_OWNERSHIP_FILE", str(broken))
    before = rows(owned.db, "SELECT project_id, team, valid_to FROM project_owners ORDER BY project_id, valid_from")
    with connect(owned.db) as conn:
        part = refresh_snapshot(conn, workspace_id=current_workspace(conn, "acme"), label="acme", workspace="acme",
                                path=tmp_path / "metrics.json")
    assert len(part.warnings) == 2, part.warnings
    assert all(w.startswith(f"the ownership map was not applied, the owners recorded stay: {broken}: rules[")
               for w in part.warnings), part.warnings
    assert rows(owned.db, "SELECT project_id, team, valid_to FROM project_owners ORDER BY project_id, "
                          "valid_from") == before
