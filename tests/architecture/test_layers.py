"""The import graph of `pipelines/` and `exporters/` runs one way: a module imports its own layer or lower.

A reader following one sync then walks down, never back up: the CLI starts Dagster's run, the assets
call storage and the API client, storage runs SQL, and every layer reads the same settings and
vocabulary. The exporter stands beside it and shares only the snapshot format (and the one settings
object, in its command entry). docs/architecture.md draws the same layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Lowest first. A module is named, or falls under a package named with `.*` (`pipelines.api.*`); a new
# module must be placed here, so where it stands is a decision, not an accident.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # the snapshot contract: what the pipeline writes and the exporter reads, standing on nothing of either
    ("snapshot", ("pipelines", "pipelines.snapshot", "pipelines.snapshot.*")),
    ("core", ("pipelines.core", "pipelines.core.*")),
    ("api", ("pipelines.api", "pipelines.api.*")),
    ("storage", ("pipelines.storage", "pipelines.storage.*", "pipelines.backfill", "pipelines.backfill.reconstruct")),
    # Dagster-free work: plans and merges that take a client and a history
    ("sync", ("pipelines.sync", "pipelines.sync.*")),
    ("dagster", ("pipelines.defs", "pipelines.defs.*", "pipelines.definitions")),
    ("commands", ("pipelines.commands", "pipelines.commands.*", "pipelines.history", "pipelines.backfill.tsdb",
                  "pipelines.backfill.remote",
                  "pipelines.backfill.openmetrics", "pipelines.cli")),
    ("exporter", ("exporters", "exporters.*")),
]
# What the exporter may take from `pipelines`: the snapshot contract anywhere, and its command (the composition
# root) the one settings object and the engine factory, which hands out a PostgreSQL history's snapshot store.
EXPORTER_MAY_IMPORT = {"exporters.cli": {"pipelines.core.settings", "pipelines.storage.destinations.impl"}}


def modules(root: Path) -> dict[str, str]:
    """Module name -> source, for every file of `pipelines/` and `exporters/`."""
    found = {}
    for path in sorted([*root.glob("pipelines/**/*.py"), *root.glob("exporters/**/*.py")]):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path.read_text(encoding="utf-8")
    return found


def imports(source: str, known: set[str]) -> set[str]:
    """The project modules `source` imports, at module level or inside a function alike."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pipelines import milestones` imports the module pipelines.core.milestones
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                     for a in node.names]
        out.update(n for n in names if n in known)
    return out


def layer_of(module: str) -> int:
    """The layer naming `module` itself, else the one whose longest `package.*` holds it."""
    best, depth = None, -1
    for index, (_, members) in enumerate(LAYERS):
        for member in members:
            if module == member:
                return index
            if member.endswith(".*") and module.startswith(member[:-1]) and member.count(".") > depth:
                best, depth = index, member.count(".")
    if best is None:
        raise LookupError(f"{module} is in no layer: name it in LAYERS")
    return best


def violations(sources: dict[str, str]) -> list[str]:
    """Every import that goes up a layer, or from the exporter into `pipelines` beyond what it may take."""
    known = set(sources)
    found = []
    for module, source in sorted(sources.items()):
        here = layer_of(module)
        for target in sorted(imports(source, known) - {module}):
            there = layer_of(target)
            if LAYERS[here][0] == "exporter" and target.startswith("pipelines"):
                if LAYERS[there][0] != "snapshot" and target not in EXPORTER_MAY_IMPORT.get(module, set()):
                    found.append(f"{module} (exporter) imports {target}: the exporter reads the snapshot only")
            elif there > here:
                found.append(f"{module} ({LAYERS[here][0]}) imports {target} ({LAYERS[there][0]}): upward")
    return found


def test_every_module_has_a_layer():
    for module in modules(ROOT):
        layer_of(module)


def test_imports_only_go_down():
    assert violations(modules(ROOT)) == []


@pytest.mark.parametrize(("module", "line", "said"), [
    ("pipelines.storage.merge", "from pipelines.defs.assets.step import Step", "(dagster): upward"),
    ("pipelines.api.client", "import pipelines.storage.db", "(storage): upward"),
    ("pipelines.sync.snapshot", "from pipelines.commands.materialize import materialize_all", "(commands): upward"),
    ("exporters.collector", "from pipelines.sync.snapshot import refresh_snapshot", "the exporter reads the snapshot"),
    ("exporters.source", "from pipelines.core import vocabulary", "the exporter reads the snapshot"),
])
def test_an_upward_import_is_caught(module, line, said):
    sources = modules(ROOT)
    sources[module] += f"\n\ndef added():\n    {line}\n"
    found = violations(sources)
    assert len(found) == 1 and found[0].startswith(module) and said in found[0], found


def test_a_module_outside_the_layers_is_named():
    sources = {**modules(ROOT), "pipelines.newcomer": ""}
    with pytest.raises(LookupError, match=r"pipelines\.newcomer is in no layer"):
        for module in sources:
            layer_of(module)


def cycles(sources: dict[str, str]) -> list[list[str]]:
    """Groups of modules that import each other, directly or round a loop (Tarjan's components)."""
    known = set(sources)
    graph = {m: sorted(imports(s, known) - {m}) for m, s in sources.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group: list[str] = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_two_modules_import_each_other():
    # Within a layer too: a reader who follows an import never comes back to where they started.
    assert cycles(modules(ROOT)) == []


def test_a_loop_is_caught():
    sources = modules(ROOT)
    sources["pipelines.core.credentials"] += "\n\ndef added():\n    from pipelines.core.settings import Settings\n"
    # settings reads the workspaces file and the history's location, which both stand on credentials: the added
    # import closes the loop
    assert cycles(sources) == [["pipelines.core.credentials", "pipelines.core.history_location",
                                "pipelines.core.ownership", "pipelines.core.settings",
                                "pipelines.core.workspaces_file"]]


def folder_pairs(sources: dict[str, str]) -> list[tuple[str, str]]:
    """Folders that import each other: a reader who follows one folder into another never has to come back."""
    known = set(sources)
    folder = {m: m if (ROOT / m.replace(".", "/")).is_dir() else m.rpartition(".")[0] for m in sources}
    edges = {(folder[m], folder[t]) for m, s in sources.items() for t in imports(s, known) if folder[m] != folder[t]}
    return sorted((a, b) for a, b in edges if (b, a) in edges and a < b)


def test_no_two_folders_import_each_other():
    assert folder_pairs(modules(ROOT)) == []


def test_two_folders_importing_each_other_are_caught():
    sources = modules(ROOT)
    sources["pipelines.core.settings"] += "\n\ndef added():\n    from pipelines.storage import db\n"
    pair = ("pipelines.core", "pipelines.storage")
    assert pair not in folder_pairs(modules(ROOT)) and pair in folder_pairs(sources)
