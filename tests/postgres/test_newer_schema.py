"""A history at a newer schema than this scanwatch's (a newer version wrote it) takes no writes from this one:
a sync stops in one line naming both versions, before it rewrites anything (the views layer above all: two
versions alternating once rewrote it at every sync, and readers mid-rewrite exited); readers still read."""

from __future__ import annotations

import os

from pipelines.cli import main
from pipelines.storage import connect
from pipelines.storage.db import latest_version
from tests.backends import is_postgres, rows

VIEWS = {"duckdb": "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1",
         "postgres": "SELECT viewname, definition FROM pg_views WHERE schemaname = current_schema() ORDER BY 1"}


def _views(db: str) -> list[tuple]:
    return rows(db, VIEWS["postgres" if is_postgres(db) else "duckdb"]) + rows(db, "SELECT digest FROM view_layer")


def _run(monkeypatch, capsys, db: str, *args: str) -> tuple[int, str, str]:
    for key in [k for k in os.environ if k.startswith(("SCANWATCH_", "DAGSTER_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SCANWATCH_DB", db)
    monkeypatch.setenv("SCANWATCH_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("SCANWATCH_API_KEY", "rst_" + "k" * 40)
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_newer_schema_is_refused_for_writing_and_still_read(engine_db, monkeypatch, capsys):
    ours = latest_version()
    conn = connect(engine_db)
    try:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES ($v, 'from_a_newer_scanwatch.sql')",
                     {"v": ours + 1})
        # The newer version's own views layer, as far as this one can tell: another digest.
        conn.execute("DELETE FROM view_layer")
        conn.execute("INSERT INTO view_layer (digest) VALUES ('views of schema ' || CAST($v AS VARCHAR))",
                     {"v": ours + 1})
        conn.execute("COMMIT")
    finally:
        conn.close()
    before = _views(engine_db)
    code, out, err = _run(monkeypatch, capsys, engine_db, "sync")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code != 0 and len(lines) == 1 and "Traceback" not in err, err
    assert f"schema {ours + 1}" in lines[0] and f"this scanwatch's {ours}" in lines[0], lines[0]
    assert _views(engine_db) == before
    code, out, err = _run(monkeypatch, capsys, engine_db, "sql", "SELECT max(version) AS v FROM schema_migrations",
                          "--format", "csv", "--as-writer")  # the scratch server's superuser, on purpose
    assert (code, out.split()) == (0, ["v", str(ours + 1)]), err
    code, out, err = _run(monkeypatch, capsys, engine_db, "sql", "SELECT count(*) AS n FROM visible_issues",
                          "--format", "csv", "--as-writer")
    assert (code, out.split()) == (0, ["n", "0"]), err
    assert _views(engine_db) == before
