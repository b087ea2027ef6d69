"""List envelopes, paging, orders, filters and hidden issues."""

from __future__ import annotations

import httpx
import pytest

from simulator.catalog import SEVERITY_RANK
from simulator.testing import Simulator

from .conftest import code


def walk(c: httpx.Client, path: str, **params: object) -> list[dict]:
    items: list[dict] = []
    cursor = None
    while True:
        q = dict(params, limit=params.get("limit", 7))
        if cursor:
            q["starting_after"] = cursor
        r = c.get(path, params=q)
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) == {"object", "data", "has_more"} and body["object"] == "list"
        items += body["data"]
        if not body["has_more"]:
            return items
        cursor = body["data"][-1]["id"]


@pytest.fixture(scope="module")
def c(shared_sim: Simulator):
    with httpx.Client(base_url=shared_sim.base_url, headers=shared_sim.headers(), timeout=10) as client:
        yield client


def test_limit_rules(c: httpx.Client, shared_sim: Simulator) -> None:
    pid = shared_sim.project_ids()[0]
    assert len(c.get(f"/projects/{pid}/issues").json()["data"]) == 20
    assert len(c.get(f"/projects/{pid}/issues", params={"limit": 100}).json()["data"]) == 100
    assert len(c.get(f"/projects/{pid}/issues", params={"limit": 1}).json()["data"]) == 1
    for bad in ("0", "101", "abc", "-1", "2.5", ""):
        for path in ("/projects", f"/projects/{pid}/scans", f"/projects/{pid}/issues"):
            r = c.get(path, params={"limit": bad})
            assert r.status_code == 400 and code(r) == "parameter_invalid", (path, bad)
            assert r.json()["error"]["param"] == "limit"


def test_cursor_invalid(c: httpx.Client, shared_sim: Simulator) -> None:
    pid, other_pid = shared_sim.project_ids()[:2]
    other_scan = c.get(f"/projects/{other_pid}/scans").json()["data"][0]["id"]
    for path, cursor in (("/projects", "00000000-0000-4000-8000-000000000000"),
                         (f"/projects/{pid}/scans", other_scan), (f"/projects/{pid}/issues", pid),
                         (f"/projects/{pid}/issues", "garbage")):
        r = c.get(path, params={"starting_after": cursor})
        assert (r.status_code, code(r)) == (400, "cursor_invalid"), path
    # an item of the unfiltered list that the filter leaves out is not an item of this list
    crit = c.get(f"/projects/{pid}/issues", params={"severity": "critical", "limit": 1}).json()["data"][0]["id"]
    r = c.get(f"/projects/{pid}/issues", params={"severity": "low", "starting_after": crit})
    assert code(r) == "cursor_invalid"


def test_projects_oldest_first_with_targets(c: httpx.Client, shared_sim: Simulator) -> None:
    projects = walk(c, "/projects", limit=1)
    assert [p["id"] for p in projects] == shared_sim.project_ids()
    for p in projects:
        assert p["object"] == "project" and isinstance(p["targets"], list)
        for t in p["targets"]:
            assert t["object"] == "target" and t["project_id"] == p["id"]
            if t["kind"] == "repository" or t["verified"]:
                assert t["hidden_issues"] is None
            else:
                assert isinstance(t["hidden_issues"], int)
    assert any(t["score"] is None and t["last_scan_at"] is None for p in projects for t in p["targets"])


def test_scans_newest_first_and_history_limit(c: httpx.Client, shared_sim: Simulator) -> None:
    w = shared_sim.world
    for pid in shared_sim.project_ids():
        scans = walk(c, f"/projects/{pid}/scans", limit=50)
        keys = [(s["created_at"], s["id"]) for s in scans]
        assert keys == sorted(keys, reverse=True)
        assert len({s["id"] for s in scans}) == len(scans)
        in_world = [s for t in w.projects[pid].target_ids for s in w.targets[t].scan_ids]
        horizon = w.now() - 365 * 86400
        assert len(scans) == sum(1 for s in in_world if w.scans[s].created_at >= horizon)
    first = shared_sim.project_ids()[0]
    assert any(w.scans[s].created_at < w.now() - 365 * 86400
               for t in w.projects[first].target_ids for s in w.targets[t].scan_ids), "the world has older scans"


def test_issues_worst_first_and_complete(c: httpx.Client, shared_sim: Simulator) -> None:
    w = shared_sim.world
    for pid in shared_sim.project_ids():
        issues = walk(c, f"/projects/{pid}/issues", limit=33)
        keys = [(SEVERITY_RANK[i["severity"]], i["first_seen_at"], i["id"]) for i in issues]
        assert keys == sorted(keys)
        visible = [i for t in w.projects[pid].target_ids if w.target_visible(w.targets[t])
                   for i in w.targets[t].issue_ids]
        assert sorted(i["id"] for i in issues) == sorted(visible)
        project = c.get(f"/projects/{pid}").json()
        assert project["open_issues"] == sum(1 for i in issues if i["status"] == "open")


def test_hidden_issues_of_unproved_sites(c: httpx.Client, shared_sim: Simulator) -> None:
    w = shared_sim.world
    hidden = [t for t in shared_sim.target_ids(kind="domain", verified=False) if w.targets[t].issue_ids]
    assert hidden, "the small world has an unproved site with issues"
    tid = hidden[0]
    pid = w.targets[tid].project_id
    assert c.get(f"/projects/{pid}/issues", params={"target_id": tid}).json()["data"] == []
    target = next(t for t in c.get(f"/projects/{pid}").json()["targets"] if t["id"] == tid)
    assert target["hidden_issues"] == sum(1 for i in w.targets[tid].issue_ids if w.issues[i].status == "open") > 0
    r = c.get(f"/issues/{w.targets[tid].issue_ids[0]}")
    assert (r.status_code, code(r)) == (409, "proof_required")


def test_filters(c: httpx.Client, shared_sim: Simulator) -> None:
    pid = shared_sim.project_ids()[0]
    everything = walk(c, f"/projects/{pid}/issues", limit=100)
    for status in ("open", "fixed", "false_positive", "accepted_risk"):
        got = walk(c, f"/projects/{pid}/issues", status=status, limit=100)
        assert [i["id"] for i in got] == [i["id"] for i in everything if i["status"] == status]
    for severity in ("critical", "high", "medium", "low", "info"):
        got = walk(c, f"/projects/{pid}/issues", severity=severity, limit=100)
        assert [i["id"] for i in got] == [i["id"] for i in everything if i["severity"] == severity]
    tid = everything[0]["target_id"]
    got = walk(c, f"/projects/{pid}/issues", target_id=tid, status="open", limit=100)
    assert got and all(i["target_id"] == tid and i["status"] == "open" for i in got)
    for name, bad in (("status", "closed"), ("severity", "urgent"), ("target_id", "nope")):
        r = c.get(f"/projects/{pid}/issues", params={name: bad})
        assert code(r) == "parameter_invalid" and r.json()["error"]["param"] == name


def test_issue_shape_and_repository_fields(c: httpx.Client, shared_sim: Simulator) -> None:
    w = shared_sim.world
    repo = shared_sim.target_ids(kind="repository")[0]
    pid = w.targets[repo].project_id
    issue = c.get(f"/projects/{pid}/issues", params={"target_id": repo, "limit": 1}).json()["data"][0]
    assert issue["file"] and isinstance(issue["line"], int) and issue["commit"]
    assert issue["location"] == f"{issue['file']}:{issue['line']}@{issue['commit']}"
    assert set(issue) == {"object", "id", "project_id", "target_id", "address", "control_id", "family", "severity",
                          "confidence", "status", "title", "explanation", "detail", "location", "file", "line",
                          "commit", "evidence", "fix_unlocked", "status_reason", "marked_by", "first_seen_at",
                          "last_seen_at", "fixed_at"}
    assert issue["first_seen_at"].endswith("Z") and len(issue["first_seen_at"]) == 24
    one = c.get(f"/issues/{issue['id']}").json()
    assert one == issue


def test_texts_follow_the_owner_language(shared_sim: Simulator) -> None:
    pid = shared_sim.project_ids()[0]
    en = httpx.get(f"{shared_sim.base_url}/projects/{pid}/issues", headers=shared_sim.headers("pro")).json()["data"]
    fr = httpx.get(f"{shared_sim.base_url}/projects/{pid}/issues", headers=shared_sim.headers("pro_fr")).json()["data"]
    assert [i["id"] for i in en] == [i["id"] for i in fr]
    assert en[0]["title"] != fr[0]["title"] and en[0]["explanation"] != fr[0]["explanation"]
    r = httpx.get(f"{shared_sim.base_url}/projects", params={"limit": 0}, headers=shared_sim.headers("pro_fr"))
    assert "paramètre" in r.json()["error"]["message"]
