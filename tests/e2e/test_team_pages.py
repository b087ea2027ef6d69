"""End to end, a page reaches the team that owns the project: simulator -> `scanwatch sync` with an ownership
map (two teams and an unowned project) -> exporter -> Prometheus with the shipped rules -> Alertmanager with the
routes `scanwatch config export --ownership` writes -> one webhook server per team, and one for the rest.

One sync brings a new critical issue to a payments project, one to a storefront project and one to an
unowned project: each reaches its own team's webhook and no other, naming its team; the unowned one takes
the shipped default route. Only timers are shortened. About a minute.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.e2e.stack import ROOT, LiveStack, WebhookReceiver, poll, running_stack, write_shipped_alertmanager_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
ALERT = "SecscanNewCriticalIssue"
TEAMS = ("payments", "storefront")


class TeamStack(LiveStack):
    hooks: dict[str, WebhookReceiver]  # team (or "default") -> its webhook server
    projects: dict[str, str]  # team -> the project it owns in this test
    targets: dict[str, str]  # team -> a visible target of that project

    def pages(self, team: str) -> list[dict]:
        return [n for n in list(self.hooks[team].notifications) if n["groupLabels"].get("alertname") == ALERT]


def stage(sim) -> tuple[dict[str, str], dict[str, str]]:
    """Three projects with a verified site each: payments', storefront's, and one no rule claims."""
    w = sim.world
    by_project: dict[str, str] = {}
    for t in sim.target_ids(verified=True):
        target = w.targets[t]
        if target.kind != "repository":
            by_project.setdefault(target.project_id, t)
    chosen = sorted(by_project)[:3]
    assert len(chosen) == 3, by_project
    projects = dict(zip((*TEAMS, "default"), chosen, strict=True))
    return projects, {team: by_project[p] for team, p in projects.items()}


def routes_writer(stack: TeamStack, ownership: Path) -> Callable[[Path], None]:
    """What an operator does: export the files with the map, then fill in each receiver's address (here each
    team's own webhook server; e-mail left out, as in the other end-to-end tests)."""
    out = stack.tmp / "export"
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "config", "export", str(out), "--ownership",
                           str(ownership)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr

    def write(path: Path) -> None:
        default = stack.hooks["default"].url.rsplit("/", 1)[0]
        write_shipped_alertmanager_config(path, default, source=out / "prometheus" / "alertmanager.yml")
        config = yaml.safe_load(path.read_text())
        for receiver in config["receivers"]:
            for team in TEAMS:
                if receiver["name"].startswith(f"team-{team}-"):
                    base = stack.hooks[team].url.rsplit("/", 1)[0]
                    for hook in receiver.get("webhook_configs", []):
                        hook["url"] = f"{base}/{receiver['name']}"
                    for slack in receiver.get("slack_configs", []):
                        slack["api_url"] = f"{base}/slack/{receiver['name']}"
        path.write_text(yaml.safe_dump(config, sort_keys=False))

    return write


@pytest.fixture(scope="module")
def teams(tmp_path_factory):
    from simulator.testing import SimConfig, serve_simulator

    with serve_simulator(SimConfig(seed=11)) as sim:
        st = TeamStack(tmp_path_factory.mktemp("teams"), sim, WebhookReceiver())
        st.hooks = {"payments": WebhookReceiver(), "storefront": WebhookReceiver(), "default": st.webhook}
        st.projects, st.targets = stage(sim)
        ownership = st.tmp / "ownership.yml"
        ownership.write_text(yaml.safe_dump({
            "teams": {"payments": {}, "storefront": {}},
            "rules": [{"team": team, "project_id": st.projects[team]} for team in TEAMS],
        }))
        st.env["SCANWATCH_OWNERSHIP_FILE"] = str(ownership)
        try:
            with running_stack(st, shipped_routes=True, keep_firing_for="2s",
                               alertmanager_config=routes_writer(st, ownership)):
                yield st
        finally:
            for team in TEAMS:
                st.hooks[team].stop()


def test_every_project_series_carries_its_team(teams):
    got = {r["metric"]["project_id"]: r["metric"].get("team") for r in teams.query("secscan_project_score")}
    assert got[teams.projects["payments"]] == "payments" and got[teams.projects["storefront"]] == "storefront"
    assert got[teams.projects["default"]] == "unowned"
    assert set(got.values()) == {"payments", "storefront", "unowned"}


def test_each_teams_new_critical_issue_reaches_its_teams_webhook_only(teams):
    sim = teams.sim
    issues = {}
    for team, target in teams.targets.items():
        issues[team] = sim.add_issue(target, "critical").id
        sim.scan_finds(issues[team])
    teams.sync()

    def delivered(team: str):
        return lambda: [n for n in teams.pages(team) if issues[team] in {a["labels"]["issue_id"] for a in n["alerts"]}]

    for team in (*TEAMS, "default"):
        poll(f"{team}'s page", delivered(team), timeout=90)
    for team in TEAMS:
        (message,) = teams.pages(team)  # one sync, one message, to this team's page receiver
        assert message["receiver"] == f"team-{team}-page"
        (alert,) = message["alerts"]
        assert alert["labels"]["issue_id"] == issues[team] and alert["labels"]["team"] == team
        assert alert["annotations"]["team"] == team
        assert f", team {team})" in alert["annotations"]["summary"], alert["annotations"]["summary"]
        assert f"team {team};" in alert["annotations"]["description"]
        # The Slack post of the team's receiver went to the team's server too.
        (slack,) = [b["attachments"][0] for p, b in teams.hooks[team].posts if p == f"/slack/team-{team}-page"]
        assert slack["title"].endswith(f", team {team}"), slack["title"]
    (default,) = teams.pages("default")
    assert default["receiver"] == "secscan-page"
    assert [a["labels"]["issue_id"] for a in default["alerts"]] == [issues["default"]]
    assert default["alerts"][0]["labels"]["team"] == "unowned"
    # No server heard of another team's issue, through any receiver.
    for team, hook in teams.hooks.items():
        seen = {a["labels"].get("issue_id") for n in hook.notifications for a in n.get("alerts", [])}
        assert seen & set(issues.values()) == {issues[team]}, (team, seen)
