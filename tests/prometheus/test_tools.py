"""Missing Prometheus binaries skip the tests locally but fail them in CI (make test sets the variable)."""

from __future__ import annotations

import pytest

from tests.prometheus import tools


def test_missing_binary_skips_without_the_ci_variable(monkeypatch):
    monkeypatch.setattr(tools.shutil, "which", lambda name: None)
    monkeypatch.delenv("SCANWATCH_REQUIRE_PROMETHEUS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="make prom-tools"):
        tools.require("prometheus")


def test_missing_binary_fails_when_ci_requires_it(monkeypatch):
    monkeypatch.setattr(tools.shutil, "which", lambda name: None)
    monkeypatch.setenv("SCANWATCH_REQUIRE_PROMETHEUS", "1")
    with pytest.raises(pytest.fail.Exception, match="not installed"):
        tools.require("prometheus-alertmanager", "alertmanager")


def test_first_binary_found_wins(monkeypatch):
    monkeypatch.setattr(tools.shutil, "which", lambda name: f"/bin/{name}" if name == "alertmanager" else None)
    assert tools.require("prometheus-alertmanager", "alertmanager") == "/bin/alertmanager"


def test_a_tool_make_test_tools_installs_fails_when_missing_even_without_the_ci_variable(monkeypatch):
    monkeypatch.setattr(tools.shutil, "which", lambda name: None)
    monkeypatch.delenv("SCANWATCH_REQUIRE_PROMETHEUS", raising=False)
    with pytest.raises(pytest.fail.Exception, match="make test-tools"):
        tools.installed("openssl")
