"""Alert and recording rules: promtool accepts and tests them, and they only read series that exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import build_registry, write_snapshot
from tests.prometheus.tools import require

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "prometheus"
ALERTS = PROM / "rules" / "secscan-alerts.yml"
RECORDING = PROM / "rules" / "secscan-recording.yml"
REQUIRED_ALERTS = {
    "SecscanNewCriticalIssue", "SecscanProjectScoreDrop", "SecscanSlaBreached", "SecscanQuotaNearlyExhausted",
    "SecscanTrialEnding", "SecscanApiAccessLost", "SecscanSyncStale", "SecscanScansFailing",
    "SecscanNewCriticalIssuesUnlisted",
    "SecscanSyncFailing",
}
METRIC = re.compile(r"\b(secscan[_:][a-zA-Z0-9_:]*)")


def rules(path: Path) -> list[dict]:
    return [r for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]]


def exported_names(snapshot: dict, tmp_path: Path) -> set[str]:
    path = tmp_path / "m.json"
    write_snapshot(snapshot, path)
    text = generate_latest(build_registry(path, critical_info_limit=5)).decode()
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_promtool_check_rules_and_config():
    promtool = require("promtool")
    for args in (["check", "rules", str(ALERTS), str(RECORDING)], ["check", "config", str(PROM / "prometheus.yml")]):
        result = subprocess.run([promtool, *args], capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_test_rules():
    promtool = require("promtool")
    files = sorted(str(p) for p in (PROM / "tests").glob("*.test.yml"))
    assert len(files) >= 2
    result = subprocess.run([promtool, "test", "rules", *files], capture_output=True, text=True, cwd=PROM)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_named_annotated_and_labelled():
    alerts = rules(ALERTS)
    names = {a["alert"] for a in alerts}
    assert names >= REQUIRED_ALERTS
    for a in alerts:
        assert a["alert"].startswith("Secscan")
        assert {"summary", "description", "runbook"} <= set(a["annotations"]), a["alert"]
        assert a["labels"]["severity"] in {"page", "warning", "info"}, a["alert"]
    new_critical = next(a for a in alerts if a["alert"] == "SecscanNewCriticalIssue")
    # One alert per issue from the per-issue series: whole numbers, no extrapolating increase().
    assert "secscan_critical_issue_new" in new_critical["expr"] and "increase(" not in new_critical["expr"]
    assert new_critical.get("for", "0s") in ("0s", "0m") and new_critical.get("keep_firing_for")
    assert {"project", "address", "title", "family", "control_id", "location", "first_seen", "what"} <= set(
        new_critical["annotations"])


def test_every_alert_has_a_firing_and_a_silent_case():
    fired: set[str] = set()
    silent: set[str] = set()
    for path in (PROM / "tests").glob("*.test.yml"):
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (fired if check.get("exp_alerts") else silent).add(check["alertname"])
    names = {a["alert"] for a in rules(ALERTS)}
    assert names <= fired, names - fired
    assert names <= silent, names - silent


def test_rules_read_only_series_the_exporter_serves(snapshot_with_arrival, tmp_path):
    exported = exported_names(snapshot_with_arrival, tmp_path)
    recorded = {r["record"] for r in rules(RECORDING)}
    for rule in rules(ALERTS) + rules(RECORDING):
        for name in METRIC.findall(rule["expr"]):
            assert name in exported or name in recorded, (rule.get("alert") or rule.get("record"), name)
    assert all(r.startswith("secscan:") for r in recorded)


def test_every_alert_about_a_project_keeps_its_team():
    """An alert naming a project must keep `team`, which Alertmanager routes by (docs/ownership.md): every `by`
    clause that keeps `project_id` keeps `team` too. Mutation that fails it: `team` dropped from one of them."""
    about_projects = 0
    for rule in rules(ALERTS):
        clauses = re.findall(r"\bby\s*\(([^)]*)\)", rule["expr"])
        for clause in clauses:
            labels = {label.strip() for label in clause.split(",")}
            if "project_id" in labels:
                assert "team" in labels, (rule["alert"], clause)
                about_projects += 1
    assert about_projects >= 6
