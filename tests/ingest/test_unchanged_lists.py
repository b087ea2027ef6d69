"""An unchanged account or project list is marked seen without being staged (pipelines/storage/merge.py, "An
unchanged list"): the history it leaves must be the one a full merge leaves, row for row and moment for
moment, whatever happened between two reads."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pipelines.storage import connect, merge_account, merge_projects
from pipelines.storage.merge import record_api_access_lost
from tests.benchmarks.test_merge_unchanged import _issue
from tests.helpers import merge_issues

T0 = datetime(2026, 11, 20, 12, tzinfo=UTC)

# Every table a merge of the account or the projects writes, every column, the scanwatch clock included: the
# shortcut must write the same moments as a full merge, not only the same values.
_TABLES = {
    "accounts": "workspace_id", "quota_snapshots": "observed_at, quota", "projects": "id", "targets": "id",
    "score_snapshots": "observed_at, project_id, target_id NULLS FIRST", "issues": "id",
    "issue_events": "issue_id, observed_at, event", "ingest_warnings": "entity, entity_id, field",
}


def _dump(conn) -> dict[str, list[tuple]]:
    return {table: conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
            for table, order in _TABLES.items()}


def _account(**changes: Any) -> dict[str, Any]:
    body = {"workspace": {"id": "ws", "name": "Acme"}, "plan": "pro",
            "api_access": {"allowed": True, "trial_ends_at": None},
            "period": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
            "quotas": {"quick_scans": {"limit": 50, "used": 3, "remaining": 47},
                       "audits": {"limit": 5, "used": 1, "remaining": 4}},
            "pack_credits": {"scans": 2, "fixes": 0}, "projects": {"limit": 10, "used": 2, "paused": 0},
            "free_fixes_left": 1, "addresses_per_project": 3, "features": {"ai_fix": True}}
    body.update(changes)
    return body


def _projects() -> list[dict[str, Any]]:
    return [{"id": "p0", "name": "Shop", "score": 71, "grade": "C", "open_issues": 2, "paused": False,
             "last_scan_at": "2026-11-19T08:00:00Z",
             "targets": [{"id": "t0", "kind": "domain", "address": "shop.example", "verified": True, "score": 71,
                          "grade": "C", "last_scan_at": "2026-11-19T08:00:00Z", "hidden_issues": 0},
                         {"id": "t1", "kind": "domain", "address": "api.shop.example", "verified": True,
                          "score": 80, "grade": "B", "last_scan_at": None, "hidden_issues": 0}]},
            {"id": "p1", "name": "Docs", "score": 90, "grade": "A", "open_issues": 0, "paused": False,
             "last_scan_at": None,
             "targets": [{"id": "t2", "kind": "repository", "address": "git.example/docs", "verified": True,
                          "score": 90, "grade": "A", "last_scan_at": None, "hidden_issues": 0}]}]


def _without(projects: list[dict[str, Any]], target: str) -> list[dict[str, Any]]:
    return [dict(p, targets=[t for t in p["targets"] if t["id"] != target]) for p in projects]


def test_an_unchanged_list_leaves_the_history_a_full_merge_leaves_and_skips_its_stage_only_when_it_may(
        new_history):
    """Two histories read the same answers at the same moments: one as scanwatch merges them, the other with
    every shortcut forgotten before each merge (the full merge every time). Between reads: the plan gate's
    own write, a hand-made UPDATE, an answer reordered, a target removed and then an issue listed on it, a
    bad value, a record told about in the log, quotas no longer listed, a project another workspace lists
    too, a target listed twice, ids that are not strings. After each merge both histories hold the same rows,
    the merges report the same rows, warnings and log lines, and the shortcut was taken exactly where the
    answer and the rows were as the last full merge left them. Mutations that fail it: the rows' digest not
    compared, or not counted; a merge that met a bad value recorded; the seen-again statements leaving the
    clock or a sample out, or sampling quotas of another merge; the order of the answer counted, or ignored
    where an id comes twice.
    """
    shortcut, full = connect(new_history()), connect(new_history())
    ran: list[str] = []
    execute = shortcut.execute
    shortcut.execute = lambda sql, params=None: (ran.append(str(sql)), execute(sql, params))[1]  # type: ignore[method-assign]
    staged: list[bool] = []

    def both(merge: Callable[[Any, datetime], Any], at: datetime) -> list[Any]:
        full.execute("DELETE FROM merged_lists")
        ran.clear()
        results = [merge(conn, at) for conn in (shortcut, full)]
        staged.append(any("stg_" in sql for sql in ran))
        assert _dump(shortcut) == _dump(full)
        got, want = results
        assert (got.rows, got.events, got.warnings, got.notices) == (want.rows, want.events, want.warnings,
                                                                    want.notices)
        return results

    def account(body: dict[str, Any]) -> Callable[[Any, datetime], Any]:
        return lambda conn, at: merge_account(conn, copy.deepcopy(body), now=at, service_version="2026-10-13")

    def projects(body: list[dict[str, Any]], workspace: str = "ws") -> Callable[[Any, datetime], Any]:
        return lambda conn, at: merge_projects(conn, workspace, copy.deepcopy(body), now=at)

    lists = _projects()
    moments = iter(T0 + timedelta(hours=h) for h in range(100))
    try:
        both(account(_account()), next(moments))
        both(projects(lists), next(moments))
        both(account(_account()), next(moments))  # unchanged: seen again
        both(projects(lists), next(moments))
        both(projects(list(reversed(lists))), next(moments))  # the same list in another order
        assert staged == [True, True, False, False, False]

        at = next(moments)
        for conn in (shortcut, full):
            record_api_access_lost(conn, "ws", at)  # the plan gate wrote the account: merged in full
        both(account(_account()), next(moments))
        both(account(_account()), next(moments))
        assert staged[-2:] == [True, False]
        assert shortcut.execute("SELECT api_access_allowed FROM accounts").fetchall() == [(True,)]

        for conn in (shortcut, full):  # another writer took a project out of the list by hand
            conn.execute("UPDATE projects SET removed_at = CAST($at AS TIMESTAMPTZ) WHERE id = 'p1'",
                         {"at": next(moments)})
        both(projects(lists), next(moments))
        assert staged[-1] and shortcut.execute(
            "SELECT count(*) FROM projects WHERE removed_at IS NULL").fetchall() == [(2,)]

        both(account(_account(quotas={"quick_scans": {"limit": 50, "used": 4, "remaining": 46}})), next(moments))
        both(account(_account(quotas={"quick_scans": {"limit": 50, "used": 4, "remaining": 46}})), next(moments))
        lists[0]["score"] = 64
        both(projects(lists), next(moments))
        both(projects(lists), next(moments))
        assert staged[-4:] == [True, False, True, False]

        lists = _without(lists, "t1")  # t1 removed; then an issue listed on it stays visible in that merge ...
        both(projects(lists), next(moments))
        both(lambda conn, at: merge_issues(conn, "ws", [dict(_issue(1), project_id="p0", target_id="t1")],
                                           now=at, project_state=[("p0", None, False)]), next(moments))
        both(projects(lists), next(moments))  # ... and is set aside by the next pass, the shortcut's too
        assert staged[-3:] == [True, True, False]
        assert shortcut.execute("SELECT hidden_reason FROM issues").fetchall() == [("target_removed",)]

        # A value that does not fit: stored as NULL, warned about once (`ingest_warnings` keeps one row, which
        # `scanwatch prune` may take out), and merged in full at every read, so it is warned about again then.
        lists[1]["score"] = "ninety"
        bad = _account(plan="platinum")
        for _ in range(3):
            both(projects(lists), next(moments))
            both(account(bad), next(moments))
        assert staged[-6:] == [True] * 6
        # A record whose every read is told in the run's log (a lone surrogate replaced): merged in full, and
        # told, at every read.
        lists[1]["name"] = "Docs \ud800"
        told = [both(projects(lists), next(moments))[0].notices for _ in range(3)]
        assert staged[-3:] == [True, True, True] and all(len(t) == 1 for t in told)

        # The service stops listing quotas: this sync samples none, and no later unchanged read brings back the
        # quotas of an earlier one.
        since = next(moments)
        for _ in range(2):
            both(account(_account(quotas={})), next(moments))
        assert staged[-2:] == [True, False] and shortcut.execute(
            "SELECT count(*) FROM quota_snapshots WHERE observed_at > CAST($since AS TIMESTAMPTZ)",
            {"since": since}).fetchall() == [(0,)]

        # A project another workspace lists too: the rows are keyed by id, so its row stays its first
        # workspace's. When that one stops listing it, the other's unchanged answer still revives it.
        shared = [dict(_projects()[0], targets=[])]
        for _ in range(2):
            both(projects(shared, "ws2"), next(moments))
        both(projects(lists[1:]), next(moments))  # ws stops listing p0
        both(projects(shared, "ws2"), next(moments))
        assert staged[-4:] == [True, True, True, True] and shortcut.execute(
            "SELECT removed_at IS NULL FROM projects WHERE id = 'p0'").fetchall() == [(True,)]

        # One target listed under two projects: the later sighting wins, so a reordered answer is another one.
        twice = [{"id": "pa", "name": "A", "targets": [{"id": "t9", "kind": "domain", "address": "a.example"}]},
                 {"id": "pb", "name": "B", "targets": [{"id": "t9", "kind": "domain", "address": "a.example"}]}]
        for answer in (twice, twice, list(reversed(twice))):
            both(projects(answer, "ws3"), next(moments))
        assert staged[-3:] == [True, False, True] and shortcut.execute(
            "SELECT project_id FROM targets WHERE id = 't9'").fetchall() == [("pa",)]

        # Ids that are not strings, as the stage stores them: 1 and "1" are one project; an id that is an object.
        odd = [{"id": 1, "name": "one", "targets": [{"id": ["t", 7], "kind": "repository", "address": "git.example"}]},
               {"id": "1", "name": "one again", "targets": []}]
        for _ in range(2):
            both(projects(odd, "ws4"), next(moments))
        assert staged[-2:] == [True, False]
    finally:
        shortcut.close()
        full.close()


def test_an_answer_read_by_another_definition_of_the_merge_is_merged_in_full(tmp_path, monkeypatch):
    """A scanwatch whose merge types or stages an answer differently (a field added, a statement changed)
    merges every list in full once, though the service answers as before. Mutation that fails it: the
    answer's digest made without the merge's definition."""
    import pipelines.storage.merge as merge_module

    conn = connect(tmp_path / "history.duckdb")
    ran: list[str] = []
    execute = conn.execute
    conn.execute = lambda sql, params=None: (ran.append(str(sql)), execute(sql, params))[1]  # type: ignore[method-assign]
    try:
        for hours, definition in ((0, b"this one"), (1, b"this one"), (2, b"the next one")):
            monkeypatch.setattr(merge_module, "merge_definition", lambda d=definition: d)
            ran.clear()
            merge_projects(conn, "ws", _projects(), now=T0 + timedelta(hours=hours))
            assert any("stg_" in sql for sql in ran) == (hours != 1)
    finally:
        conn.close()
