"""`scanwatch sql` as users run it: a subprocess, its exit code, what it prints, and a history left untouched."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pipelines.core import sqlfiles

REPO = Path(__file__).resolve().parents[2]


def scanwatch_sql(*args: str, db: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SCANWATCH_DB"}
    if db is not None:
        env["SCANWATCH_DB"] = str(db)
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "sql", *args],
        cwd=REPO,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_no_argument_lists_the_cookbook_without_a_database(tmp_path: Path) -> None:
    result = scanwatch_sql(db=tmp_path / "absent.duckdb")
    assert result.returncode == 0, result.stderr
    for name, query in sqlfiles.cookbook().items():
        line = next(x for x in result.stdout.splitlines() if x.strip().startswith(name + " "))
        assert query.description in line


def test_a_cookbook_name_runs_as_a_table(history_db: Path) -> None:
    result = scanwatch_sql("open_issues_by_project", db=history_db)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "workspace", "team", "project", "score", "grade", "critical", "high", "medium", "low", "info", "total",
        "project_id",
    ]
    assert set(lines[1]) <= {"-", " "}
    assert lines[2].split() == ["Acme", "Corp", "unowned", "shop", "70", "C", "1", "2", "0", "0", "0", "3", "p1"]
    assert lines[-1] == "(3 rows)"


def test_csv_output_and_db_option(history_db: Path, tmp_path: Path) -> None:
    result = scanwatch_sql("noisiest_controls", "--format", "csv", "--db", str(history_db), db=tmp_path / "no.duckdb")
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["control_id"], r["issues"], r["open_issues"]) for r in rows[:2]] == [
        ("headers.csp", "4", "1"),
        ("tls.weak", "2", "2"),
    ]
    assert len(rows) == 8


def test_json_output_keeps_types(history_db: Path) -> None:
    result = scanwatch_sql("regressions", "--format", "json", db=history_db)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["issue_id"] for r in rows] == ["i12", "i06"]
    assert rows[0]["times_reopened"] == 1
    assert rows[0]["last_reopened_at"].endswith("T06:00:00+00:00")  # ISO 8601, in UTC


def test_ad_hoc_sql_and_stdin(history_db: Path) -> None:
    result = scanwatch_sql(
        "SELECT severity, count(*) AS n FROM issues WHERE status = 'open' GROUP BY 1 ORDER BY 2 DESC, 1",
        "--format", "json", db=history_db,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [
        {"severity": "high", "n": 3}, {"severity": "critical", "n": 2}, {"severity": "info", "n": 1},
    ]
    piped = scanwatch_sql("-", "--format", "csv", db=history_db, stdin="SELECT count(*) AS issues FROM issues;\n")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.splitlines() == ["issues", "12"]
    tables = scanwatch_sql("SHOW TABLES", "--format", "json", db=history_db)
    assert tables.returncode == 0, tables.stderr
    assert {"issues", "issue_events", "score_snapshots"} <= {r["name"] for r in json.loads(tables.stdout)}


WRITES = [
    "INSERT INTO issues (workspace_id, id, project_id, target_id, first_observed_at, last_observed_at) "
    "VALUES ('w', 'x', 'p', 't', now(), now())",
    "DELETE FROM issues",
    "UPDATE issues SET status = 'fixed'",
    "DROP TABLE issues",
    "CREATE TABLE evil AS SELECT 1",
    "ATTACH '{tmp}/other.duckdb' AS other",
    "COPY issues TO '{tmp}/issues.csv'",
    "EXPORT DATABASE '{tmp}/export'",
    "PRAGMA enable_checkpoint_on_shutdown",
    "SET lock_configuration = false",
    "CHECKPOINT",
    "SELECT 1; DELETE FROM issues",
    "SELECT * FROM read_csv('{tmp}/issues.csv')",
    # A PIVOT with its columns from a query parses as MULTI, as the cookbook's reads do; these are writes.
    "CREATE TABLE evil AS PIVOT issues ON severity IN (SELECT severity FROM severities) USING count(*)",
    "INSERT INTO issues SELECT * FROM (PIVOT issues ON severity IN (SELECT severity FROM severities))",
    "COPY (PIVOT issues ON severity IN (SELECT severity FROM severities) USING count(*)) TO '{tmp}/p.csv'",
    "WITH x AS (SELECT 1) INSERT INTO issues SELECT * FROM (PIVOT issues ON status IN (SELECT status FROM "
    "issue_statuses))",
]


@pytest.mark.parametrize("statement", WRITES)
def test_the_history_cannot_be_changed(history_db: Path, tmp_path: Path, statement: str) -> None:
    before = digest(history_db)
    result = scanwatch_sql(statement.format(tmp=tmp_path), db=history_db)
    assert result.returncode != 0
    assert result.stdout == ""
    assert result.stderr.startswith("scanwatch sql: ")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr  # one line, no traceback
    assert digest(history_db) == before
    assert list(tmp_path.iterdir()) == []  # nothing written beside it either
    with duckdb.connect(str(history_db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM issues").fetchall() == [(12,)]


def test_a_pivot_over_the_vocabulary_is_a_read(history_db: Path) -> None:
    result = scanwatch_sql("-- open issues per severity\nPIVOT (SELECT severity FROM issues WHERE status = 'open') "
                           "ON severity IN (SELECT severity FROM severities ORDER BY rank) USING count(*)",
                           "--format", "json", db=history_db)
    assert result.returncode == 0, result.stderr
    assert list(json.loads(result.stdout)[0]) == ["critical", "high", "medium", "low", "info"]


def test_refusal_names_the_statement(history_db: Path) -> None:
    result = scanwatch_sql("DELETE FROM issues", db=history_db)
    assert "read-only" in result.stderr and "DELETE" in result.stderr


def test_missing_history_says_to_sync(tmp_path: Path) -> None:
    missing = tmp_path / "nothing" / "scanwatch.duckdb"
    result = scanwatch_sql("sla_breaches", db=missing)
    assert result.returncode != 0
    assert result.stderr.strip() == f"scanwatch sql: no history yet at {missing}: run scanwatch sync"
    assert not missing.exists()


def test_unknown_name_and_bad_sql_are_one_line(history_db: Path) -> None:
    typo = scanwatch_sql("sla_breach", db=history_db)
    assert typo.returncode != 0
    assert typo.stderr.strip() == (
        "scanwatch sql: no cookbook query named 'sla_breach'; run 'scanwatch sql' to list them"
    )
    bad = scanwatch_sql("SELECT nope FROM issues", db=history_db)
    assert bad.returncode != 0
    assert bad.stderr.startswith("scanwatch sql: query failed: ")
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_sync_holding_the_file_gets_a_clear_message(tmp_path: Path) -> None:
    db = tmp_path / "busy.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys; con = duckdb.connect(sys.argv[1]); con.execute('CREATE TABLE t(a INT)'); "
         "print('ready', flush=True); sys.stdin.read()", str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        result = scanwatch_sql("SELECT 1", "--wait", "0.5", db=db)  # exit 75 only once its wait is spent
        assert result.returncode == 75
        assert result.stderr.strip() == (f"scanwatch sql: a sync is writing the history at {db} for the 0.5 s this "
                                         "command waited; try again in a moment, or give --wait more seconds")
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    after = scanwatch_sql("SELECT count(*) AS n FROM t", "--format", "csv", db=db)
    assert after.stdout.splitlines() == ["n", "0"]  # once the writer is gone, reading works


def test_a_closed_pipe_is_not_an_error(history_db: Path) -> None:
    """`scanwatch sql ... | head` must end quietly, not with a BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", "sql", "SELECT * FROM range(2000000)", "--format", "csv",
         "--db", str(history_db)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"range\n"
    proc.stdout.close()
    assert proc.wait(timeout=60) == 0
    assert proc.stderr.read() == b""
