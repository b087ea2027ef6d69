"""Dagster stays at the edge: the work in `pipelines/sync/` knows nothing of it, configuration reaches the
Dagster definitions through their resources, and `dg` loads the code location as a project."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _sources(folder: str) -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(encoding="utf-8"))
            for p in sorted((ROOT / folder).rglob("*.py"))}


def test_nothing_in_sync_imports_dagster():
    found = []
    for name, tree in _sources("pipelines/sync").items():
        for node in ast.walk(tree):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{name}: {m}" for m in modules if m.split(".")[0] in {"dagster", "dagster_postgres"}
                      or m.startswith("pipelines.defs") or m == "pipelines.definitions"]
    assert found == []


def test_only_the_resources_and_the_schedules_cadences_read_the_settings():
    """Assets, sensors and schedule ticks ask their resources; a cron, part of a schedule's definition, is
    read once when the code location loads."""
    readers = set()
    for name, tree in _sources("pipelines/defs").items():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "Settings"):
                readers.add(name)
    assert readers == {"pipelines/defs/resources.py", "pipelines/defs/schedules.py"}


IMPORT_EVERYTHING = """
import importlib, pkgutil
import pipelines.core.settings as settings

def refuse(*args, **kwargs):
    raise AssertionError("the settings were read at import")

settings.Settings.load = classmethod(refuse)
import pipelines.defs
for module in pkgutil.walk_packages(pipelines.defs.__path__, "pipelines.defs."):
    importlib.import_module(module.name)
import pipelines.definitions
print("imported")
"""


def test_importing_the_code_location_reads_no_setting():
    """Dagster imports the module before it loads the definitions; a setting read at import (a schedule's
    cron, the followed workspaces) was read once per process and never again."""
    done = subprocess.run([sys.executable, "-c", IMPORT_EVERYTHING], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr[-2000:]


def test_dg_checks_the_code_location_clean(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    env = {**os.environ, "DAGSTER_HOME": str(home), "VIRTUAL_ENV": str(BIN.parent),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("SCANWATCH_WORKSPACES_FILE", None)
    done = subprocess.run([str(BIN / "dg"), "check", "defs"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "All definitions loaded successfully." in done.stdout + done.stderr
