"""The read door on a DuckDB history meets the cases the PostgreSQL door meets (tests/postgres/
test_door_boundary.py): smuggled statements, files read or written from SQL, other databases attached; and the
command's own limits (a cut result says so, an unusable --timeout is one line). DuckDB holds these itself: the
file is opened read-only, external access is off and the configuration locked before the user's statement."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.storage.read_only import ReadRefused, execute_read_only

ROOT = Path(__file__).resolve().parents[2]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def scanwatch_sql(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_")}
    env.update(SCANWATCH_DB=str(db), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "sql", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("statement", [
    "SELECT 1 AS 😀$a$; DELETE FROM issues; SELECT 2 AS 😀$a$",
    "SELECT 1; DELETE FROM issues",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    "COPY issues TO '{target}'",
    "COPY (SELECT 1) TO '{target}' (FORMAT csv)",
    "ATTACH '{target}' AS other",
    "SELECT * FROM glob('/etc/*')",
    "INSTALL httpfs",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "CREATE TABLE stolen AS SELECT * FROM issues",
    "EXPLAIN ANALYZE DELETE FROM issues",
])
def test_a_smuggled_statement_or_file_access_is_refused_and_changes_nothing(history_db: Path, tmp_path: Path,
                                                                             statement: str) -> None:
    target = tmp_path / "written-from-sql"
    before = _digest(history_db)
    with pytest.raises(ReadRefused) as refused:
        execute_read_only(history_db, statement.format(target=target))
    message = str(refused.value)
    assert "\n" not in message and "root:" not in message, message
    assert not target.exists()
    assert _digest(history_db) == before


@pytest.mark.parametrize("value", ["inf", "nan", "1e7", "-1", "0"])
def test_an_unusable_timeout_is_one_line(history_db: Path, value: str) -> None:
    done = scanwatch_sql(history_db, "SELECT 1", "--timeout", value)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--timeout must be" in lines[0] and "86400" in lines[0], done.stderr


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_a_large_result_is_cut_with_a_line_saying_so(history_db: Path, fmt: str) -> None:
    done = scanwatch_sql(history_db, "SELECT range AS n FROM range(3000000)", "--max-rows", "4", "--format", fmt)
    assert done.returncode == 0, done.stderr
    assert "the result was cut at 4 rows (--max-rows 4)" in done.stderr
    if fmt == "csv":
        assert done.stdout.splitlines() == ["n", "0", "1", "2", "3"]
    elif fmt == "json":
        import json

        assert json.loads(done.stdout) == [{"n": n} for n in range(4)]
    else:
        assert done.stdout.splitlines()[-1] == "(4 rows)"


def test_a_result_within_its_limits_is_whole_and_says_nothing(history_db: Path) -> None:
    done = scanwatch_sql(history_db, "SELECT range AS n FROM range(4)", "--max-rows", "4", "--format", "json")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.count('"n"') == 4
    empty = scanwatch_sql(history_db, "SELECT 1 AS n WHERE false", "--format", "json")
    assert empty.stdout == "[]\n"
