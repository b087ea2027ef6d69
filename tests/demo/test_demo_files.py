"""The demo's Prometheus config and data folder, checked without starting anything."""

from __future__ import annotations

import subprocess

import pytest

from pipelines.core.package_files import DemoSetupError, prepare, rule_files, write_prometheus_config
from tests.prometheus.tools import installed


def test_rule_files_are_the_projects_rules_not_its_config_or_tests():
    names = [p.name for p in rule_files()]
    assert names, "no rule files found under prometheus/"
    assert "prometheus.yml" not in names and "alertmanager.yml" not in names
    assert all("test" not in p.parent.name for p in rule_files())


def test_prometheus_config_is_valid_and_scrapes_the_exporter(tmp_path):
    dirs = prepare(tmp_path / "demo")
    rules = write_prometheus_config(dirs, 19817)
    text = dirs.prometheus_config.read_text()
    assert "127.0.0.1:19817" in text and '"15s"' in text
    assert all(str(r) in text for r in rules)
    promtool = installed("promtool")  # fails, never skips, without it: `make test-tools` installs it
    result = subprocess.run([promtool, "check", "config", str(dirs.prometheus_config)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_prepare_empties_its_own_folder_and_copies_dagster_yaml(tmp_path):
    dirs = prepare(tmp_path / "demo")
    dirs.db.write_text("old history")
    again = prepare(tmp_path / "demo")
    assert not again.db.exists()
    assert (again.dagster_home / "dagster.yaml").read_text().strip()


def test_prepare_refuses_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "mine.txt").write_text("keep")
    with pytest.raises(DemoSetupError, match="not empty"):
        prepare(tmp_path)
    assert (tmp_path / "mine.txt").exists()
