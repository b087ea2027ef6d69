"""The first things a client does: read the account, list projects, page issues and scans."""

from __future__ import annotations

import httpx

from simulator.testing import Simulator


def test_account_and_headers(client: httpx.Client) -> None:
    r = client.get("/account")
    assert r.status_code == 200
    assert r.json()["object"] == "account"
    assert r.headers["Service-Version"] == "2026-10-13"
    assert r.headers["Request-Id"]
    assert r.headers["X-RateLimit-Limit"] == "100000"


def test_round_changes_issues(sim: Simulator, client: httpx.Client) -> None:
    pid = client.get("/projects").json()["data"][0]["id"]
    summary = sim.run_round()
    assert summary["new"] and summary["fixed"] and summary["reopened"] and summary["severity_changed"]
    r = client.get(f"/projects/{pid}/scans", params={"limit": 1})
    assert r.json()["data"][0]["status"] in ("done", "failed")
