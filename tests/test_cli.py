import subprocess
import sys

from pipelines.cli import SUBCOMMANDS
from pipelines.settings import Settings


def test_help_lists_every_promised_command():
    out = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in ("simulator", "sync", "exporter", "demo", "sql"):
        assert name in out
    assert set(SUBCOMMANDS) == {"simulator", "sync", "exporter", "demo", "sql"}


def test_snapshot_defaults_beside_the_database():
    p = Settings.load({"SCANWATCH_DB": "/x/y/history.duckdb"}).paths
    assert str(p.snapshot) == "/x/y/scanwatch-metrics.json"
    assert str(Settings.load({}).paths.db) == "data/scanwatch.duckdb"
