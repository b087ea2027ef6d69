import subprocess
import sys

from pipelines import settings
from pipelines.cli import SUBCOMMANDS


def test_help_lists_every_promised_command():
    out = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in ("simulator", "sync", "exporter", "demo", "sql"):
        assert name in out
    assert set(SUBCOMMANDS) == {"simulator", "sync", "exporter", "demo", "sql"}


def test_snapshot_defaults_beside_the_database():
    p = settings.paths({"SCANWATCH_DB": "/x/y/history.duckdb"})
    assert str(p.snapshot) == "/x/y/scanwatch-metrics.json"
    assert str(settings.paths({}).db) == "data/scanwatch.duckdb"


def test_service_settings_name_the_variable_to_fix():
    import pytest

    with pytest.raises(settings.ConfigError, match="SCANWATCH_BASE_URL"):
        settings.service({"SCANWATCH_API_KEY": "rst_x"})
    with pytest.raises(settings.ConfigError, match="ending in /v1"):
        settings.service({"SCANWATCH_BASE_URL": "http://h/api", "SCANWATCH_API_KEY": "rst_x"})
    with pytest.raises(settings.ConfigError, match="SCANWATCH_API_KEY"):
        settings.service({"SCANWATCH_BASE_URL": "http://h/v1"})
    assert settings.service({"SCANWATCH_BASE_URL": "http://h/v1/", "SCANWATCH_API_KEY": " rst_k "}) == (
        "http://h/v1",
        "rst_k",
    )
