"""Routes per team, generated from the ownership map: `scanwatch config export --ownership` and the chart's
values write the same Alertmanager routes, amtool accepts them, and a team's alert reaches that team's
receivers only while the default team, workspace-level alerts and series without `team` keep the shipped
routing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipelines.core.alert_routes import RouteError, team_route, with_team_routes
from tests.prometheus.tools import installed

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "prometheus" / "alertmanager.yml"
# Two teams in two workspaces and the default team; `unowned` named by a rule too, which must not get a route.
MAP = {
    "teams": {"payments": {"sla_profile": "tier1"}, "storefront": {}},
    "sla_profiles": {"tier1": {"critical": 2, "high": 7}},
    "rules": [{"team": "payments", "workspace": "acme"}, {"team": "storefront", "workspace": "globex"},
              {"team": "unowned", "project": "legacy-*"}],
}


def export(tmp_path: Path, ownership: dict | None) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "pipelines.cli", "config", "export", str(tmp_path / "out")]
    if ownership is not None:
        (tmp_path / "ownership.yml").write_text(yaml.safe_dump(ownership))
        args += ["--ownership", str(tmp_path / "ownership.yml")]
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("routes")
    done = export(tmp, MAP)
    assert done.returncode == 0, done.stderr
    return tmp / "out" / "prometheus" / "alertmanager.yml"


def routed(config: Path, **labels: str) -> list[str]:
    done = subprocess.run([installed("amtool"), "config", "routes", "test", f"--config.file={config}",
                           *(f"{k}={v}" for k, v in labels.items())], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_amtool_accepts_the_exported_file_with_its_templates(exported):
    done = subprocess.run([installed("amtool"), "check-config", str(exported)], capture_output=True, text=True)
    assert done.returncode == 0 and "1 templates" in done.stdout, done.stdout + done.stderr
    receivers = {r["name"] for r in yaml.safe_load(exported.read_text())["receivers"]}
    assert {"team-payments-page", "team-payments-tickets", "team-storefront-page",
            "team-storefront-tickets"} <= receivers
    assert not any("unowned" in name for name in receivers)  # the default team keeps the shipped receivers


@pytest.mark.parametrize(("labels", "receiver"), [
    # Each team's page reaches its own receiver, whichever workspace it is in (the shipped Acme route included).
    ({"alertname": "SecscanNewCriticalIssue", "severity": "page", "workspace": "acme", "team": "payments"},
     "team-payments-page"),
    ({"alertname": "SecscanNewCriticalIssue", "severity": "page", "workspace": "Acme", "team": "payments"},
     "team-payments-page"),
    ({"alertname": "SecscanNewCriticalIssue", "severity": "page", "workspace": "globex", "team": "storefront"},
     "team-storefront-page"),
    ({"alertname": "SecscanSlaBreached", "severity": "warning", "workspace": "acme", "team": "payments"},
     "team-payments-tickets"),
    # The default team, an alert without `team` (an old exporter) and workspace-level alerts: shipped routes.
    ({"alertname": "SecscanNewCriticalIssue", "severity": "page", "workspace": "globex", "team": "unowned"},
     "secscan-page"),
    ({"alertname": "SecscanNewCriticalIssue", "severity": "page", "workspace": "globex"}, "secscan-page"),
    ({"alertname": "SecscanSyncStale", "severity": "warning", "workspace": "globex"}, "secscan-tickets"),
    ({"alertname": "SecscanSyncStale", "severity": "warning", "workspace": "Acme"}, "acme-tickets"),
])
def test_a_teams_alert_reaches_its_teams_receiver_only(exported, labels, receiver):
    assert routed(exported, **labels) == [receiver]


def test_the_pattern_is_the_one_file_and_changes_with_it():
    """The route of a team is prometheus/routes/team.yml filled in: another template gives another route."""
    shipped = team_route("payments")
    assert shipped["route"]["matchers"] == ['team="payments"']
    other = (ROOT / "prometheus" / "routes" / "team.yml").read_text().replace("repeat_interval: 4h",
                                                                              "repeat_interval: 2h")
    changed = with_team_routes(yaml.safe_load(SHIPPED.read_text()), ["payments"], "unowned", template=other)
    assert changed["route"]["routes"][0]["routes"][1]["repeat_interval"] == "2h"


def test_a_name_that_cannot_be_a_route_is_refused():
    with pytest.raises(RouteError, match="team 'Pay ments' cannot name an Alertmanager route"):
        team_route("Pay ments")


def test_a_bad_map_is_one_line_and_nothing_is_written(tmp_path):
    done = export(tmp_path, {"rules": [{"team": "Payments Team", "workspace": "acme"}]})
    assert done.returncode == 1 and not (tmp_path / "out").exists()
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("scanwatch config export: ") and "nothing was written" in line, done.stderr


def test_without_a_map_the_shipped_file_is_exported_as_it_is(tmp_path):
    done = export(tmp_path, None)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "prometheus" / "alertmanager.yml").read_bytes() == SHIPPED.read_bytes()


def test_the_chart_renders_the_same_routes_from_the_same_map(exported, tmp_path):
    import kubernetes_validate

    from tests.deploy.test_chart import K8S_VERSION, render

    docs = render({"secret": {"name": "scanwatch"}, "ownership": MAP, "alertmanagerConfig": {"enabled": True}})
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    (owners,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-ownership")]
    assert yaml.safe_load(owners["data"]["ownership.yml"]) == MAP  # the runs read the same map
    (am,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-alertmanager")]
    chart = yaml.safe_load(am["data"]["alertmanager.yml"])
    export = yaml.safe_load(exported.read_text())
    assert chart["route"] == export["route"] and chart["receivers"] == export["receivers"]
    assert chart["inhibit_rules"] == export["inhibit_rules"] and chart["templates"] == ["*.tmpl"]
    for name, text in am["data"].items():  # as mounted: the file and its templates in one folder
        (tmp_path / name).write_text(text)
    done = subprocess.run([installed("amtool"), "check-config", str(tmp_path / "alertmanager.yml")],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "1 templates" in done.stdout, done.stdout + done.stderr
    assert routed(tmp_path / "alertmanager.yml", alertname="SecscanNewCriticalIssue", severity="page",
                  workspace="globex", team="storefront") == ["team-storefront-page"]


def test_the_chart_refuses_a_team_name_that_cannot_be_a_route():
    from tests.deploy.test_chart import render

    with pytest.raises(Exception, match="team"):
        render({"secret": {"name": "scanwatch"}, "alertmanagerConfig": {"enabled": True},
                "ownership": {"rules": [{"team": "Payments Team", "workspace": "acme"}]}})


def test_the_chart_checks_team_names_with_the_maps_own_rule():
    """Helm cannot import Python: its schema and template spell the map's name rule, and must spell it alike."""
    import json

    from pipelines.core.ownership import TEAM

    chart = ROOT / "deploy" / "helm" / "scanwatch"
    schema = json.loads((chart / "values.schema.json").read_text())
    assert schema["definitions"]["team"]["pattern"] == f"^{TEAM.pattern}$"
    assert f'regexMatch "^{TEAM.pattern}$"' in (chart / "templates" / "alertmanager-config.yaml").read_text()
