"""`scanwatch sql` is read-only by construction: EXPLAIN ANALYZE of a write is refused like the write, a
query has a time limit, and what the service stored is printed with its control characters escaped."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from pipelines.core.text import printable
from tests.cookbook.test_sql_command import digest, scanwatch_sql

HOSTILE = "name\x1b]0;owned\x07\x1b[2J\u202e\ud800"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "history.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE projects (id VARCHAR, name VARCHAR)")
        con.execute("INSERT INTO projects VALUES ('p1', ?)", [HOSTILE.replace("\ud800", "\ufffd")])
    return path


@pytest.mark.parametrize("statement", [
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{target}'",
    "explain   analyze COPY projects TO '{target}' (FORMAT csv)",
    "/* x */ EXPLAIN ANALYZE COPY (SELECT 1) TO '{target}'",
    "EXPLAIN COPY (SELECT 1) TO '{target}'",
    "EXPLAIN ANALYZE INSERT INTO projects VALUES ('p2', 'x')",
    "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
])
def test_explain_of_a_write_is_refused_and_writes_nothing(db: Path, statement: str) -> None:
    target = db.with_name(db.name + ".wal")  # the file the reported attack wrote
    before = digest(db)
    done = scanwatch_sql(statement.format(target=target), db=db)
    assert done.returncode == 1
    assert "read-only" in done.stderr and "EXPLAIN" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not target.exists()
    assert digest(db) == before


@pytest.mark.parametrize("statement", ["EXPLAIN SELECT * FROM projects",
                                       "EXPLAIN ANALYZE SELECT count(*) FROM projects"])
def test_explain_of_a_read_still_works(db: Path, statement: str) -> None:
    done = scanwatch_sql(statement, db=db)
    assert done.returncode == 0, done.stderr


def test_a_long_query_is_stopped_at_its_time_limit(db: Path) -> None:
    done = scanwatch_sql("SELECT count(*) FROM range(1000000000000) a", "--timeout", "1", db=db)
    assert done.returncode == 1
    assert "longer than 1 s" in done.stderr and "--timeout" in done.stderr


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_control_characters_are_escaped_in_table_and_csv(db: Path, fmt: str) -> None:
    done = scanwatch_sql("SELECT name, name AS \"col\x1b[2J\" FROM projects", "--format", fmt, db=db)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout and "\u202e" not in done.stdout
    assert "\\x1b]0;owned\\x07" in done.stdout and "\\u202e" in done.stdout


def test_json_output_escapes_control_characters_itself(db: Path) -> None:
    done = scanwatch_sql("SELECT name FROM projects", "--format", "json", db=db)
    assert "\x1b" not in done.stdout
    assert json.loads(done.stdout)[0]["name"].startswith("name\x1b]0;owned")


def test_printable_escapes_what_acts_on_a_terminal_and_keeps_the_rest():
    assert printable("plain é ✓ 漢字") == "plain é ✓ 漢字"
    assert printable(HOSTILE) == "name\\x1b]0;owned\\x07\\x1b[2J\\u202e\\ud800"
    assert printable("a\nb\tc\x9b") == "a\\x0ab\\x09c\\x9b"
