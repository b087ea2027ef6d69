"""One SQL text, two engines: the history's schema, the typed staging and the compatibility layer give the same
rows on DuckDB and on a real PostgreSQL server (`new_history` / `engine_db`, tests/conftest.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipelines.storage import connect, merge_account, migrate, schema_version
from pipelines.storage import db as storage_db
from tests.backends import backend_of, columns, dump, primary_keys, rows, value
from tests.benchmarks.test_merge_unchanged import _issue
from tests.helpers import merge_issues

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
LATEST = storage_db.latest_version()


def test_every_migration_is_recorded_and_every_table_has_the_same_columns(new_history):
    db = new_history()
    connect(db).close()
    assert [v for (v,) in rows(db, "SELECT version FROM schema_migrations ORDER BY version")] == list(
        range(1, LATEST + 1))
    want = {"issues": 28, "issue_events": 9, "scans": 16, "accounts": 19, "quota_snapshots": 8}
    assert {t: len(columns(db, t)) for t in want} == want
    assert columns(db, "scans")[columns(db, "scans").index("coverage")] == "coverage"


def test_migrations_11_and_22_keep_their_keys_on_postgresql_only(engine_db):
    """011 and 022 dropped DuckDB's in-memory ART keys of the history's most numerous rows; PostgreSQL keeps its
    on-disk B-tree keys, which the merge's lookups by id use, so the migrations are recorded there without
    running."""
    connect(engine_db).close()
    keyed = primary_keys(engine_db, ["issues", "issue_events", "scans", "projects"])
    assert keyed == (["issue_events", "issues", "projects", "scans"] if backend_of(engine_db).keeps_keys
                     else ["projects"])


def _unmigrated(db: str):
    """A connection to a history that no scanwatch has opened yet (`connect` would migrate it at once)."""
    from pipelines.storage.destinations.impl import engine_for, location_of

    location = location_of(db)
    return engine_for(location).connect(location)


def test_a_history_at_an_older_schema_is_carried_forward_with_its_rows(new_history):
    # The rows of a merge into a current history (the merge reads the views layer, which schema 4 predates),
    # copied in schema 4's columns into a history no later scanwatch has opened.
    current, engine_db = new_history(), new_history()
    scratch = connect(current)
    try:
        merge_issues(scratch, "ws", [_issue(n) for n in range(12)], now=NOW)
    finally:
        scratch.close()
    conn = _unmigrated(engine_db)
    try:
        migrate(conn, target=4)
        for table in ("issues", "issue_events"):
            names = [c for (c,) in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = $t AND table_catalog = "
                "current_database() AND table_schema = current_schema() ORDER BY ordinal_position", {"t": table}
            ).fetchall()]
            quoted = ", ".join(f'"{c}"' for c in names)
            for row in rows(current, f"SELECT {quoted} FROM {table}"):
                conn.execute(f"INSERT INTO {table} ({quoted}) VALUES ({', '.join(f'$c{i}' for i in range(len(row)))})",
                             {f"c{i}": cell for i, cell in enumerate(row)})
    finally:
        conn.close()
    tables = {"issues": "id", "issue_events": "issue_id"}
    before = dump(engine_db, tables)
    assert value(engine_db, "SELECT max(version) FROM schema_migrations") == 4
    conn = connect(engine_db)  # a newer scanwatch opens it
    try:
        assert schema_version(conn) == LATEST
    finally:
        conn.close()
    assert dump(engine_db, tables) == before
    assert value(engine_db, "SELECT count(*) FROM fix_times") == 3  # a view of the last migration reads them


def test_the_compatibility_layer_gives_duckdbs_answers(engine_db):
    """epoch, arg_max and arg_min (NULL values and keys left out, no row left gives NULL) in one text."""
    connect(engine_db).close()
    sql = ("SELECT g, epoch(max(k)), arg_max(v, k), arg_min(v, k), arg_max(w, k), arg_min(w, k) FROM (VALUES "
           "(1, CAST('2026-01-02T00:00:00Z' AS TIMESTAMPTZ), 1, 'a'), (1, CAST('2026-01-03T00:00:00Z' AS TIMESTAMPTZ), "
           "2, NULL), (1, CAST(NULL AS TIMESTAMPTZ), 3, 'c'), (1, CAST('2026-01-01T00:00:00Z' AS TIMESTAMPTZ), 4, "
           "'d'), (2, CAST(NULL AS TIMESTAMPTZ), 5, 'e')) AS t(g, k, v, w) GROUP BY g ORDER BY g")
    assert rows(engine_db, sql) == [(1, 1767398400.0, 2, 4, "a", "d"), (2, None, None, None, None, None)]


def test_a_value_that_does_not_fit_its_type_is_null_and_listed(engine_db):
    """Typed staging: DuckDB's TRY_CAST; PostgreSQL's plain casts, then the catching ones for the list that
    failed. Both engines give these very rows: a line that is no whole number is never rounded."""
    bad = [dict(_issue(1), line="12.5", fix_unlocked="perhaps", first_seen_at="not a date", severity="urgent"),
           dict(_issue(2), line="12.0", fix_unlocked="true", fixed_at="2026-02-30T00:00:00Z"),
           dict(_issue(3), line="99999999999")]
    conn = connect(engine_db)
    try:
        result = merge_issues(conn, "ws", bad, now=NOW)
    finally:
        conn.close()
    seen = datetime(2026, 11, 1, tzinfo=UTC)
    assert rows(engine_db, "SELECT right(id, 1), line, fix_unlocked, first_seen_at, fixed_at, severity FROM issues "
                            "ORDER BY id") == [("1", None, None, None, None, "urgent"),
                                               ("2", 12, True, seen, None, "medium"),
                                               ("3", None, False, seen, None, "low")]
    stored = {(e[-1], f, v) for e, f, v in rows(engine_db, "SELECT entity_id, field, value FROM ingest_warnings")}
    assert stored == {("1", "line", "12.5"), ("1", "fix_unlocked", "perhaps"), ("1", "first_seen_at", "not a date"),
                      ("1", "severity", "urgent"), ("2", "fixed_at", "2026-02-30T00:00:00Z"),
                      ("3", "line", "99999999999")}
    assert {(w[1][-1], w[2], w[3]) for w in result.warnings} == stored


def test_a_list_of_well_typed_values_leaves_no_warning(engine_db):
    conn = connect(engine_db)
    try:
        result = merge_issues(conn, "ws", [_issue(n) for n in range(30)], now=NOW)
    finally:
        conn.close()
    assert result.warnings == [] and value(engine_db, "SELECT count(*) FROM ingest_warnings") == 0


def test_text_the_service_sends_is_stored_as_sent(engine_db):
    """Quotes, backslashes, a literal `\\u0000` spelled out, emoji, control characters. PostgreSQL's text cannot
    hold U+0000 itself: that one character is stored as U+FFFD there (DuckDB keeps it)."""
    titles = ["it's \"quoted\" \\ back\\slash", "spelled \\u0000 out", "emoji \U0001f510 and \u2028",
              "tab\tand\nnewline", "zero \x00 byte"]
    conn = connect(engine_db)
    try:
        merge_issues(conn, "ws", [dict(_issue(n), title=t) for n, t in enumerate(titles)], now=NOW)
    finally:
        conn.close()
    stored = [t for (t,) in rows(engine_db, "SELECT title FROM issues ORDER BY id")]
    assert stored == [*titles[:-1], f"zero {backend_of(engine_db).nul} byte"]


def test_the_account_is_flattened_and_every_quota_kept(engine_db):
    body = {"workspace": {"id": "ws", "name": "Acme"}, "plan": "pro", "api_access": {"allowed": True,
            "trial_ends_at": None}, "period": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
            "quotas": {"quick_scans": {"limit": 50, "used": 3, "remaining": 47},
                       "new_quota": {"limit": 5, "used": "lots", "remaining": 1}},
            "pack_credits": {"scans": 2, "fixes": 0}, "projects": {"limit": 10, "used": 4, "paused": 1},
            "free_fixes_left": 1, "addresses_per_project": 3, "features": {"ai_fix": True, "alerts": False}}
    conn = connect(engine_db)
    try:
        result = merge_account(conn, body, now=NOW, service_version="2026-10-13")
        again = merge_account(conn, dict(body, plan="solo", workspace="not an object"), now=NOW + timedelta(1))
    finally:
        conn.close()
    assert result.rows == {"accounts": 1, "quota_snapshots": 2}
    assert rows(engine_db, "SELECT workspace_name, plan, api_access_allowed, period_end, pack_credits_scans, "
                            "projects_paused, free_fixes_left, service_version FROM accounts") == [
        ("Acme", "pro", True, datetime(2026, 12, 1, tzinfo=UTC), 2, 1, 1, "2026-10-13")]
    assert rows(engine_db, "SELECT quota, \"limit\", used, remaining FROM quota_snapshots ORDER BY quota") == [
        ("new_quota", 5, None, 1), ("quick_scans", 50, 3, 47)]
    # Each problem once per workspace: the answer without a workspace repeats the quota's under no workspace.
    assert rows(engine_db, "SELECT workspace_id, entity, entity_id, field, value FROM ingest_warnings "
                           "ORDER BY field, workspace_id NULLS FIRST") == [
        (None, "quotas", "new_quota", "used", "lots"), ("ws", "quotas", "new_quota", "used", "lots"),
        (None, "account", None, "workspace_id", None)]
    assert again.rejected == 1 and again.rows["accounts"] == 0  # an account without a workspace changes nothing
    assert "ai_fix" in value(engine_db, "SELECT CAST(features AS VARCHAR) FROM accounts")


def test_a_failed_read_is_scanwatchs_own_error_whichever_engine(engine_db):
    """A caller (the sensor's look at a workspace's queued scans) catches scanwatch's HistoryError, never a
    driver's: the engine maps its driver's error, with the driver's line kept."""
    from pipelines.storage import HistoryError, HistoryQueryError, connect, reader

    connect(engine_db).close()
    with pytest.raises(HistoryQueryError) as caught, reader(engine_db) as conn:
        conn.execute("SELECT * FROM no_such_table").fetchall()
    assert isinstance(caught.value, HistoryError) and "no_such_table" in caught.value.line
