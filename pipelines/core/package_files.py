"""The demo's data folder and the project files it needs, found in a checkout or in an installed wheel.

A wheel carries `dagster.yaml` as `pipelines/_dagster.yaml` and `prometheus/` as `pipelines/_prometheus`
(pyproject force-includes them), because top-level files are not part of an installed distribution.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
_MARKER = ".scanwatch-demo"
# The Dagster code location's name, as `[tool.dagster] code_location_name` in pyproject.toml says for
# `dagster dev` in a checkout; the demo's workspace file gives it the same name.
CODE_LOCATION = "scanwatch"
_RULE_FILE = re.compile(r"^groups:", re.MULTILINE)


class DemoSetupError(RuntimeError):
    """The data folder or a project file is not usable; the message says what to do."""


@dataclass(frozen=True)
class DemoDirs:
    root: Path
    db: Path
    snapshot: Path
    dagster_home: Path
    prometheus_config: Path
    prometheus_data: Path
    logs: Path


def project_file(installed: str, checkout: str) -> Path | None:
    """An installed copy wins over a stray checkout, as for the SQL files."""
    for candidate in (_PACKAGE_DIR / installed, _PACKAGE_DIR.parent / checkout):
        if candidate.exists():
            return candidate
    return None


def prepare(root: Path) -> DemoDirs:
    """A fresh demo folder: the simulator's world is new on every start, so yesterday's history would not match it.

    Only a folder the demo made itself (it holds a marker file) is emptied; any other non-empty folder is
    refused, so `--data-dir ~` cannot delete anything of the user's.
    """
    root = root.resolve()
    if root.exists() and not root.is_dir():
        raise DemoSetupError(f"--data-dir {root} is a file; give a folder")
    if root.is_dir() and any(root.iterdir()) and not (root / _MARKER).exists():
        raise DemoSetupError(f"--data-dir {root} is not empty and was not made by scanwatch demo; "
                             "give an empty or new folder")
    if root.is_dir():
        for entry in root.iterdir():
            if entry.name == _MARKER:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    root.mkdir(parents=True, exist_ok=True)
    (root / _MARKER).write_text("made by `scanwatch demo`; emptied at each demo start\n")
    dirs = DemoDirs(
        root=root, db=root / "scanwatch.duckdb", snapshot=root / "scanwatch-metrics.json",
        dagster_home=root / "dagster_home", prometheus_config=root / "prometheus.yml",
        prometheus_data=root / "prometheus", logs=root / "logs",
    )
    for folder in (dirs.dagster_home, dirs.prometheus_data, dirs.logs):
        folder.mkdir(parents=True, exist_ok=True)
    dagster_yaml = project_file("_dagster.yaml", "dagster.yaml")
    if dagster_yaml is None:
        raise DemoSetupError("dagster.yaml not found beside the pipelines package (checkout) nor as "
                             "pipelines/_dagster.yaml (wheel); reinstall scanwatch")
    shutil.copyfile(dagster_yaml, dirs.dagster_home / "dagster.yaml")
    write_workspace(dirs)
    return dirs


def write_workspace(dirs: DemoDirs) -> Path:
    """A Dagster workspace file loading the code location under its name (`dagster dev -m` would call it
    `pipelines.definitions`)."""
    path = dirs.root / "workspace.yaml"
    path.write_text("load_from:\n  - python_module:\n      module_name: pipelines.definitions\n"
                    f"      location_name: {CODE_LOCATION}\n")
    return path


def rule_files() -> list[Path]:
    """The project's alert and recording rules: YAML files under prometheus/ whose top level is `groups:`.

    Recognised by content rather than by name so that `prometheus.yml` and `promtool test rules` files
    (which hold `rule_files:` and `tests:`) are left out whatever the rules folder's layout becomes.
    """
    folder = project_file("_prometheus", "prometheus")
    if folder is None or not folder.is_dir():
        return []
    found = []
    for path in sorted([*folder.rglob("*.yml"), *folder.rglob("*.yaml")]):
        try:
            if _RULE_FILE.search(path.read_text(encoding="utf-8")):
                found.append(path)
        except OSError:
            continue
    return found


def scrape_job_name() -> str:
    """The exporter's job name in the repo's prometheus.yml, so rules that select on `job` still match."""
    config = project_file("_prometheus/prometheus.yml", "prometheus/prometheus.yml")
    if config is not None:
        match = re.search(r"job_name:\s*['\"]?([\w.-]+)", config.read_text(encoding="utf-8"))
        if match:
            return match.group(1)
    return "scanwatch"


def write_prometheus_config(dirs: DemoDirs, exporter_port: int) -> list[Path]:
    """A config that scrapes the demo's exporter every 15 s and loads the project's rules; returns the rules.

    YAML is written as JSON (a subset of YAML), so no YAML library is needed at run time.
    """
    rules = rule_files()
    config = {
        "global": {"scrape_interval": "15s", "evaluation_interval": "15s"},
        "rule_files": [str(p) for p in rules],
        "scrape_configs": [{
            "job_name": scrape_job_name(),
            "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}],
        }],
    }
    dirs.prometheus_config.write_text("# written by `scanwatch demo`\n" + json.dumps(config, indent=2) + "\n")
    return rules


_INSTANCE_DBS = ("history/runs.db", "history/runs/index.db", "schedules/schedules.db")


def instance_initialised(dagster_home: Path) -> bool:
    """Whether a process has created and stamped the Dagster instance's SQLite storage.

    Two processes creating a fresh instance at once leave two alembic heads and the code server then
    refuses to load, so `dagster dev` starts only once the first sync has created the storage.
    """
    for name in _INSTANCE_DBS:
        path = dagster_home / name
        if not path.exists():
            return False
        try:
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.5)) as conn:
                if conn.execute("SELECT count(*) FROM alembic_version").fetchone()[0] != 1:
                    return False
        except sqlite3.Error:
            return False
    return True
