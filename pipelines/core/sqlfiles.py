"""Find the project's `.sql` files wherever scanwatch runs from.

A source checkout keeps them in `<repo>/sql`; a built wheel carries its own copy as `pipelines/_sql`
(pyproject force-includes it), because a top-level `sql/` is not part of an installed distribution.
Migrations, snapshot SQL and the cookbook all go through here so there is one answer to "where".
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pipelines.core import milestones, vocabulary

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_INSTALLED = _PACKAGE_DIR / "_sql"
_CHECKOUT = _PACKAGE_DIR.parent / "sql"


@functools.cache  # found once per process: every statement's file is read through it
def sql_dir() -> Path:
    """The folder holding `migrations/` and `queries/`; an installed copy wins over a stray checkout."""
    for candidate in (_INSTALLED, _CHECKOUT):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"scanwatch SQL files not found (looked in {_INSTALLED} and {_CHECKOUT})")


def read_sql(relative: str) -> str:
    """Text of one file under `sql_dir()`, e.g. `migrations/001_initial.sql`; refuses paths that leave it.

    A sync runs about 140 statements per workspace, each read here: the path is resolved once per folder and
    name, and the text read again only when the file's size or modification time moved."""
    path = _resolved(sql_dir(), relative)
    status = path.stat()
    signature = (status.st_mtime_ns, status.st_size, status.st_ino)
    known = _TEXTS.get(path)
    if known is not None and known[0] == signature:
        return known[1]
    text = path.read_text(encoding="utf-8")
    _TEXTS[path] = (signature, text)
    return text


_TEXTS: dict[Path, tuple[tuple[int, int, int], str]] = {}


@functools.lru_cache(maxsize=2048)
def _resolved(folder: Path, relative: str) -> Path:
    base = folder.resolve()
    path = (base / relative).resolve()
    if not path.is_relative_to(base):
        raise ValueError(f"{relative!r} is outside the SQL folder")
    return path


class ParsedStatement(Protocol):
    @property
    def query(self) -> str: ...

    @property
    def named_parameters(self) -> Sequence[str]: ...


class SqlConnection(Protocol):
    """What running scanwatch's SQL files asks of a connection: the history's `Connection`
    (`pipelines/storage/destinations`, a layer above this one) is one."""

    def execute(self, sql: str, params: Any = None) -> Any: ...

    def split_statements(self, sql: str) -> Sequence[ParsedStatement]: ...


C = TypeVar("C", bound=SqlConnection)


def execute_file(conn: SqlConnection, relative: str, params: Mapping[str, Any] | None = None,
                 slots: Mapping[str, str] | None = None) -> Any:
    """Run every statement of one file, each with the `$name` parameters it names, and return the cursor of
    the last one (a file may end with the count it reports). Engines bind parameters one statement at a
    time, so a file of several statements cannot take them in one `execute`; the history's engine splits
    it. `slots`: text written into the file's `{name}` slots first (`fill`)."""
    params = params or {}
    cursor: Any = conn
    text = read_sql(relative)
    for statement in conn.split_statements(fill(text, slots) if slots else text):
        cursor = conn.execute(statement.query, {name: params[name] for name in statement.named_parameters})
    return cursor


@contextmanager
def transaction(conn: C, milestone: str | None = None) -> Iterator[C]:
    """One explicit transaction: committed when the block ends, rolled back on any exception (Ctrl-C too).

    `milestone` names the moments just before and after the commit (`merge.before_commit`), at which the
    crash tests stop the process to prove the history stays whole."""
    conn.execute("BEGIN TRANSACTION")
    try:
        yield conn
        if milestone:
            milestones.reached(f"{milestone}.before_commit")
    except BaseException:
        # A connection already lost (a PostgreSQL server restarting) rolled back by itself: the first error is
        # the one to tell.
        with contextlib.suppress(Exception):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    if milestone:
        milestones.reached(f"{milestone}.after_commit")


@dataclass(frozen=True)
class CookbookQuery:
    name: str
    description: str
    sql: str


_HEADER_KEY = re.compile(r"^--\s?(name|description):\s*(.*)$")


def _parse_header(text: str) -> dict[str, str]:
    """Read `-- name:` / `-- description:` from a file's leading comments; indented `--` lines continue a value."""
    fields: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        match = _HEADER_KEY.match(line)
        if match:
            current = match.group(1)
            fields[current] = match.group(2).strip()
        elif current and line.startswith("--  ") and line[2:].strip():
            fields[current] += " " + line[2:].strip()
        else:
            current = None
    return fields


# Two kinds of placeholder, told apart by their syntax. `$name` is a bound parameter, in every file and on
# every engine (the engine binds it: DuckDB itself, PostgreSQL through psycopg). `{name}` is a slot: text
# written into the statement before it runs, where SQL cannot take a parameter (a table's name, a column
# list, the engine's row hash in `sql/merge/`, a severity's name below). Slots are filled by `fill` alone.
_SLOT = re.compile(r"\{([a-z_]+)\}")


def fill(text: str, slots: Mapping[str, str]) -> str:
    """`text` with each `{name}` slot written in from `slots` (KeyError for a slot without a value); `$name`
    parameters are left to the engine."""
    return _SLOT.sub(lambda m: slots[m.group(1)], text)


# `/* each severity: EXPR, */` in a cookbook file: EXPR once per severity of the vocabulary, worst first, with
# the slot `{severity}` standing for its name. A column per severity is the one thing a query's text cannot say in SQL
# that both engines run (DuckDB's PIVOT makes columns from rows; PostgreSQL has no such statement), and the
# severities have one home (pipelines/core/vocabulary.py). Run as it stands, a file simply lacks those columns.
_EACH_SEVERITY = re.compile(r"/\*\s*each severity:\s*(.*?)\s*\*/", re.DOTALL)


def expand_severities(text: str) -> str:
    """`text` with each `/* each severity: ... */` written out for every severity."""
    return _EACH_SEVERITY.sub(
        lambda m: " ".join(fill(m.group(1), {"severity": name}) for name in vocabulary.SEVERITIES), text)


_COOKBOOK_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def cookbook_sql(text: str, queries: dict[str, CookbookQuery] | None = None) -> str:
    """The SQL a user's text stands for: a cookbook query's when it names one, else the text itself. A bare word
    that names no query is a typo, not SQL: KeyError with the word, so each caller says so its own way."""
    queries = cookbook() if queries is None else queries
    name = text.strip()
    if name in queries:
        return queries[name].sql
    if _COOKBOOK_NAME.match(name):
        raise KeyError(name)
    return text


def cookbook() -> dict[str, CookbookQuery]:
    """Every `queries/*.sql` by name, so the CLI, the tests and the demo check agree on one list."""
    queries: dict[str, CookbookQuery] = {}
    folder = sql_dir() / "queries"
    for path in sorted(folder.glob("*.sql")):
        text = path.read_text(encoding="utf-8")
        header = _parse_header(text)
        name = header.get("name") or path.stem
        queries[name] = CookbookQuery(name=name, description=header.get("description", ""),
                                      sql=expand_severities(text))
    return queries
