"""Attack findings against the read boundary (branch `attack`): each test FAILS while the break is there.

docs/postgres.md promises a workspace role "sees the rows of `acme` and no other workspace's, whatever it
types", and that "PostgreSQL's own catalogue follows the policies (`pg_stats` shows such a role no statistics
of those tables)". The planner, though, still uses the whole table's statistics (every workspace's rows) for
leakproof operators such as text `=`, `<`, `>=`, and EXPLAIN prints its estimates: the acme role learns
whether a value occurs in globex's rows and how often, and can recover such a value character by character
through range estimates, all through `scanwatch sql "EXPLAIN ..."` / `execute_read_only`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from pipelines.commands import roles
from pipelines.read_only import execute_read_only
from pipelines.storage import connect, merge_issues
from tests.benchmarks.test_merge_unchanged import _issue
from tests.postgres.roles import WRITER, apply_roles, role_url

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
ACME, GLOBEX = "w-acme", "w-globex"
WORKSPACE_ROLE = roles.workspace_role("acme")
SECRET = "globex secret merger"  # a title that exists only in globex's rows


@pytest.fixture(scope="module")
def history(pg_server) -> Iterator[dict[str, str]]:
    name = pg_server.create_database()
    admin = pg_server.url(name)
    apply_roles(pg_server, admin)
    conn = connect(role_url(pg_server, admin, WRITER))
    try:
        for workspace, numbers, title in ((ACME, range(20), None), (GLOBEX, range(1000, 1200), SECRET)):
            conn.execute("INSERT INTO accounts (workspace_id, workspace_name, workspace_label, plan, first_observed_at,"
                         " last_observed_at) VALUES ($ws, $label, $label, 'pro', $now, $now)",
                         {"ws": workspace, "label": workspace[2:], "now": NOW})
            issues = [_issue(n) for n in numbers]
            for issue in issues:
                issue["title"] = title or f"acme {issue['title']}"
            merge_issues(conn, workspace, issues, now=NOW)
        conn.execute("ANALYZE")
    finally:
        conn.close()
    apply_roles(pg_server, admin, ["acme"])
    yield {"admin": admin, "acme": role_url(pg_server, admin, WORKSPACE_ROLE)}
    pg_server.drop_database(name)


def _estimate(url: str, where: str) -> int:
    plan = execute_read_only(url, f"EXPLAIN SELECT * FROM issues WHERE {where}")[1]
    return int(re.search(r"rows=(\d+)", plan[0][0]).group(1))


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def test_the_acme_role_sees_no_globex_row_directly(history):
    """The premise: the policies hold for the rows themselves."""
    assert execute_read_only(history["acme"], f"SELECT count(*) FROM issues WHERE title = {_lit(SECRET)}")[1] == [(0,)]


def test_explain_estimates_tell_the_acme_role_a_globex_value_exists(history):
    """BREAK (goal 2): the estimate for a value only globex holds differs from a value nobody holds."""
    there = _estimate(history["acme"], f"title = {_lit(SECRET)}")
    absent = _estimate(history["acme"], "title = 'no such title anywhere'")
    assert there == absent, f"EXPLAIN leaks globex's rows: estimate {there} for globex's title, {absent} for none"


def test_explain_range_estimates_let_the_acme_role_recover_a_globex_value(history):
    """BREAK (goal 2): character by character, range estimates (leakproof text >= and <) rebuild globex's title."""
    url, found = history["acme"], ""
    alphabet = sorted(string.ascii_lowercase + " ")
    while len(found) < len(SECRET):
        # the acme role can count its own rows in a range; what the estimate holds beyond them is globex's
        best = max(alphabet, key=lambda ch: _estimate(url, f"title >= {_lit(found + ch)} AND title < "
                                                      f"{_lit(found + chr(ord(ch) + 1))}"))
        found += best
    assert found != SECRET, f"the acme role rebuilt globex's title from EXPLAIN alone: {found!r}"
