"""The settings object: one reading of the environment, every problem one line naming what to fix."""

from __future__ import annotations

import pytest

from pipelines.api import ScanningClient
from pipelines.core.credentials import mask_key
from pipelines.core.settings import ConfigError, Settings
from pipelines.defs.resources import ScanningServiceResource, default_resources

KEY = "rst_" + "a1" * 20


def _workspace(env: dict[str, str]):
    return Settings.load(env).workspaces[0]


def test_the_two_variables_make_one_workspace_named_default():
    ws = _workspace({"SCANWATCH_BASE_URL": "http://h/v1/", "SCANWATCH_API_KEY": f" {KEY} "})
    assert (ws.name, ws.base_url, ws.api_key, ws.label) == ("default", "http://h/v1", KEY, None)
    assert KEY not in repr(ws) and "rst_…" in repr(ws)


@pytest.mark.parametrize(("env", "says"), [
    ({"SCANWATCH_API_KEY": KEY}, "SCANWATCH_BASE_URL is not set"),
    ({"SCANWATCH_BASE_URL": "http://h/api", "SCANWATCH_API_KEY": KEY}, "ending in /v1"),
    ({"SCANWATCH_BASE_URL": "http://h/v1"}, "SCANWATCH_API_KEY is not set"),
    ({"SCANWATCH_BASE_URL": "http://h/v1", "SCANWATCH_API_KEY": "sk_live_x"}, "does not look like an API key"),
    ({"SCANWATCH_BASE_URL": "http://h/v1", "SCANWATCH_API_KEY": "rst_é"}, "holds characters no API key has"),
])
def test_bad_service_settings_name_the_variable(env, says):
    with pytest.raises(ConfigError, match=says):
        _workspace(env)


def test_paths_need_no_credential():
    s = Settings.load({"SCANWATCH_DB": "/d/h.duckdb", "SCANWATCH_SNAPSHOT": "/s/m.json"})
    assert (str(s.paths.db), str(s.paths.snapshot)) == ("/d/h.duckdb", "/s/m.json")


def test_exporter_and_schedule_defaults_come_from_the_settings():
    s = Settings.load({"SCANWATCH_EXPORTER_PORT": "9999", "SCANWATCH_SCAN_TARGETS": " a, ,b "})
    assert (s.exporter_port, s.exporter_address, s.exporter_critical_info) == (9999, "0.0.0.0", 0)
    assert s.scan_targets == {"default": ("a", "b")} and s.refresh_cron == "*/15 * * * *"
    with pytest.raises(ConfigError, match="SCANWATCH_EXPORTER_PORT must be a whole number"):
        _ = Settings.load({"SCANWATCH_EXPORTER_PORT": "http"}).exporter_port


def test_one_key_masker_for_resource_client_and_settings():
    resource = ScanningServiceResource(base_url="http://h/v1", api_key=KEY)
    client = ScanningClient("http://h/v1", KEY)
    try:
        for text in (repr(resource), repr(client), repr(resource.workspace())):
            assert KEY not in text and mask_key(KEY) in text
    finally:
        client.close()


def test_resources_store_variable_names_not_keys(tmp_path):
    file = tmp_path / "ws.yml"
    file.write_text("workspaces:\n  - name: acme\n    api_key_env: KEY_ACME\n")
    resources = default_resources(Settings.load({"SCANWATCH_WORKSPACES_FILE": str(file), "KEY_ACME": KEY}))
    service = resources["scanning_service"]
    assert service.workspaces_file == str(file) and not service.api_key and KEY not in repr(service)


def test_a_resource_follows_its_own_config_over_the_environment(tmp_path, monkeypatch):
    """The resource's settings lay its config over the environment without copying it (every step asks).
    Mutation that fails it: the environment's SCANWATCH_WORKSPACES_FILE read through when the resource names
    none, or the resource's own key or URL losing to the environment's."""
    file = tmp_path / "ws.yml"
    file.write_text("workspaces:\n  - name: acme\n    api_key_env: KEY_ACME\n")
    other = "rst_" + "b2" * 20
    monkeypatch.setenv("SCANWATCH_WORKSPACES_FILE", str(file))
    monkeypatch.setenv("SCANWATCH_BASE_URL", "http://env/v1")
    monkeypatch.setenv("SCANWATCH_API_KEY", other)
    monkeypatch.setenv("KEY_ACME", KEY)
    own = ScanningServiceResource(base_url="http://own/v1", api_key=KEY)
    assert own.workspace_names() == ["default"]
    assert (own.workspace().base_url, own.workspace().api_key) == ("http://own/v1", KEY)
    listed = ScanningServiceResource(workspaces_file=str(file))
    assert listed.workspace_names() == ["acme"]
    assert (listed.workspace("acme").base_url, listed.workspace("acme").api_key) == ("http://env/v1", KEY)
    monkeypatch.setenv("KEY_ACME", other)  # a key rotated in the environment: the next step's ask reads it
    assert listed.workspace("acme").api_key == other
