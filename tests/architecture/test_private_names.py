"""Tests and benchmarks use the product through its public names only.

A test that imports or patches an underscore name of `pipelines`, `exporters` or `simulator` holds the
product's insides in place: renaming a helper breaks it though no user sees a change, and a test that patches
one proves something about code no user runs. Where a test truly needs a seam, the product makes it public and
says why in its docstring; otherwise the test goes through the behaviour a user sees.

What counts as touching a private name, read from each file's syntax tree:
- importing one (`from pipelines.storage.db import _has_table`, or a module under a private segment);
- reading or writing one on a name bound to the product: a module or object imported from it
  (`storage_db._migrations`), or what a call of one returned (`pacer = Pacer(); pacer._wait_needed(0)`);
- naming one to `setattr`/`getattr`/`delattr`/`hasattr`, `monkeypatch.setattr`/`delattr` or
  `mock.patch.object` on such a name (`monkeypatch.setattr(Pacer, "_observe", ...)`), or in a dotted string
  (`"pipelines.api.pacing.Pacer._observe"`).
Dunder names (`__init__`) are Python's, not the product's.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.architecture.test_layers import ROOT

PRODUCT = ("pipelines", "exporters", "simulator")
PATCHERS = {"setattr", "getattr", "delattr", "hasattr", "object"}
_DOTTED = re.compile(r"^(?:" + "|".join(PRODUCT) + r")(?:\.\w+)*\._[A-Za-z]")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _product(module: str) -> bool:
    return module.split(".")[0] in PRODUCT


def _root(node: ast.expr) -> ast.expr:
    """The start of a chain `a.b.c` (or of `f(...).b`)."""
    while isinstance(node, ast.Attribute | ast.Call):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return node


def private_uses(source: str) -> list[str]:
    """`line: what` for every private product name `source` imports or touches."""
    tree = ast.parse(source)
    bound: set[str] = set()  # names standing for a product module or object in this file
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and _product(node.module):
            for alias in node.names:
                if any(_private(part) for part in node.module.split(".")) or _private(alias.name):
                    found.append((node.lineno, f"imports {node.module}.{alias.name}"))
                bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _product(alias.name):
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append((node.lineno, f"imports {alias.name}"))
                    bound.add(alias.asname or alias.name.split(".")[0])
    # What a call of a product name returns is the product's too (an instance, a connection).
    changed = True
    while changed:
        changed = False
        for node in ast.walk(tree):
            pairs: list[tuple[ast.expr, ast.expr | None]] = []
            if isinstance(node, ast.Assign):
                pairs = [(target, node.value) for target in node.targets]
            elif isinstance(node, ast.AnnAssign | ast.NamedExpr):
                pairs = [(node.target, node.value)]
            elif isinstance(node, ast.With | ast.AsyncWith):
                pairs = [(item.optional_vars, item.context_expr) for item in node.items if item.optional_vars]
            for target, value in pairs:
                if isinstance(target, ast.Name) and target.id not in bound and isinstance(value, ast.Call):
                    root = _root(value)
                    if isinstance(root, ast.Name) and root.id in bound:
                        bound.add(target.id)
                        changed = True
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = _root(node)
            if isinstance(root, ast.Name) and root.id in bound:
                found.append((node.lineno, f"touches {ast.unparse(node)}"))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            args = node.args
            if name in PATCHERS and len(args) >= 2 and isinstance(args[1], ast.Constant) and \
                    isinstance(args[1].value, str) and _private(args[1].value):
                root = _root(args[0])
                if isinstance(root, ast.Name) and root.id in bound:
                    found.append((node.lineno, f"patches {ast.unparse(args[0])}.{args[1].value}"))
            for arg in args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _DOTTED.match(arg.value):
                    found.append((node.lineno, f"patches {arg.value}"))
    return [f"{line}: {what}" for line, what in sorted(set(found))]


def checked_files() -> list[Path]:
    return sorted([*ROOT.glob("tests/**/*.py"), *ROOT.glob("benchmarks/**/*.py")])


def test_no_test_imports_or_patches_a_private_product_name():
    found = [f"{path.relative_to(ROOT)}:{use}" for path in checked_files()
             for use in private_uses(path.read_text(encoding="utf-8"))]
    assert found == []


@pytest.mark.parametrize(("source", "said"), [
    ("from pipelines.storage.db import _has_table", "1: imports pipelines.storage.db._has_table"),
    ("from pipelines._sql import x", "1: imports pipelines._sql.x"),
    ("from pipelines.storage import db as storage_db\nstorage_db._migrations()",
     "2: touches storage_db._migrations"),
    ("import pipelines.storage.merge\npipelines.storage.merge._set_context(1)",
     "2: touches pipelines.storage.merge._set_context"),
    ("from pipelines.api import Pacer\npacer = Pacer(clock=1)\npacer._wait_needed(0)",
     "3: touches pacer._wait_needed"),
    ("from pipelines.storage import connect\nwith connect('h') as conn:\n    conn._raw", "3: touches conn._raw"),
    ("from pipelines.api import Pacer\ndef t(monkeypatch):\n    monkeypatch.setattr(Pacer, '_observe', 1)",
     "3: patches Pacer._observe"),
    ("from pipelines.core import sqlfiles\nsetattr(sqlfiles, '_CHECKOUT', 1)", "2: patches sqlfiles._CHECKOUT"),
    ("def t(monkeypatch):\n    monkeypatch.setattr('pipelines.api.pacing.Pacer._observe', 1)",
     "2: patches pipelines.api.pacing.Pacer._observe"),
])
def test_a_private_name_imported_touched_or_patched_is_caught(source, said):
    assert private_uses(source) == [said]


@pytest.mark.parametrize("source", [
    "from pipelines.storage.destinations.impl.postgres.errors import driver_reason as _reason",
    "from pipelines.api import Pacer\nclass P(Pacer):\n    def __init__(self):\n        super().__init__()",
    "from tests.helpers import _issue\n_issue(1)._x",  # the tests' own insides are theirs
    "import os\nos._exit(0)",
    "from pipelines.storage import db\ndb.latest_version()\nthing = object()\nthing._x",
])
def test_public_names_the_tests_own_and_other_libraries_pass(source):
    assert private_uses(source) == []
