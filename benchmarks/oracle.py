"""An independent reader of the service: plain httpx, no scanwatch code, every page of every list.

The one oracle of the benchmarks and the tests: what the service shows, read without scanwatch, to compare
the history with. It also defines the floor the request figures are judged against: 1 account + the project
pages + per project its scan pages and issue pages at `limit=100`, an empty list counting one page.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class WorldState:
    projects: list[dict[str, Any]]
    scans: dict[str, list[dict[str, Any]]]  # project id -> scans, newest first
    issues: dict[str, list[dict[str, Any]]]  # project id -> issues, worst first
    pages: dict[str, int] = field(default_factory=dict)  # "projects" / "scans:<id>" / "issues:<id>" -> pages

    @property
    def minimum_requests(self) -> int:
        return 1 + sum(self.pages.values())

    def all_issues(self) -> list[dict[str, Any]]:
        return [i for rows in self.issues.values() for i in rows]

    def issues_by_id(self) -> dict[str, dict[str, Any]]:
        return {i["id"]: i for i in self.all_issues()}

    def scans_by_id(self) -> dict[str, dict[str, Any]]:
        return {s["id"]: s for rows in self.scans.values() for s in rows}


class Oracle:
    def __init__(self, base_url: str, api_key: str) -> None:
        self.http = httpx.Client(base_url=base_url.rstrip("/") + "/", timeout=60,
                                 headers={"Authorization": f"Bearer {api_key}"})

    def close(self) -> None:
        self.http.close()

    def get(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        """One page; a 429 (the simulator may be rate limited for the figure at hand) is waited out."""
        for _ in range(30):
            r = self.http.get(path.lstrip("/"), params=params)
            if r.status_code != 429:
                return r.raise_for_status().json()
            time.sleep(float(r.headers.get("retry-after", "1")))
        raise RuntimeError(f"{path} stayed rate limited")

    def walk(self, path: str, **params: Any) -> list[dict[str, Any]]:
        """Every item of a list."""
        return self.walk_pages(path, **params)[0]

    def walk_pages(self, path: str, **params: Any) -> tuple[list[dict[str, Any]], int]:
        """Every item of a list and the number of pages it took."""
        items: list[dict[str, Any]] = []
        cursor, pages = None, 0
        while True:
            query: dict[str, Any] = {"limit": 100, **params, **({"starting_after": cursor} if cursor else {})}
            body = self.get(path, query)
            pages += 1
            items += body["data"]
            if not body["has_more"]:
                return items, pages
            cursor = body["data"][-1]["id"]

    def state(self) -> WorldState:
        projects, pages = self.walk_pages("/projects")
        state = WorldState(projects=projects, scans={}, issues={}, pages={"projects": pages})
        for p in projects:
            pid = p["id"]
            state.scans[pid], state.pages[f"scans:{pid}"] = self.walk_pages(f"/projects/{pid}/scans")
            state.issues[pid], state.pages[f"issues:{pid}"] = self.walk_pages(f"/projects/{pid}/issues")
        return state

    def start_one_scan(self, projects: list[dict[str, Any]]) -> tuple[str, str] | None:
        """Start a real (not reused) scan on the first target that takes one; (project id, scan id)."""
        for p in projects:
            if p.get("paused"):
                continue
            for t in p.get("targets") or []:
                r = self.http.post(f"targets/{t['id']}/scans", json={},
                                   headers={"Idempotency-Key": f"bench-{uuid.uuid4()}"})
                if r.status_code == 201 and not r.json().get("reused"):
                    return p["id"], r.json()["id"]
        return None
