"""Each history engine keeps to its own room (`pipelines/storage/destinations/impl/<name>/`): outside it no
code asks which engine answers (it asks the engine: a hook or a capability), and no code but the engines
touches a database driver, so a driver's error never reaches a caller that would have to know the engine.

`HistoryLocation` (`pipelines/core/history_location.py`) is the one place that reads `SCANWATCH_DB` as a
path or a URL, and the factory (`destinations/impl/__init__.py`) the one place that turns that into an
engine. The exporter's store of a PostgreSQL-kept snapshot is the engine's too
(`impl/postgres/snapshot_store.py`): the exporter's command asks the factory for it, and the rest of the
exporter reads the snapshot contract only.
"""

from __future__ import annotations

import ast

from tests.architecture.test_layers import ROOT, modules

ENGINES = "pipelines.storage.destinations.impl"
LOCATION = "pipelines.core.history_location"
DRIVERS = {"duckdb", "psycopg", "psycopg_pool", "psycopg2"}
# module -> the drivers it may import outside the engines' rooms, and why (none: every driver is in a room)
DRIVER_ALLOWED: dict[str, set[str]] = {}


def _inside(module: str) -> bool:
    return module == ENGINES or module.startswith(ENGINES + ".")


def engine_branches(sources: dict[str, str]) -> list[str]:
    """Every `x.is_postgres`, and every comparison with `x.engine.name`, outside the engines and the location."""
    found = []
    for module, source in sorted(sources.items()):
        if _inside(module) or module == LOCATION:
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Attribute) and node.attr == "is_postgres":
                found.append(f"{module}:{node.lineno} asks is_postgres")
            elif isinstance(node, ast.Compare):
                for side in [node.left, *node.comparators]:
                    if isinstance(side, ast.Attribute) and side.attr == "name" and \
                            isinstance(side.value, ast.Attribute) and side.value.attr == "engine":
                        found.append(f"{module}:{node.lineno} compares engine.name")
    return found


def driver_imports(sources: dict[str, str]) -> list[str]:
    """Every import of a database driver outside the engines (but the allowed ones)."""
    found = []
    for module, source in sorted(sources.items()):
        if _inside(module):
            continue
        for node in ast.walk(ast.parse(source)):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in DRIVERS and top not in DRIVER_ALLOWED.get(module, set()):
                    found.append(f"{module}:{node.lineno} imports {name}")
    return found


def test_no_module_outside_the_engines_asks_which_engine_answers():
    assert engine_branches(modules(ROOT)) == []


def test_no_module_outside_the_engines_touches_a_driver():
    assert driver_imports(modules(ROOT)) == []


def test_a_branch_or_a_driver_outside_the_engines_is_caught():
    sources = modules(ROOT)
    sources["pipelines.storage.db"] += ("\n\ndef added(conn, location):\n    import duckdb\n"
                                        "    return location.is_postgres or conn.engine.name == 'postgres'\n")
    sources["pipelines.snapshot.store"] += "\n\ndef added():\n    from psycopg import sql\n"
    assert [line.split(" ", 1)[1] for line in engine_branches(sources)] == ["asks is_postgres",
                                                                            "compares engine.name"]
    assert [line.split(" ", 1)[1] for line in driver_imports(sources)] == ["imports psycopg",
                                                                           "imports duckdb"]
