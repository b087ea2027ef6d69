import subprocess
import sys

from pipelines.cli import SUBCOMMANDS
from pipelines.core.settings import Settings


def test_help_lists_every_promised_command():
    out = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    promised = {"simulator", "sync", "exporter", "demo", "sql", "backfill", "backfill-prometheus", "config", "roles",
                "backup", "restore", "prune", "workspaces"}
    for name in promised:
        assert name in out
    assert set(SUBCOMMANDS) == promised


def test_snapshot_defaults_beside_the_database():
    p = Settings.load({"SCANWATCH_DB": "/x/y/history.duckdb"}).paths
    assert str(p.snapshot) == "/x/y/scanwatch-metrics.json"
    assert str(Settings.load({}).paths.db) == "data/scanwatch.duckdb"


def test_version_is_the_installed_package_version():
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "--version"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"scanwatch {version('scanwatch')}"
