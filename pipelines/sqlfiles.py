"""Find the project's `.sql` files wherever scanwatch runs from.

A source checkout keeps them in `<repo>/sql`; a built wheel carries its own copy as `pipelines/_sql`
(pyproject force-includes it), because a top-level `sql/` is not part of an installed distribution.
Migrations, snapshot SQL and the cookbook all go through here so there is one answer to "where".
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_INSTALLED = _PACKAGE_DIR / "_sql"
_CHECKOUT = _PACKAGE_DIR.parent / "sql"


def sql_dir() -> Path:
    """The folder holding `migrations/` and `queries/`; an installed copy wins over a stray checkout."""
    for candidate in (_INSTALLED, _CHECKOUT):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"scanwatch SQL files not found (looked in {_INSTALLED} and {_CHECKOUT})")


def read_sql(relative: str) -> str:
    """Text of one file under `sql_dir()`, e.g. `migrations/001_initial.sql`; refuses paths that leave it."""
    base = sql_dir().resolve()
    path = (base / relative).resolve()
    if not path.is_relative_to(base):
        raise ValueError(f"{relative!r} is outside the SQL folder")
    return path.read_text(encoding="utf-8")
