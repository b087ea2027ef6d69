"""Merges generated from the entity definitions, merged a bounded group of stage files at a time."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

import pipelines.storage.merge as merge_module
from pipelines.core.sqlfiles import execute_file, read_sql
from pipelines.storage import connect, merge_issue_stages, merge_scans
from pipelines.storage.entities import ISSUE
from pipelines.storage.stage import StageFile
from pipelines.storage.upsert import statements, touch_unchanged, upsert
from tests.benchmarks.test_merge_unchanged import _issue, _resync
from tests.helpers import history, merge_issues

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)


def _dump(conn) -> tuple[list, list]:
    return (conn.execute("SELECT * FROM issues ORDER BY id").fetchall(),
            conn.execute("SELECT * FROM issue_events ORDER BY issue_id, observed_at, event").fetchall())


def test_a_field_added_to_the_entity_reaches_every_merge_statement(tmp_path):
    """One list of columns: a new field (and its migration) needs no edit of the merge SQL."""
    entity = dataclasses.replace(ISSUE, columns={**ISSUE.columns, "exploit_maturity": "VARCHAR"})
    sql = statements("upsert", entity) + statements("unchanged", entity)
    assert sql.count('"exploit_maturity"') == 6  # SET (two), INSERT and SELECT lists, the two unchanged hashes
    conn = connect(tmp_path / "h.duckdb")
    try:
        conn.execute("ALTER TABLE issues ADD COLUMN exploit_maturity VARCHAR")  # what its migration would do
        merge_issues(conn, "ws", [_issue(1)], now=NOW)
        execute_file(conn, "merge/context.sql", {"workspace_id": "ws", "now": LATER, "service_version": None})
        conn.execute("CREATE TEMP TABLE stg_issues AS SELECT * EXCLUDE (workspace_id, first_observed_at, "
                     "last_observed_at) REPLACE ('weaponized' AS exploit_maturity) FROM issues")
        touch_unchanged(conn, entity)  # the new field differs: the row is not unchanged
        upsert(conn, entity)
        assert conn.execute("SELECT exploit_maturity, last_observed_at FROM issues").fetchall() == [
            ("weaponized", LATER)]
    finally:
        conn.close()


def test_merging_a_group_of_stage_files_at_a_time_gives_what_one_merge_gives(new_history, monkeypatch):
    rows = [_issue(n) for n in range(90)]
    outcomes = []
    for _name, chunk_bytes in (("one", 1 << 30), ("many", 2_000)):
        monkeypatch.setattr(merge_module, "group_bytes", lambda conn, size=chunk_bytes: size)
        conn = connect(new_history())
        try:
            for now, batch in ((NOW, rows), (LATER, _resync(rows))):
                stages = [StageFile("issues").extend(r for r in batch if r["project_id"] == p).close()
                          for p in ("p0", "p1", "p2")]
                stages.append(StageFile("issues").close())  # a project with no issues
                try:
                    result = merge_issue_stages(conn, "ws", stages, now=now)
                finally:
                    for stage in stages:
                        stage.discard()
            outcomes.append((_dump(conn), result.rows, result.events))
        finally:
            conn.close()
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1] == {"issues": 91}
    assert outcomes[0][2] == {"opened": 1, "status_changed": 1, "reopened": 1, "severity_changed": 1}


def test_each_group_commits_its_issues_and_projects_are_marked_read_only_once_every_group_is_in(engine_db,
                                                                                                 monkeypatch):
    """A merge stopped after its first group keeps that group's issues (the next sync finds them unchanged)
    and marks no project as read, so the next sync reads every project of the merge again."""
    from pipelines.core import milestones

    monkeypatch.setattr(merge_module, "group_bytes", lambda conn: 2_000)
    rows = [_issue(n) for n in range(90)]
    stages = [StageFile("issues").extend(r for r in rows if r["project_id"] == p).close() for p in ("p0", "p1", "p2")]
    groups = []

    def stop_in_the_second_group(name: str) -> None:
        if name == "merge.staged":
            groups.append(name)
            if len(groups) == 2:
                raise RuntimeError("stopped")

    conn = connect(engine_db)
    stop = milestones.observe(stop_in_the_second_group)
    try:
        with pytest.raises(RuntimeError, match="stopped"):
            merge_issue_stages(conn, "ws", stages, now=NOW,
                               project_state=[(p, "fp", False) for p in ("p0", "p1", "p2")])
        stop()
        first = {r["id"] for r in rows if r["project_id"] == "p0"}
        assert {i for (i,) in conn.execute("SELECT id FROM issues").fetchall()} == first
        assert conn.execute("SELECT count(*) FROM issue_events WHERE event = 'opened'").fetchall()[0][0] == len(first)
        assert conn.execute("SELECT count(*) FROM project_sync_state").fetchall()[0][0] == 0

        result = merge_issue_stages(conn, "ws", stages, now=LATER,
                                    project_state=[(p, "fp", False) for p in ("p0", "p1", "p2")])
        assert result.events == {"opened": len(rows) - len(first)}  # the first group's issues are not new again
        assert conn.execute("SELECT count(*) FROM project_sync_state").fetchall()[0][0] == 3
    finally:
        for stage in stages:
            stage.discard()
        conn.close()


def test_a_walk_that_starts_over_drops_what_it_gave_and_the_latest_sighting_wins(engine_db):
    first, moved = _issue(1), dict(_issue(2), title="old")
    conn = connect(engine_db)
    with StageFile("issues") as stage:
        stage.extend([dict(first, title="abandoned pass"), _issue(3)])
        stage.restart()
        stage.extend([first, moved, dict(moved, title="new")])  # moved between pages: read twice
        merge_issue_stages(conn, "ws", [stage.close()], now=NOW)
    try:
        assert conn.execute("SELECT right(id, 1), title FROM issues ORDER BY id").fetchall() == [
            ("1", "Issue 1"), ("2", "new")]
    finally:
        conn.close()


@pytest.mark.parametrize("field", ["kind", "created_at"])
def test_a_scan_keeps_what_its_first_sighting_said_of_its_immutable_fields(engine_db, field):
    scan = {"id": "s1", "target_id": "t1", "project_id": "p1", "kind": "quick", "status": "queued",
            "reused": False, "created_at": "2026-11-20T12:00:00.000Z"}
    changed = {**scan, "status": "done", "kind": "audit", "reused": True, "created_at": "2026-11-21T00:00:00.000Z"}
    conn = connect(engine_db)
    try:
        merge_scans(conn, "ws", [scan], now=NOW)
        merge_scans(conn, "ws", [changed], now=LATER)
        status, value = conn.execute(f'SELECT status, CAST("{field}" AS VARCHAR) FROM scans').fetchall()[0]
        assert status == "done"
        assert value == conn.execute(f"SELECT CAST(CAST(? AS {merge_module.SCAN.columns[field]}) AS VARCHAR)",
                                     [scan[field]]).fetchall()[0][0]
    finally:
        conn.close()


def test_reused_once_true_stays_true_through_the_generated_upsert(engine_db):
    scan = {"id": "s1", "target_id": "t1", "project_id": "p1", "kind": "quick", "status": "queued", "reused": False}
    conn = connect(engine_db)
    try:
        seen = []
        for reused in (False, True, False):
            merge_scans(conn, "ws", [{**scan, "reused": reused}], now=NOW)
            seen.append(conn.execute("SELECT reused FROM scans").fetchall()[0][0])
        assert seen == [False, True, True]
    finally:
        conn.close()


def test_the_history_opens_with_bounded_memory_and_one_thread(tmp_path):
    conn = connect(tmp_path / "h.duckdb")
    try:
        settings = dict(conn.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN "
            "('memory_limit', 'threads', 'preserve_insertion_order')").fetchall())
    finally:
        conn.close()
    assert settings["threads"] == "1"
    assert settings["preserve_insertion_order"] == "false"
    assert settings["memory_limit"].endswith("MiB") and float(settings["memory_limit"].split()[0]) <= 96


def test_an_upgraded_history_keeps_its_issues_and_events_without_an_index_that_grows_with_it(tmp_path):
    """Schema 11 drops the keys of `issues` and `issue_events` (their ART indexes had to sit in DuckDB's memory):
    rows, column order and NOT NULLs stay; a merge still leaves one row per issue."""
    import duckdb

    from pipelines.storage import migrate

    conn = history(duckdb.connect(str(tmp_path / "h.duckdb")))
    try:
        conn.execute("SET TimeZone = 'UTC'")
        migrate(conn, target=10)
        # The merge reads the views layer's rules (status changes, what is still listed, each project's team),
        # which schema 10 predates; migration 16's tables only add objects, so it may run again later.
        execute_file(conn, "migrations/016_ownership.sql")
        for view in ("status_moves", "workspace_labels", "project_owners_now", "project_states", "project_labels",
                     "target_states"):
            conn.execute(read_sql(f"views/{view}.sql"))
        with StageFile("issues") as stage:
            merge_issue_stages(conn, "ws", [stage.extend(_issue(n) for n in range(9)).close()], now=NOW)
        before = _dump(conn)
        shape = ("SELECT table_name, column_name, is_nullable FROM information_schema.columns "
                 "WHERE table_name IN ('issues', 'issue_events') ORDER BY 1, ordinal_position")
        columns = conn.execute(shape).fetchall()
        migrate(conn)
        assert _dump(conn) == before
        assert conn.execute(shape).fetchall() == columns
        assert conn.execute("SELECT count(*) FROM duckdb_constraints() WHERE table_name IN ('issues', 'issue_events') "
                            "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')").fetchall()[0][0] == 0
        with StageFile("issues") as stage:
            merge_issue_stages(conn, "ws", [stage.extend(_resync([_issue(n) for n in range(9)])).close()], now=LATER)
        total, distinct = conn.execute("SELECT count(*), count(DISTINCT id) FROM issues").fetchall()[0]
        assert total == distinct >= 9
    finally:
        conn.close()


def test_an_upgraded_history_keeps_its_scans_without_an_index_that_grows_with_it(tmp_path):
    """Schema 22 drops the key of `scans`, the most numerous keyed rows (its ART index sat in DuckDB's memory and
    grew with every scan the history held): rows, column order and NOT NULLs stay; a merge that reads the same
    scans again still leaves one row per scan, each with its latest status.

    Mutation that fails it: the migration copying no rows (`INSERT INTO scans_unkeyed SELECT * FROM scans
    WHERE false`)."""
    import duckdb

    from pipelines.storage import migrate

    scans = [{"id": f"s{n}", "target_id": "t1", "project_id": "p1", "kind": "quick", "status": "queued",
              "created_at": "2026-11-20T12:00:00.000Z"} for n in range(7)]
    conn = history(duckdb.connect(str(tmp_path / "h.duckdb")))
    try:
        conn.execute("SET TimeZone = 'UTC'")
        migrate(conn, target=21)  # without the views layer the merge reads: the rows written as it would
        conn.raw.executemany("INSERT INTO scans (workspace_id, id, target_id, project_id, kind, status, created_at, "
                             "first_observed_at, last_observed_at) VALUES ('ws', ?, ?, ?, ?, ?, ?, ?, ?)",
                             [(s["id"], s["target_id"], s["project_id"], s["kind"], s["status"], s["created_at"],
                               NOW, NOW) for s in scans])
        before = conn.execute("SELECT * FROM scans ORDER BY id").fetchall()
        shape = ("SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                 "WHERE table_name = 'scans' ORDER BY ordinal_position")
        columns = conn.execute(shape).fetchall()
        migrate(conn)
        assert conn.execute("SELECT * FROM scans ORDER BY id").fetchall() == before
        assert conn.execute(shape).fetchall() == columns
        assert conn.execute("SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'scans' "
                            "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')").fetchall() == [(0,)]
        merge_scans(conn, "ws", [{**scan, "status": "done"} for scan in scans], now=LATER)
        assert conn.execute("SELECT count(*), count(DISTINCT id), min(status), max(status) FROM scans"
                            ).fetchall() == [(7, 7, "done", "done")]
    finally:
        conn.close()


def test_a_stage_file_outlives_a_long_read_and_a_dead_syncs_files_are_removed(tmp_path, monkeypatch):
    """At the real rate limit a big first sync reads for half an hour: a project read early keeps its file."""
    import os
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    early = StageFile("issues").extend([_issue(1)]).close()
    hour_ago = time.time() - 3600
    os.utime(early.path, (hour_ago, hour_ago))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp_path / f"scanwatch-stage-{int(dead.stdout)}"
    orphan.mkdir()
    (orphan / "issues-x.ndjson").write_text("{}\n")
    # Another sync starts meanwhile: a process of its own, which sweeps the temp folder as it stages its first file.
    started = ("import tempfile; from pipelines.storage.stage import StageFile; "
               f"tempfile.tempdir = {str(tmp_path)!r}; StageFile('issues').discard()")
    try:
        subprocess.run([sys.executable, "-c", started], check=True, timeout=120, cwd=Path(__file__).parents[2])
        assert early.path.exists() and early.size > 0
        assert not orphan.exists()
    finally:
        early.discard()


TEXTS = ["tab\there", "line\nbreak", "cr\rreturn", "back\\slash", "\\N", "\\.", "ünïcødé ☃", "", "nul\x00byte",
         "lone \ud800 surrogate"]


def test_a_stage_in_the_engines_own_lines_merges_as_ndjson_does(new_history):
    """PostgreSQL's stage lines are COPY's text format, written while the pages arrive: every text a record can
    carry must come back as NDJSON's stage gives it (tabs, line breaks, backslashes, COPY's own NULL and
    end-of-data markers, U+0000 and a lone surrogate), with the same warnings."""
    rows = []
    for n, text in enumerate(TEXTS):
        rows.append(dict(_issue(n), title=text, evidence=text, line=n if n % 2 else None, fix_unlocked=bool(n % 2),
                         detail={"text": text, "n": [n, 1.5, True, None]}))
    dumps, warnings = [], []
    for own in (True, False):
        conn = connect(new_history())
        try:
            fmt = merge_module.stage_format(conn, ISSUE) if own else StageFile("issues").format
            with StageFile("issues", fmt) as stage:
                result = merge_issue_stages(conn, "ws", [stage.extend(rows).close()], now=NOW)
            dumps.append(_dump(conn))
            warnings.append(sorted(result.warnings))
            titles = dict(conn.execute("SELECT title, evidence FROM issues").fetchall())
        finally:
            conn.close()
        for text in TEXTS[:8]:  # kept as they are, on both engines
            assert titles[text] == text
        assert any("\ufffd" in t and "surrogate" in t for t in titles)
    assert dumps[0] == dumps[1]
    assert warnings[0] == warnings[1] and any("surrogate" in w[3] for w in warnings[0])


def test_an_issue_fixed_again_between_two_syncs_is_a_reopening_and_a_fix(engine_db):
    """Fixed at both syncs, with a later `fixed_at` the second time: it came back and was fixed again in
    between, which one merge records as a reopening and a fix (service_truth's rule). Mutation that fails it:
    sql/merge/issues.sql's `refixed` comparing the fix times the wrong way round."""
    fixed = _issue(0)
    assert fixed["status"] == "fixed"
    conn = connect(engine_db)
    try:
        merge_issues(conn, "ws", [fixed], now=NOW)
        merge_issues(conn, "ws", [dict(fixed, fixed_at="2026-11-15T00:00:00.000Z")], now=LATER)
        merge_issues(conn, "ws", [dict(fixed, fixed_at="2026-11-15T00:00:00.000Z")], now=LATER + timedelta(hours=1))
        events = conn.execute("SELECT event, from_value, to_value FROM issue_events WHERE observed_at = ? "
                              "ORDER BY event", [LATER]).fetchall()
        later = conn.execute("SELECT count(*) FROM issue_events WHERE observed_at > ?", [LATER]).fetchall()[0][0]
    finally:
        conn.close()
    assert events == [("reopened", "fixed", "open"), ("status_changed", "open", "fixed")]
    assert later == 0  # the same fix seen again is no new event


def test_a_scans_merge_with_nothing_to_write_runs_no_statement_but_one_with_a_bad_record_or_an_unlisted_scan_does(
        engine_db):
    """An unchanged workspace's scans step stages nothing, has nothing gone and no pending scan left unlisted:
    its merge is skipped, not run for nothing. A record left out (too large) is still warned about, and a
    queued scan of a target GET /projects no longer lists, or one that answered 404, is still settled.
    Mutations that fail it: a record with problems and no line taken for nothing to merge; the caller's
    unlisted scans, or the scans gone, ignored."""
    from pipelines.storage import merge_projects, merge_scan_stages, stage_format
    from pipelines.storage.entities import SCAN
    from pipelines.storage.stage import MAX_RECORD_BYTES

    project = {"id": "p1", "name": "Shop", "targets": [{"id": t, "kind": "domain", "address": f"{t}.example"}
                                                       for t in ("t1", "t2")]}
    conn = connect(engine_db)
    ran: list[str] = []
    try:
        merge_projects(conn, "ws", [project], now=NOW)
        merge_scans(conn, "ws", [{"id": "s1", "target_id": "t2", "project_id": "p1", "kind": "quick",
                                  "status": "queued"}], now=NOW)
        with StageFile(SCAN.name, stage_format(conn, SCAN)) as nothing:  # answered 404, nothing read: settled
            assert merge_scan_stages(conn, "ws", [nothing.close()], now=NOW, gone=[("s9", "p1")],
                                     unlisted=False).rows["scans_gone"] == 1
        merge_projects(conn, "ws", [dict(project, targets=project["targets"][:1])], now=LATER)  # t2 unlisted
        execute = conn.execute
        conn.execute = lambda sql, params=None: (ran.append(str(sql)), execute(sql, params))[1]  # type: ignore[method-assign]

        def merged(records: list[dict], *, unlisted: bool) -> dict[str, int]:
            with StageFile(SCAN.name, stage_format(conn, SCAN)) as stage:
                return merge_scan_stages(conn, "ws", [stage.extend(records).close()], now=LATER,
                                         unlisted=unlisted).rows

        assert merged([], unlisted=False) == {"scans": 0, "scans_gone": 0} and ran == []
        huge = {"id": "s2", "target_id": "t1", "project_id": "p1", "kind": "quick", "status": "queued",
                "title": "x" * MAX_RECORD_BYTES}
        merged([huge], unlisted=False)
        assert ran and execute("SELECT entity_id, field FROM ingest_warnings WHERE entity = 'scans'"
                               ).fetchall() == [("s2", "(record)")]
        assert merged([], unlisted=True)["scans_gone"] == 1
        assert sorted(execute("SELECT scan_id, answered FROM scans_gone").fetchall()) == [
            ("s1", "target"), ("s9", "scan")]
    finally:
        conn.close()
