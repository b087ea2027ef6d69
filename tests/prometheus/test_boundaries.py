"""Where each alert draws its line: every alert rule with a threshold is tested just below, at and just above
it (tests/prometheus/boundaries.test.yml, run by `promtool test rules`). The rule tests of prometheus/tests/
check what an alert says; a drop of 15 and one of 5 say nothing of whether 10 alerts, as the README promises.

Mutations that fail it: SecscanProjectScoreDrop's `>= 10` as `>= 14` or `> 10`, and each threshold of
tests/mutations/mutations.yml's `rules-*` entries."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.prometheus.tools import require

HERE = Path(__file__).resolve().parent
BOUNDARIES = HERE / "boundaries.test.yml"
ALERTS = HERE.parents[1] / "prometheus" / "rules" / "secscan-alerts.yml"
# Alerts with no threshold to put a boundary on: one alert per series that exists.
NO_THRESHOLD = {"SecscanNewCriticalIssue"}


def test_every_alert_threshold_holds_below_at_and_above():
    result = subprocess.run([require("promtool"), "test", "rules", BOUNDARIES.name], capture_output=True,
                            text=True, cwd=HERE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_with_a_threshold_has_its_boundary_cases():
    alerts = {r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"] if "alert" in r}
    tested = set()
    for case in yaml.safe_load(BOUNDARIES.read_text())["tests"]:
        for check in case["promql_expr_test"]:
            expr = check["expr"]
            if "ALERTS{" in expr:
                tested.add(expr.split('alertname="', 1)[1].split('"', 1)[0])
                # A case per side of the line: at least one firing and at least one silent series.
                cases = {s["series"].split("{", 1)[1] for s in case["input_series"]}
                assert check["exp_samples"] and len(cases) > len(check["exp_samples"]), expr
    assert alerts - NO_THRESHOLD <= tested, sorted(alerts - NO_THRESHOLD - tested)
