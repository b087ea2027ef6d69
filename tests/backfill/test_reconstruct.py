"""The reconstruction on both engines, on histories worked out by hand: what counts, from when, and re-runs."""

from __future__ import annotations

from typing import Any

from pipelines.backfill.reconstruct import reconstruct
from pipelines.core.sqlfiles import cookbook

from .handmade import FIRST_SYNC, WS, at, day, history


def _open(conn: Any) -> dict:
    rows = conn.execute("SELECT day, project_id, severity, open_issues FROM reconstructed_open_issues").fetchall()
    return {(d, p, s): n for d, p, s, n in rows}


def _tables(conn: Any) -> dict:
    return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
            for t in ("reconstructed_scores", "reconstructed_open_issues", "reconstruction_runs", "issue_events",
                      "score_snapshots")}


def test_open_issues_count_from_first_seen_to_fixed_at_with_what_is_known_of_marks(engine_db: str) -> None:
    conn = history(
        engine_db, projects=["p"],
        issues=[
            ("a", "p", "high", "open", at(-5, 10), None),           # open since day -5
            ("b", "p", "high", "fixed", at(-4, 1), at(-2, 8)),       # open on -4 and -3; fixed during -2
            ("c", "p", "low", "false_positive", at(-6), None),       # marked, no timestamp: never counts
            ("d", "p", "low", "accepted_risk", at(-3), None),        # marked after the first sync: open before
            ("e", "p", "medium", "open", at(-4), None),              # regressed after the sync: its fix is lost
            ("f", "p", "critical", "fixed", at(-3, 2), at(-3, 5)),   # fixed the same day: never at a day's end
            ("g", "p", "critical", "open", at(-2), None),            # raised to critical after the sync
        ],
        events=[("d", "status_changed", "open", "accepted_risk"), ("e", "reopened", "fixed", "open"),
                ("g", "severity_changed", "high", "critical")],
    )
    [result] = reconstruct(conn, now=FIRST_SYNC)
    assert (result.first_day, result.last_day) == (day(-5), day(-1))  # c, marked, starts nothing
    got = _open(conn)
    expected = {
        "high": {-5: 1, -4: 2, -3: 2, -2: 2, -1: 2},  # a; b on -4 and -3; g (high before its change) from -2
        "low": {-5: 0, -4: 0, -3: 1, -2: 1, -1: 1},  # d
        "medium": {-5: 0, -4: 1, -3: 1, -2: 1, -1: 1},  # e
        "critical": dict.fromkeys(range(-5, 0), 0),  # f never open at a day's end
        "info": dict.fromkeys(range(-5, 0), 0),
    }
    assert got == {(day(d), "p", sev): n for sev, days in expected.items() for d, n in days.items()}
    assert conn.execute("SELECT count(*) FROM issue_events WHERE observed_at < ?", [FIRST_SYNC]).fetchall() == [(0,)]


def test_scores_come_from_the_last_finished_scan_and_projects_average_their_targets(engine_db: str) -> None:
    conn = history(
        engine_db, projects=["p"], targets=[("t1", "p"), ("t2", "p")],
        scans=[
            ("s1", "t1", at(-4, 3), 60, "done"),
            ("s2", "t1", at(-2, 3), 70, "done"),
            ("s3", "t1", at(-1, 3), None, "failed"),  # a failed scan changes nothing
            ("s4", "t2", at(-3, 23), 81, "done"),
        ],
    )
    reconstruct(conn, now=FIRST_SYNC)
    rows = conn.execute("SELECT day, target_id, score, scan_id FROM reconstructed_scores ORDER BY target_id, day")
    got = {(d, t): (s, scan) for d, t, s, scan in rows.fetchall()}
    assert got == {
        (day(-4), "t1"): (60, "s1"), (day(-3), "t1"): (60, "s1"), (day(-2), "t1"): (70, "s2"),
        (day(-1), "t1"): (70, "s2"), (day(-3), "t2"): (81, "s4"), (day(-2), "t2"): (81, "s4"),
        (day(-1), "t2"): (81, "s4"),
        # Projects: the mean of the targets scored that day, halves rounded away from zero (70.5 -> 71).
        (day(-4), None): (60, None), (day(-3), None): (71, None), (day(-2), None): (76, None),
        (day(-1), None): (76, None),
    }


def test_issues_fixed_before_the_scan_history_starts_still_count_on_their_days(engine_db: str) -> None:
    """A Free plan lists 30 days of scans, while issues keep their first_seen_at and fixed_at from before."""
    conn = history(
        engine_db, projects=["p"], targets=[("t1", "p")],
        scans=[("s1", "t1", at(-30, 5), 55, "done"), ("s2", "t1", at(-10, 5), 65, "done")],
        issues=[("old", "p", "high", "fixed", at(-50), at(-40, 12)), ("new", "p", "low", "open", at(-20), None)],
    )
    [result] = reconstruct(conn, now=FIRST_SYNC)
    assert (result.first_day, result.last_day) == (day(-50), day(-1))
    high = {d: n for (d, _, s), n in _open(conn).items() if s == "high"}
    assert [d for d, n in sorted(high.items()) if n] == [day(o) for o in range(-50, -40)]
    first_score = conn.execute("SELECT min(day) FROM reconstructed_scores").fetchall()[0][0]
    assert first_score == day(-30)  # no score is invented before the first scan the service still lists


def test_a_workspace_with_no_scans_and_no_issues_is_reconstructed_as_empty_once(engine_db: str) -> None:
    conn = history(engine_db, projects=["p"], targets=[("t1", "p")])
    [result] = reconstruct(conn, now=FIRST_SYNC)
    assert (result.first_day, result.score_rows, result.open_issue_rows, result.recorded) == (None, 0, 0, True)
    assert reconstruct(conn, now=FIRST_SYNC, only_new=True) == []
    for name in ("open_issues_by_day", "project_score_history", "target_score_history"):
        conn.execute(cookbook()[name].sql).fetchall()


def test_a_second_backfill_changes_nothing(engine_db: str) -> None:
    conn = history(
        engine_db, projects=["p"], targets=[("t1", "p")],
        scans=[("s1", "t1", at(-9, 5), 55, "done")],
        issues=[("a", "p", "high", "open", at(-8), None)],
    )
    reconstruct(conn, now=FIRST_SYNC)
    before = _tables(conn)
    [again] = reconstruct(conn, now=at(3))
    assert (again.rows_changed, again.recorded) == (0, False)
    assert _tables(conn) == before


def test_cookbook_queries_say_which_days_are_reconstructed(engine_db: str) -> None:
    conn = history(
        engine_db, projects=["p"], targets=[("t1", "p")],
        scans=[("s1", "t1", at(-3, 5), 55, "done")],
        issues=[("a", "p", "high", "open", at(-3), None)],
    )
    conn.execute("INSERT INTO score_snapshots VALUES (?, ?, 'p', NULL, 57, 'D', 1, NULL), "
                 "(?, ?, 'p', 't1', 57, 'D', 1, NULL)", [WS, FIRST_SYNC, WS, FIRST_SYNC])
    reconstruct(conn, now=FIRST_SYNC)
    for name in ("open_issues_by_day", "project_score_history", "target_score_history"):
        cursor = conn.execute(cookbook()[name].sql)
        columns = [d[0] for d in cursor.description]
        sources = {}
        for row in cursor.fetchall():
            record = dict(zip(columns, row, strict=True))
            sources.setdefault(record["day"], set()).add(record["source"])
        assert {d: sources[d] for d in (day(-3), day(-2), day(-1), day(0))} == {
            day(-3): {"reconstructed"}, day(-2): {"reconstructed"}, day(-1): {"reconstructed"}, day(0): {"observed"},
        }, name
        assert min(sources) == day(-3) and all(v == {"observed"} for d, v in sources.items() if d >= day(0)), name
    cursor = conn.execute(cookbook()["open_issues_by_day"].sql)
    high = [d[0] for d in cursor.description].index("high")
    by_day = {r[0]: r[high] for r in cursor.fetchall()}
    assert by_day[day(-3)] == 1 and by_day[day(-1)] == 1


def test_a_hidden_issue_counts_in_no_past_and_a_removed_projects_issues_keep_theirs(engine_db: str) -> None:
    """The past follows `visible_issues`, the rule /metrics and the cookbook count by: an unproved site's issue
    is set aside there and in every reconstructed day. A project removed since keeps its past (docs/backfill.md,
    "Deletion on the service deletes nothing"), though its issues are no longer visible now."""
    conn = history(engine_db, projects=["p", "gone"],
                   issues=[("a", "p", "high", "open", at(-3), None), ("hidden", "p", "high", "open", at(-3), None),
                           ("old", "gone", "high", "open", at(-3), None)])
    conn.execute("UPDATE issues SET hidden_reason = 'unverified', hidden_at = first_observed_at WHERE id = 'hidden'")
    conn.execute("UPDATE projects SET removed_at = ? WHERE id = 'gone'", [FIRST_SYNC])
    conn.execute("UPDATE issues SET hidden_reason = 'project_removed', hidden_at = ? WHERE id = 'old'", [FIRST_SYNC])
    reconstruct(conn, now=FIRST_SYNC)
    got = _open(conn)
    assert got[(day(-1), "p", "high")] == 1
    assert got[(day(-1), "gone", "high")] == 1
