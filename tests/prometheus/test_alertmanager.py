"""The shipped Alertmanager configuration: amtool accepts it, routes as documented, its templates list the
issues, and a real Alertmanager applies its inhibition rules."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.stack import Process, get_json, http_ok, poll, write_shipped_alertmanager_config
from tests.prometheus.tools import ALERTMANAGER_NAMES, free_port, require

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "prometheus" / "alertmanager.yml"
TEMPLATES = str(ROOT / "prometheus" / "templates" / "*.tmpl")


def issue_alert(issue_id: str, title: str, status: str = "firing", **labels: str) -> dict:
    return {
        "status": status,
        "labels": {"alertname": "SecscanNewCriticalIssue", "workspace": "Acme", "issue_id": issue_id,
                   "project_id": "p1", "change": "new", "detected_at": "2026-11-01T10:15:00Z", "severity": "page",
                   **labels},
        "annotations": {"title": title, "what": "new critical issue", "project": "Shop", "address": "acme/shop",
                        "family": "code", "control_id": "code.sqli", "location": "src/search.py:42@abc1234",
                        "first_seen": "2026-11-01T10:00:00Z", "runbook": "Open the issue, fix it, recheck it."},
        "startsAt": "2026-11-01T10:16:00Z", "endsAt": "0001-01-01T00:00:00Z",
    }


def render(template: str, data: dict, tmp_path: Path) -> str:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data))
    result = subprocess.run([require("amtool"), "template", "render", f"--template.glob={TEMPLATES}",
                             f"--template.data={path}", f'--template.text={{{{ template "{template}" . }}}}'],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_amtool_accepts_the_config_and_its_templates():
    result = subprocess.run([require("amtool"), "check-config", str(CONFIG)], capture_output=True, text=True)
    assert result.returncode == 0 and "1 templates" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize(("labels", "receiver"), [
    ({"alertname": "SecscanNewCriticalIssue", "workspace": "Other", "severity": "page"}, "secscan-page"),
    ({"alertname": "SecscanApiAccessLost", "workspace": "Other", "severity": "page"}, "secscan-page"),
    ({"alertname": "SecscanSlaBreached", "workspace": "Other", "severity": "warning"}, "secscan-tickets"),
    ({"alertname": "SecscanNewCriticalIssue", "workspace": "Acme", "severity": "page"}, "acme-page"),
    ({"alertname": "SecscanSlaBreached", "workspace": "Acme", "severity": "warning"}, "acme-tickets"),
])
def test_routes_by_workspace_and_severity(labels, receiver):
    result = subprocess.run([require("amtool"), "config", "routes", "test", f"--config.file={CONFIG}",
                             *(f"{k}={v}" for k, v in labels.items())], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.split() == [receiver], result.stdout + result.stderr


def test_new_critical_issues_are_grouped_per_sync_and_never_repeated_within_retention():
    import yaml

    config = yaml.safe_load(CONFIG.read_text())
    routes = [r for r in config["route"]["routes"] for r in [r, *r.get("routes", [])]
              if 'alertname="SecscanNewCriticalIssue"' in r.get("matchers", [])]
    assert len(routes) == 2
    for route in routes:
        assert route["group_by"] == ["alertname", "workspace", "detected_at"]
        assert route["repeat_interval"] == "168h"  # ends after the 7-day critical window; --data.retention=192h
    assert "--data.retention=192h" in CONFIG.read_text()


def test_templates_list_every_issue_with_what_it_is(tmp_path):
    data = {"receiver": "secscan-page", "status": "firing", "externalURL": "http://am",
            "alerts": [issue_alert("i1", "SQL injection in <search>"), issue_alert("i2", "Secret key in bundle"),
                       issue_alert("i3", "Old finding", status="resolved")],
            "groupLabels": {"alertname": "SecscanNewCriticalIssue"},
            "commonLabels": {"alertname": "SecscanNewCriticalIssue", "workspace": "Acme"}, "commonAnnotations": {}}
    assert render("secscan.slack.title", data, tmp_path) == "2 new critical issues in Acme"
    slack = render("secscan.slack.text", data, tmp_path)
    for needle in ("*SQL injection in &lt;search&gt;* (new critical issue)", "*Secret key in bundle*",
                   "`src/search.py:42@abc1234`", "code/code.sqli", "first seen 2026-11-01T10:00:00Z", "issue `i1`",
                   "resolved: Old finding (`i3`)",
                   "_What to do:_ Open the issue"):
        assert needle in slack, (needle, slack)
    text = render("secscan.text", data, tmp_path)
    assert "project: Shop (workspace Acme)" in text and "location: src/search.py:42@abc1234" in text
    html = render("secscan.email.html", data, tmp_path)
    # (Alertmanager renders `html` with Go's html/template, which escapes the titles; amtool does not.)
    assert "<small>i1</small>" in html and "<td><code>src/search.py:42@abc1234</code></td>" in html
    assert html.count("<tr><td>") == 3 and "<td>firing</td>" in html and "<td>resolved</td>" in html
    other = {**data, "alerts": [{"status": "firing", "labels": {"alertname": "SecscanSyncStale", "workspace": "Acme"},
                                 "annotations": {"summary": "No sync", "description": "For 2h."}}],
             "commonLabels": {"alertname": "SecscanSyncStale", "workspace": "Acme"}}
    assert render("secscan.slack.title", other, tmp_path) == "[FIRING:1] SecscanSyncStale (Acme)"


def test_templates_name_the_team_of_a_teams_page(tmp_path):
    alerts = [issue_alert("i1", "SQL injection", team="payments"), issue_alert("i2", "Open admin", team="payments")]
    data = {"receiver": "team-payments-page", "status": "firing", "externalURL": "http://am", "alerts": alerts,
            "groupLabels": {"alertname": "SecscanNewCriticalIssue"}, "commonAnnotations": {},
            "commonLabels": {"alertname": "SecscanNewCriticalIssue", "workspace": "Acme", "team": "payments"}}
    assert render("secscan.slack.title", data, tmp_path) == "2 new critical issues in Acme, team payments"
    assert render("secscan.email.subject", data, tmp_path) == "2 new critical issues in Acme, team payments"
    assert "project: Shop (workspace Acme, team payments)" in render("secscan.text", data, tmp_path)
    assert "<td>Shop (Acme, team payments)</td>" in render("secscan.email.html", data, tmp_path)


def post_alerts(url: str, alerts: list[dict]) -> None:
    request = urllib.request.Request(f"{url}/api/v2/alerts", data=json.dumps(alerts).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert resp.status == 200


def test_a_stale_sync_or_lost_access_silences_the_data_alerts_of_its_workspace(tmp_path):
    alertmanager = require(*ALERTMANAGER_NAMES)
    write_shipped_alertmanager_config(tmp_path / "am.yml", "http://127.0.0.1:9/unused")
    port = free_port()
    proc = Process("alertmanager", [alertmanager, f"--config.file={tmp_path / 'am.yml'}",
                                    f"--storage.path={tmp_path / 'am'}", f"--web.listen-address=127.0.0.1:{port}",
                                    "--cluster.listen-address="], tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        poll("Alertmanager ready", lambda: http_ok(f"{url}/-/ready"))

        def alert(name: str, workspace: str, severity: str = "warning") -> dict:
            return {"labels": {"alertname": name, "workspace": workspace, "severity": severity},
                    "annotations": {"summary": name}}

        post_alerts(url, [
            alert("SecscanSyncStale", "Acme"), alert("SecscanApiAccessLost", "Beta", "page"),
            alert("SecscanSlaBreached", "Acme"), alert("SecscanProjectScoreDrop", "Acme"),
            alert("SecscanSlaBreached", "Beta"), alert("SecscanSyncStale", "Beta"),
            alert("SecscanSlaBreached", "Gamma"),
        ])

        def states() -> dict[tuple[str, str], str]:
            return {(a["labels"]["alertname"], a["labels"]["workspace"]): a["status"]["state"]
                    for a in get_json(f"{url}/api/v2/alerts")}

        def settled() -> dict | None:
            seen = states()
            return seen if len(seen) == 7 and seen[("SecscanSlaBreached", "Acme")] == "suppressed" else None

        got = poll("inhibitions applied", settled)
        assert got == {
            ("SecscanSyncStale", "Acme"): "active", ("SecscanApiAccessLost", "Beta"): "active",
            ("SecscanSlaBreached", "Acme"): "suppressed", ("SecscanProjectScoreDrop", "Acme"): "suppressed",
            ("SecscanSlaBreached", "Beta"): "suppressed", ("SecscanSyncStale", "Beta"): "suppressed",
            ("SecscanSlaBreached", "Gamma"): "active",  # another workspace's data is still fresh
        }
    finally:
        proc.stop()
