"""A PostgreSQL history written by an older scanwatch is carried forward by a newer one with every row of every
table it held: from several schema versions (not the one before last alone), and for every table the catalog
lists at that version, each given a row of its own (tests/history_dump.py's `catalog`), so a migration that
empties, recreates or loses the rows of any table is seen. Every view of the layer then reads.

Mutation that fails it (and passed the former form, from schema 4 with `issues` and `issue_events` only): a
migration emptying a table it touches, e.g. 015_workspace_indexes.sql deleting `reconstruction_runs`."""

from __future__ import annotations

from collections import Counter

import pytest

from pipelines.storage import connect, migrate, schema_version
from pipelines.storage import db as storage_db
from pipelines.storage.destinations.impl import location_of
from pipelines.storage.destinations.impl.postgres.factory import POSTGRES
from tests.backends import rows
from tests.history_dump import catalog

LATEST = storage_db.latest_version()
# Start versions: the first schema, one in between and the one before last.
STARTS = sorted({1, 7, LATEST - 1})
# A type's stand-in value (PostgreSQL's catalog names), to give every table a row.
FILLERS = {"character varying": "'x'", "text": "'x'", "integer": "1", "bigint": "1", "smallint": "1",
           "boolean": "true", "double precision": "0.5", "real": "0.5", "numeric": "1", "json": "'{}'",
           "jsonb": "'{}'", "date": "DATE '2026-01-02'", "timestamp with time zone": "'2026-01-02 03:04:05+00'",
           "timestamp without time zone": "'2026-01-02 03:04:05'", "array": "'{x}'"}
# Not history: the record of applied migrations (which the upgrade appends to; a row made up there would be a
# version), the vocabulary's projection, rewritten from pipelines/core/vocabulary.py by every writer, and the digest
# of the views layer, rewritten whenever the writer recreates the views.
RECORD = "schema_migrations"
REWRITTEN = frozenset({RECORD, "severities", "issue_statuses", "scan_statuses", "view_layer"})


def _rows_of(db: str, table: str, columns: list[str]) -> Counter:
    select = ", ".join(f'"{c}"::text' for c in columns)
    return Counter(rows(db, f'SELECT {select} FROM "{table}"'))


@pytest.mark.parametrize("start", STARTS)
def test_a_postgresql_history_at_an_older_schema_is_carried_forward_with_every_row(pg_database, start):
    conn = POSTGRES.open(location_of(pg_database))  # no scanwatch has opened it: `connect` would migrate it
    try:
        migrate(conn, target=start)
        assert schema_version(conn) == start
        tables = catalog(conn)
    finally:
        conn.close()
    for table, columns in tables.items():
        if table in REWRITTEN:
            continue
        values = ", ".join(FILLERS[t] for _, t in columns)
        rows(pg_database, f'INSERT INTO "{table}" VALUES ({values}) RETURNING 1')
    before = {t: _rows_of(pg_database, t, [c for c, _ in cols]) for t, cols in tables.items() if t not in REWRITTEN}
    assert all(before.values()), [t for t, r in before.items() if not r]

    conn = connect(pg_database)  # a newer scanwatch opens it
    try:
        assert schema_version(conn) == LATEST
        views = [v for (v,) in conn.execute("SELECT table_name FROM information_schema.views "
                                            "WHERE table_schema = current_schema()").fetchall()]
    finally:
        conn.close()
    after = {t: _rows_of(pg_database, t, [c for c, _ in tables[t]]) for t in before}
    assert after == before
    assert len(views) >= 10
    for view in views:  # every view binds to the tables it reads, and reads them
        rows(pg_database, f'SELECT count(*) FROM "{view}"')
