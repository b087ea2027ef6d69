"""`sql/snapshot/critical_arrivals.sql`: which critical issues page, on a history written row by row.

Each test writes the history a sequence of syncs would leave (accounts, sync_runs, issues, issue_events)
and asserts the rows SecscanNewCriticalIssue is built from, and the series the exporter makes of them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.backends import backend_of
from tests.exporter.history import fresh_db
from tests.helpers import build_registry, build_snapshot, write_snapshot

T0 = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)  # the first sync


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture(autouse=True)
def _on_each_engine(fresh_history, monkeypatch):
    """Every test here runs on DuckDB and on PostgreSQL: the rows that page must be the same on both."""
    monkeypatch.setattr(History, "fresh", staticmethod(fresh_history))


class History:
    """The tables a few syncs leave behind, written the way the issues merge writes them."""

    fresh = staticmethod(fresh_db)

    def __init__(self, workspace: str = "ws-1", name: str = "Acme") -> None:
        self.conn = self.fresh()
        self.ws = workspace
        self.add_workspace(workspace, name)

    def add_workspace(self, workspace: str, name: str) -> None:
        self.conn.execute("INSERT INTO accounts (workspace_id, workspace_name, first_observed_at, last_observed_at) "
                          "VALUES (?, ?, ?, ?)", [workspace, name, T0, T0])
        self.conn.execute("INSERT INTO projects (workspace_id, id, name, first_observed_at, last_observed_at) "
                          "VALUES (?, ?, 'Shop', ?, ?)", [workspace, f"{workspace}-p1", T0, T0])

    def sync(self, minutes: float, status: str = "success", workspace: str | None = None) -> None:
        """An issues sync that started at `minutes` and took 30 s."""
        self.conn.execute("INSERT INTO sync_runs (workspace_id, run_id, asset, started_at, finished_at, status) "
                          "VALUES (?, ?, 'issues', ?, ?, ?)",
                          [workspace or self.ws, f"r{minutes}", at(minutes), at(minutes) + timedelta(seconds=30),
                           status])

    def issue(self, iid: str, severity: str, status: str, *, minutes: float = 0, workspace: str | None = None,
              title: str = "SQL injection", location: str | None = "src/a.py:3@c1", **extra: object) -> None:
        ws = workspace or self.ws
        cols = {"workspace_id": ws, "id": iid, "project_id": f"{ws}-p1", "target_id": "t1", "address": "acme/shop",
                "control_id": "code.sqli", "family": "code", "severity": severity, "status": status, "title": title,
                "location": location, "explanation": "the risk", "evidence": "password=*****",
                "first_seen_at": at(minutes), "first_observed_at": at(minutes), "last_observed_at": at(minutes),
                **extra}
        nul = backend_of(self.conn).nul  # what the engine stores for a NUL of the service's text
        cols = {k: v.replace("\x00", nul) if isinstance(v, str) else v for k, v in cols.items()}
        names = ", ".join(f'"{c}"' for c in cols)
        # The issue's current state, as the merge leaves it: one row per id.
        self.conn.execute("DELETE FROM issues WHERE id = ?", [iid])
        self.conn.execute(f"INSERT INTO issues ({names}) VALUES ({', '.join('?' for _ in cols)})",
                          list(cols.values()))

    def event(self, iid: str, minutes: float, event: str, severity: str, old: str | None, new: str | None,
              workspace: str | None = None) -> None:
        ws = workspace or self.ws
        self.conn.execute("INSERT INTO issue_events VALUES (?, ?, ?, 't1', ?, ?, ?, ?, ?)",
                          [ws, iid, f"{ws}-p1", severity, at(minutes), event, old, new])

    def opened(self, iid: str, minutes: float, severity: str = "critical", status: str = "open",
               **extra: object) -> None:
        self.issue(iid, severity, status, minutes=minutes, **extra)
        self.event(iid, minutes, "opened", severity, None, status, workspace=extra.get("workspace"))  # type: ignore[arg-type]

    def status(self, iid: str, minutes: float, severity: str, old: str, new: str, event: str = "status_changed",
               **extra: object) -> None:
        """A sync at `minutes` saw the issue's status move from `old` to `new` (a `reopened` from fixed)."""
        self.issue(iid, severity, new, **extra)
        self.event(iid, minutes, event, severity, old, new)

    def severity(self, iid: str, minutes: float, status: str, old: str, new: str) -> None:
        """A sync at `minutes` saw the issue's severity move from `old` to `new`."""
        self.issue(iid, new, status)
        self.event(iid, minutes, "severity_changed", new, old, new)

    def arrivals(self, minutes: float = 60, **kw: object) -> list[dict]:
        return build_snapshot(self.conn, now=at(minutes), **kw)["tables"]["critical_arrivals"]  # type: ignore[arg-type]


def ids(rows: list[dict]) -> list[str]:
    return [r["issue_id"] for r in rows]


def test_the_backlog_of_a_first_deployment_never_pages():
    h = History()
    for n in range(40):
        h.opened(f"c{n}", 0)
    h.opened("h1", 0, "high")
    h.sync(0)
    assert h.arrivals() == []
    h.sync(15)  # a re-sync with no change
    assert h.arrivals() == []


def test_events_of_a_sync_that_never_recorded_success_are_backlog_too():
    # A first sync killed between its commit and its sync_runs row, then a failed one: no baseline yet,
    # so nothing pages; the next successful sync makes all of it the backlog.
    h = History()
    h.opened("c1", 0)
    h.sync(5, status="failure")
    assert h.arrivals() == []
    h.sync(10)
    assert h.arrivals() == []


def test_new_reopened_raised_and_unmarked_each_arrive_with_what_happened():
    h = History()
    h.opened("fixed-before", 0)
    h.issue("fixed-before", "critical", "fixed", fixed_at=at(0))
    h.opened("high", 0, "high")
    h.opened("marked", 0)
    h.status("marked", 0, "critical", "open", "false_positive")
    h.sync(0)
    # Second sync at 15: one new, one regression, one raised, one mark withdrawn.
    h.opened("new", 15)
    h.status("fixed-before", 15, "critical", "fixed", "open", event="reopened")
    h.severity("high", 15, "open", "high", "critical")
    h.status("marked", 15, "critical", "false_positive", "open")
    h.sync(15)
    rows = {r["issue_id"]: r for r in h.arrivals()}
    assert {k: (r["change"], r["from_severity"]) for k, r in rows.items()} == {
        "new": ("new", ""), "fixed-before": ("reopened", ""), "high": ("raised", "high"), "marked": ("unmarked", "")}
    new = rows["new"]
    assert new["arrived_at"] == at(15).timestamp() and new["first_seen_at"] == at(15).timestamp()
    assert (new["project"], new["address"], new["title"], new["family"], new["control_id"], new["location"]) == (
        "Shop", "acme/shop", "SQL injection", "code", "code.sqli", "src/a.py:3@c1")
    assert rows["fixed-before"]["first_seen_at"] == at(0).timestamp()  # first seen long before it came back
    # A third sync with no change: the same rows, the same arrival times (the alert's identity).
    h.sync(30)
    assert h.arrivals(90) == h.arrivals(60)


def test_a_regression_that_also_changed_severity_is_a_reopening_from_that_severity():
    h = History()
    h.opened("x", 0, "high")
    h.status("x", 0, "high", "open", "fixed")
    h.sync(0)
    h.status("x", 15, "critical", "fixed", "open", event="reopened")
    h.event("x", 15, "severity_changed", "critical", "high", "critical")
    h.sync(15)
    (row,) = h.arrivals()
    assert (row["change"], row["from_severity"]) == ("reopened", "high")


def test_fixed_marked_or_lowered_issues_drop_out_and_only_the_latest_arrival_counts():
    h = History()
    h.sync(0)
    for iid in ("fixed", "marked", "lowered", "back"):
        h.opened(iid, 15)
    h.sync(15)
    assert sorted(ids(h.arrivals())) == ["back", "fixed", "lowered", "marked"]
    h.status("fixed", 30, "critical", "open", "fixed", fixed_at=at(30))
    h.status("marked", 30, "critical", "open", "accepted_risk")
    h.severity("lowered", 30, "open", "critical", "high")
    h.severity("back", 30, "open", "critical", "high")
    h.sync(30)
    assert ids(h.arrivals()) == []
    h.severity("back", 45, "open", "high", "critical")
    h.sync(45)
    (row,) = h.arrivals()
    assert (row["issue_id"], row["change"], row["arrived_at"]) == ("back", "raised", at(45).timestamp())


def test_an_arrival_older_than_the_critical_sla_window_leaves_the_list():
    h = History()
    h.sync(0)
    h.opened("old", 15)
    h.sync(15)
    assert ids(h.arrivals(15 + 6 * 24 * 60)) == ["old"]
    assert ids(h.arrivals(15 + 8 * 24 * 60)) == []
    assert ids(h.arrivals(15 + 8 * 24 * 60, sla_days={"critical": 10})) == ["old"]


def test_the_list_is_capped_per_workspace_newest_first_and_the_rest_is_counted(tmp_path: Path):
    h = History()
    h.add_workspace("ws-2", "Beta")
    h.sync(0)
    h.sync(0, workspace="ws-2")
    for n in range(3):
        h.opened(f"a{n}", 15 + n)
    h.opened("b0", 15, workspace="ws-2")
    h.sync(20)
    snap = build_snapshot(h.conn, now=at(60), critical_new_limit=2)
    rows = snap["tables"]["critical_arrivals"]
    assert [(r["workspace_id"], r["issue_id"]) for r in rows] == [("ws-1", "a2"), ("ws-1", "a1"), ("ws-2", "b0")]
    path = tmp_path / "m.json"
    write_snapshot(snap, path)
    text = generate_latest(build_registry(path)).decode()
    samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    unlisted = {s.labels["workspace"]: s.value for s in samples if s.name == "secscan_critical_issues_new_unlisted"}
    assert unlisted == {"Acme": 1.0, "Beta": 0.0}
    series = [s for s in samples if s.name == "secscan_critical_issue_new"]
    assert {s.labels["issue_id"] for s in series} == {"a2", "a1", "b0"} and {s.value for s in series} == {1.0}
    a2 = next(s.labels for s in series if s.labels["issue_id"] == "a2")
    assert a2 == {"workspace": "Acme", "team": "unowned", "project_id": "ws-1-p1", "project": "Shop", "issue_id": "a2",
                  "address": "acme/shop", "title": "SQL injection", "family": "code", "control_id": "code.sqli",
                  "location": "src/a.py:3@c1", "first_seen": "2026-11-01T10:17:00Z", "change": "new",
                  "from_severity": "", "detected_at": "2026-11-01T10:17:00Z"}


def test_only_what_a_page_needs_leaves_the_history():
    h = History()
    h.sync(0)
    h.opened("long", 15, title="\x1b[31m Secret \x00 key\nin the\tbundle " + "x" * 400, location=None,
             file="app.js", line=7, commit="abc")
    h.opened("gone", 15)
    h.conn.execute("UPDATE projects SET removed_at = ?", [at(20)])  # a project deleted on the service
    h.sync(20)
    assert h.arrivals() == []
    h.conn.execute("UPDATE projects SET removed_at = NULL")
    rows = {r["issue_id"]: r for r in h.arrivals()}
    long = rows["long"]
    assert long["title"].startswith("[31m Secret key in the bundle xxx") and len(long["title"]) == 200
    assert long["location"] == "app.js:7@abc"
    assert not {"explanation", "evidence", "detail"} & set(long)


def test_an_issue_the_service_stops_listing_drops_out_and_returns_without_paging_again():
    h = History()
    h.sync(0)
    h.opened("c1", 15)
    h.sync(15)
    (row,) = h.arrivals()
    h.conn.execute("UPDATE issues SET hidden_reason = 'unverified', hidden_at = ? WHERE id = 'c1'", [at(30)])
    h.event("c1", 30, "hidden", "critical", None, "unverified")
    h.sync(30)
    assert h.arrivals() == []
    h.conn.execute("UPDATE issues SET hidden_reason = NULL, hidden_at = NULL WHERE id = 'c1'")
    h.event("c1", 45, "visible_again", "critical", "unverified", "open")
    h.sync(45)
    assert h.arrivals() == [row]  # the same arrival: the same alert, not a new one


def test_which_marks_are_withdrawn_comes_from_the_issue_statuses_table():
    # The view names no status: a status the vocabulary calls a person's mark counts, whatever its name,
    # and one it does not is no withdrawn mark.
    h = History()
    h.conn.execute("INSERT INTO issue_statuses VALUES ('wont_fix', 9, true), ('triaged', 10, false)")
    for iid, status in (("waived", "wont_fix"), ("looked-at", "triaged")):
        h.opened(iid, 0)
        h.status(iid, 0, "critical", "open", status)
    h.sync(0)
    h.status("waived", 15, "critical", "wont_fix", "open")
    h.status("looked-at", 15, "critical", "triaged", "open")
    h.sync(15)
    assert {r["issue_id"]: r["change"] for r in h.arrivals()} == {"waived": "unmarked"}
