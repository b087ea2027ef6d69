"""Ingestion tests run the real assets, in-process through Dagster, against the simulator over HTTP."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import pytest

from simulator.testing import SimConfig, serve_simulator


@pytest.fixture
def sim() -> Iterator:
    with serve_simulator(SimConfig(seed=11, scale="small", clock="driven", control=True, rate_limit=100000)) as s:
        yield s


@pytest.fixture
def env(sim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "history.duckdb"
    monkeypatch.setenv("SCANWATCH_BASE_URL", sim.base_url)
    monkeypatch.setenv("SCANWATCH_API_KEY", sim.api_key)
    monkeypatch.setenv("SCANWATCH_DB", str(db))
    monkeypatch.delenv("SCANWATCH_SNAPSHOT", raising=False)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return db


def run_sync(**kw):
    from pipelines.materialize import materialize_all

    return materialize_all(**kw)


def requests_of(outcome) -> int:
    return sum(int(m.get("requests", 0)) for m in outcome.metadata.values())


def query(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        return conn.execute(sql).fetchall()


class Oracle:
    """An independent reader: plain httpx, no scanwatch code, every page of every list."""

    def __init__(self, base_url: str, key: str):
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        self.pages = 0

    def walk(self, path: str, **params) -> list[dict]:
        out, cursor = [], None
        while True:
            q = {"limit": 100, **params, **({"starting_after": cursor} if cursor else {})}
            body = self.http.get(path, params=q).raise_for_status().json()
            self.pages += 1
            out += body["data"]
            if not body["has_more"]:
                return out
            cursor = body["data"][-1]["id"]

    def state(self) -> dict:
        projects = self.walk("/projects")
        issues = {i["id"]: i for p in projects for i in self.walk(f"/projects/{p['id']}/issues")}
        scans = {s["id"]: s for p in projects for s in self.walk(f"/projects/{p['id']}/scans")}
        return {"projects": projects, "issues": issues, "scans": scans}

    def minimum_requests(self) -> int:
        """1 account + project pages + per project its scan pages and issue pages (an empty list is one)."""
        projects = self.walk("/projects")
        n = 1 + max(1, math.ceil(len(projects) / 100))
        for p in projects:
            n += max(1, math.ceil(len(self.walk(f"/projects/{p['id']}/scans")) / 100))
            n += max(1, math.ceil(len(self.walk(f"/projects/{p['id']}/issues")) / 100))
        return n
