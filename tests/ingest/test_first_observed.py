"""`first_observed_at` is when scanwatch first saw a row, and it never moves: it is the SLA's and the fix
time's clock when the service gives no `first_seen_at` (sql/views/issue_sla.sql, fix_times.sql). The whole-
history dump (tests/history_dump.py) leaves scanwatch's clock out of every comparison, so this is its own test:
every row of every table that has the column, compared across a second sync that saw them all again. DuckDB
alone: both engines run the one text of sql/merge/upsert.sql.

Mutation that fails it: sql/merge/upsert.sql's UPDATE also setting `first_observed_at = c.observed_at`.
"""

from __future__ import annotations

from tests.backends import rows
from tests.ingest.conftest import run_sync

# The tables the upsert writes: every one with both clocks (reconstruction_runs keeps a copy of the first only).
CATALOG = ("SELECT c.table_name FROM information_schema.columns AS c JOIN information_schema.tables AS t "
           "ON t.table_name = c.table_name AND t.table_schema = c.table_schema "
           "WHERE c.column_name IN ('first_observed_at', 'last_observed_at') AND t.table_type = 'BASE TABLE' "
           "AND c.table_schema = current_schema() GROUP BY c.table_name HAVING count(*) = 2 ORDER BY 1")


def _observed(db: str) -> dict[str, dict[str, tuple]]:
    """{table: {row's id: (first_observed_at, last_observed_at)}} of every table the upsert writes; an account
    is known by its workspace id, every other row by its id."""
    out = {}
    for (table,) in rows(db, CATALOG):
        key = "workspace_id" if table == "accounts" else "id"
        found = rows(db, f'SELECT "{key}", first_observed_at, last_observed_at FROM "{table}"')
        out[table] = {r[0]: tuple(r[1:]) for r in found}
        assert len(out[table]) == len(found), f"{table}: {key} is not one row's"
    return out


def test_first_observed_at_never_moves_when_a_row_is_seen_again(sim, env):
    assert run_sync().success
    before = _observed(str(env))
    sim.run_round()  # issues fixed, reopened, re-severitied: their rows are merged again
    assert run_sync(full_reconcile=True).success
    after = _observed(str(env))

    seen_again = 0
    for table, old in before.items():
        assert old, f"{table}: the first sync stored no row"
        for key, (first, last) in old.items():
            assert key in after[table], (table, key)
            new_first, new_last = after[table][key]
            assert new_first == first, f"{table} {key}: first_observed_at moved from {first} to {new_first}"
            seen_again += new_last > last
    # The second sync did see rows again (else the test could not fail): projects, and the issues it re-read.
    assert seen_again >= len(before["projects"]) + 1, seen_again
    assert any(after["issues"][k][1] > v[1] for k, v in before["issues"].items())
