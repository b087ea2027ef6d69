"""`scanwatch sql --workspace` is a filter, and the docs say so: the cookbook and queries on the history's
own names see one workspace's rows; whoever can open the history reads every workspace, through a
qualified name (`h.main.issues`), `query_table`, `SUMMARIZE` or `duckdb_tables()` alike. The boundary is
who may read the file (or, on PostgreSQL, log in to the database), as docs/workspaces.md says."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.storage import connect
from tests.reliability.harness import ROOT

DOCS = {name: (ROOT / name).read_text() for name in ("README.md", "docs/workspaces.md", "docs/hostile.md")}


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> Path:
    """A history holding two workspaces, as two syncs would leave it (one project and issue each)."""
    db = tmp_path_factory.mktemp("sqlws") / "h.duckdb"
    conn = connect(db)
    for n, (wid, label) in enumerate((("ws-a", "acme"), ("ws-b", "beta"))):
        conn.execute("INSERT INTO accounts (workspace_id, workspace_name, workspace_label, plan, first_observed_at, "
                     "last_observed_at) VALUES (?, ?, ?, 'pro', now(), now())", [wid, label.title(), label])
        conn.execute("INSERT INTO projects (workspace_id, id, name, first_observed_at, last_observed_at) "
                     "VALUES (?, ?, 'Storefront', now(), now())", [wid, f"p{n}"])
        conn.execute("INSERT INTO issues (workspace_id, id, project_id, target_id, severity, status, title, "
                     "first_seen_at, last_seen_at, first_observed_at, last_observed_at) VALUES "
                     "(?, ?, ?, 't', 'high', 'open', 'x', now(), now(), now(), now())", [wid, f"i{n}", f"p{n}"])
    conn.close()
    return db


def sql(db: Path, query: str, workspace: str | None = "acme") -> list[dict]:
    args = [sys.executable, "-m", "pipelines.cli", "sql", query, "--db", str(db), "--format", "json"]
    done = subprocess.run([*args, *(["--workspace", workspace] if workspace else [])], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_historys_own_names_and_the_cookbook_see_one_workspace(two):
    assert sql(two, "SELECT DISTINCT workspace_id FROM issues") == [{"workspace_id": "ws-a"}]
    assert sql(two, "SELECT DISTINCT workspace_id FROM open_issues_now") == [{"workspace_id": "ws-a"}]
    assert {r["project_id"] for r in sql(two, "open_issues_by_project")} == {"p0"}


@pytest.mark.parametrize(("query", "sees_both"), [
    ("SELECT count(DISTINCT workspace_id) AS n FROM h.main.issues", lambda rows: rows == [{"n": 2}]),
    ("SELECT count(DISTINCT workspace_id) AS n FROM query_table('h.main.issues')", lambda rows: rows == [{"n": 2}]),
    ("SUMMARIZE h.main.issues", lambda rows: next(r for r in rows if r["column_name"] == "workspace_id")[
        "approx_unique"] == 2),
    ("SELECT estimated_size AS n FROM duckdb_tables() WHERE table_name = 'issues' AND NOT temporary",
     lambda rows: rows == [{"n": 2}]),
])
def test_it_is_a_filter_not_a_boundary(two, query, sees_both):
    catalog = two.stem  # DuckDB names the file's catalog after it
    rows = sql(two, query.replace("h.main.", f"{catalog}.main."))
    assert sees_both(rows), rows


def test_the_docs_call_it_a_filter_and_name_the_boundary():
    for name, text in DOCS.items():
        flat = " ".join(text.split())
        assert re.search(r"--workspace.{0,200}\bfilter\b", flat), name
    workspaces = " ".join(DOCS["docs/workspaces.md"].split())
    assert "not a boundary" in workspaces and "can read the history file reads every workspace" in workspaces
    assert "PostgreSQL" in workspaces and "sees one workspace" not in workspaces
