"""Replay what the real exporter served, minute by minute, through `promtool test rules` and the shipped rules.

An alert with a `for:` of several minutes would hold a live Prometheus for that long; promtool evaluates the
same rule files over a simulated clock instead. The input is the exporter's real exposition (after real syncs),
so the test proves that what scanwatch exports makes the alert fire, not that a hand-written series does.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.prometheus.tools import require

RULES = Path(__file__).resolve().parents[2] / "prometheus" / "rules"


def _series(text: str, names: set[str]) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in names:
                labels = ",".join(f'{k}={json.dumps(v)}' for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}"] = s.value
    return out


def alerts_firing(states: list[tuple[int, str]], *, alert: str, at_minute: int, names: set[str],
                  expected: int, tmp: Path, matchers: str = "") -> None:
    """Assert that `expected` `alert`s fire at `at_minute`, Prometheus having scraped each exposition of
    `states` (minute, /metrics text) every minute from its minute on. Only the series in `names` are fed."""
    promtool = require("promtool")
    per_state = [(minute, _series(text, names)) for minute, text in sorted(states)]
    keys = sorted({k for _, s in per_state for k in s})
    series = []
    for key in keys:
        values = []
        for minute in range(at_minute + 1):
            current = [s for m, s in per_state if m <= minute]
            value = current[-1].get(key) if current else None
            values.append("_" if value is None else repr(float(value)))
        series.append({"series": key, "values": " ".join(values)})
    test = {
        "rule_files": [str(p) for p in sorted(RULES.glob("*.yml"))],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "promql_expr_test": [{
                "expr": f'count(ALERTS{{alertname="{alert}",alertstate="firing"{matchers}}}) or vector(0)',
                "eval_time": f"{at_minute}m",
                "exp_samples": [{"labels": "{}", "value": expected}],
            }],
        }],
    }
    path = tmp / f"replay-{alert}-{at_minute}.test.yml"
    path.write_text(json.dumps(test))  # JSON is YAML
    result = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
