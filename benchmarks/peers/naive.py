"""A naive pull, as a hand-written script does it: every list, every page, every sync, one after another,
tables replaced each time; a 429 is waited out as `Retry-After` says. No history, no skipping.

Run as `python -m benchmarks.peers.naive BASE_URL DB` with the key in SCANWATCH_API_KEY; it prints one JSON
line with what it did. Plain httpx and duckdb only, so it measures the approach, not scanwatch's code.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

import duckdb
import httpx


class Puller:
    def __init__(self, base_url: str, api_key: str) -> None:
        self.http = httpx.Client(base_url=base_url.rstrip("/") + "/", timeout=60,
                                 headers={"Authorization": f"Bearer {api_key}"})
        self.requests = 0
        self.rate_limited = 0

    def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        for _ in range(20):
            self.requests += 1
            r = self.http.get(path, params=params)
            if r.status_code == 429:
                self.rate_limited += 1
                time.sleep(float(r.headers.get("retry-after", "1")))
                continue
            return r.raise_for_status().json()
        raise RuntimeError(f"still rate limited on {path}")

    def walk(self, path: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor = None
        while True:
            body = self.get(path, {"limit": 100, **({"starting_after": cursor} if cursor else {})})
            out += body["data"]
            if not body["has_more"]:
                return out
            cursor = body["data"][-1]["id"]


def _replace(conn: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    fd, path = tempfile.mkstemp(suffix=".ndjson")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    conn.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM read_json(?, format='newline_delimited')",
                 [path])
    os.unlink(path)


def pull(base_url: str, api_key: str, db: str) -> dict[str, Any]:
    p = Puller(base_url, api_key)
    account = p.get("account")
    projects = p.walk("projects")
    scans, issues = [], []
    for project in projects:
        scans += [dict(s, project_id=project["id"]) for s in p.walk(f"projects/{project['id']}/scans")]
        issues += p.walk(f"projects/{project['id']}/issues")
    conn = duckdb.connect(db)
    try:
        _replace(conn, "account", [account])
        _replace(conn, "projects", projects)
        _replace(conn, "scans", scans)
        _replace(conn, "issues", issues)
    finally:
        conn.close()
    return {"requests": p.requests, "rate_limited": p.rate_limited, "issues": len(issues), "scans": len(scans)}


def run_measured(base_url: str, api_key: str, db: str) -> tuple[bool, float, float, dict[str, Any]]:
    """This script in a child process: (success, wall seconds, peak RSS MB, its JSON line)."""
    from benchmarks.syncing import measured_child

    code, seconds, rss, out = measured_child([sys.executable, "-m", "benchmarks.peers.naive", base_url, db],
                                             env={"SCANWATCH_API_KEY": api_key})
    lines = [line for line in out.strip().splitlines() if line.startswith("{")]
    return code == 0 and bool(lines), seconds, rss, json.loads(lines[-1]) if lines else {"error": out[-300:]}


if __name__ == "__main__":
    print(json.dumps(pull(sys.argv[1], os.environ["SCANWATCH_API_KEY"], sys.argv[2])))
