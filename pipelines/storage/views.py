"""The views layer: each derived rule of the history (`sql/views/*.sql`) as one view, kept current.

A rule such as "open and visible", "what a workspace is called" or "the severity an issue was first seen
with" is written once, as a view, and every snapshot, cookbook, check and backfill query reads it there.
Migrations carry tables and data only: the writer recreates the views whenever their definition differs
from the one the history holds (a digest of the files' texts in `view_layer`), so changing a rule is an edit
of its file, and opening an up-to-date history (many times per sync) costs one read.

Each file holds one `CREATE VIEW <its own name> AS ...`. A view may read another; they are created in the
order their texts name each other and dropped in the reverse, so both engines (DuckDB and PostgreSQL, which
refuses to drop a view another one reads or to change a view's columns in place) accept the replacement.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.core.sqlfiles import read_sql, sql_dir, transaction

if TYPE_CHECKING:
    from pipelines.storage.destinations import Connection

_COMMENT = re.compile(r"--[^\n]*")


def definitions() -> dict[str, str]:
    """Each view's name and statement, in an order where every view comes after the views it reads. Read once
    per process while the files stay as they are (a sync opens the history many times)."""
    files = sorted((sql_dir() / "views").glob("*.sql"))
    return _definitions(tuple((path, path.stat().st_mtime_ns, path.stat().st_size) for path in files))


@functools.lru_cache(maxsize=4)
def _definitions(files: tuple[tuple[Path, int, int], ...]) -> dict[str, str]:
    texts = {path.stem: read_sql(f"views/{path.name}") for path, _, _ in files}
    for name, text in texts.items():
        if not re.search(rf"\bCREATE\s+VIEW\s+{name}\s+AS\b", text, re.IGNORECASE):
            raise ValueError(f"sql/views/{name}.sql must define the view {name} (CREATE VIEW {name} AS ...)")
    reads = {name: {other for other in texts if other != name and re.search(rf"\b{other}\b", _COMMENT.sub("", text))}
             for name, text in texts.items()}
    ordered: dict[str, str] = {}
    while len(ordered) < len(texts):
        ready = [name for name in texts if name not in ordered and reads[name] <= ordered.keys()]
        if not ready:
            raise ValueError(f"sql/views: views that read each other in a loop: {sorted(set(texts) - ordered.keys())}")
        for name in ready:
            ordered[name] = texts[name]
    return ordered


def digest(views: dict[str, str]) -> str:
    return hashlib.sha256("\n".join(f"{name}\n{text}" for name, text in views.items()).encode()).hexdigest()


def drop_views(conn: Connection, views: dict[str, str] | None = None) -> None:
    """Drop the layer's views the history holds, readers first (before a migration changes a table they read).
    A name of the layer that is still a table's is left to the migration that replaces the table."""
    held = {name for (name,) in conn.execute(read_sql("storage/views_held.sql")).fetchall()}
    for name in reversed(list(views or definitions())):
        if name in held:
            conn.execute(f'DROP VIEW "{name}"')
    conn.execute(read_sql("storage/view_layer_clear.sql"))


def write_views(conn: Connection) -> bool:
    """Recreate every view when the history's copy of the layer differs from the files; returns whether it
    did. One read when it is current (the usual open), one transaction when it is not."""
    views = definitions()
    wanted = digest(views)
    held = conn.execute(read_sql("storage/view_layer.sql")).fetchall()
    if held and held[0][0] == wanted:
        conn.engine.grant_views(conn, list(views))
        return False
    with transaction(conn):
        drop_views(conn, views)
        for text in views.values():
            conn.execute(text)
        conn.execute(read_sql("storage/view_layer_record.sql"), {"digest": wanted})
        conn.engine.grant_views(conn, list(views))
    return True
