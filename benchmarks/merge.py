"""Figure 5: merging the large world's issues into the history, against DuckDB merely loading them.

The merge stages the rows (NDJSON read as text, typed with TRY_CAST, warnings collected), diffs them
against the history into `issue_events` and upserts `issues`, in one transaction. The yardstick is the
least any DuckDB ingestion must do with the same rows: write them as NDJSON and load them into an empty
table. The ratio says what history costs on top of loading.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from benchmarks.figures import Figure, judge
from benchmarks.memory import peak_rss
from pipelines.core.vocabulary import SEVERITIES
from pipelines.storage import connect
from tests.helpers import merge_issues


def changed(rows: list[dict[str, Any]], share: float, when: datetime) -> list[dict[str, Any]]:
    """A re-sync's lists: `share` of the issues changed (fixed, reopened or re-severitied), every 1/share-th
    row, deterministic; the rest as they were."""
    step = max(1, round(1 / share))
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    out = []
    for n, row in enumerate(rows):
        if n % step:
            out.append(row)
            continue
        row = dict(row, last_seen_at=stamp)
        kind = (n // step) % 3
        if kind == 0 and row.get("status") == "open":
            row.update(status="fixed", fixed_at=stamp)
        elif kind == 0 or (kind == 1 and row.get("status") == "fixed"):
            row.update(status="open", fixed_at=None)
        else:
            sev = row.get("severity")
            row["severity"] = SEVERITIES[(SEVERITIES.index(sev) + 1) % 5] if sev in SEVERITIES else "high"
        out.append(row)
    return out


def load_plain(rows: list[dict[str, Any]], workdir: Path) -> float:
    """The yardstick: the same rows written as NDJSON and loaded by DuckDB into an empty table."""
    db = Path(tempfile.mkdtemp(prefix="load-", dir=workdir)) / "plain.duckdb"
    conn = duckdb.connect(str(db))
    try:
        started = time.perf_counter()
        fd, path = tempfile.mkstemp(suffix=".ndjson", dir=workdir)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for rec in rows:
                fh.write(json.dumps(rec, separators=(",", ":")))
                fh.write("\n")
        conn.execute("CREATE TABLE issues AS SELECT * FROM read_json(?, format='newline_delimited')", [path])
        seconds = time.perf_counter() - started
        os.unlink(path)
        return seconds
    finally:
        conn.close()


def measure(rows: list[dict[str, Any]], workspace_id: str, workdir: Path, repeats: int = 3) -> list[Figure]:
    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    later = now + timedelta(hours=1)
    resync_rows = changed(rows, 0.05, later)
    first_s, resync_s, plain_first_s, plain_resync_s = [], [], [], []
    first_mem = resync_mem = None
    events: dict[str, int] = {}
    for _ in range(repeats):
        db = Path(tempfile.mkdtemp(prefix="merge-", dir=workdir)) / "history.duckdb"
        conn = connect(db)
        try:
            with peak_rss() as first_mem:
                started = time.perf_counter()
                merge_issues(conn, workspace_id, rows, now=now)
                first_s.append(time.perf_counter() - started)
            with peak_rss() as resync_mem:
                started = time.perf_counter()
                result = merge_issues(conn, workspace_id, resync_rows, now=later)
                resync_s.append(time.perf_counter() - started)
            events = result.events
        finally:
            conn.close()
        plain_first_s.append(load_plain(rows, workdir))
        plain_resync_s.append(load_plain(resync_rows, workdir))
    med = statistics.median
    first_ratio = med(first_s) / med(plain_first_s)
    resync_ratio = med(resync_s) / med(plain_resync_s)

    def details(merge_s: list[float], plain_s: list[float], mem: Any) -> dict[str, Any]:
        return {"issues": len(rows), "merge_seconds": round(med(merge_s), 3),
                "load_seconds": round(med(plain_s), 3), "repeats": repeats,
                "peak_rss_mb": mem.peak_mb, "rss_growth_mb": mem.growth_mb, "peak_exact": mem.exact}

    return [
        Figure("merge_first_ratio", "merge of the issues into an empty history / DuckDB plain load",
               round(first_ratio, 2), "x", "<= 3", judge(first_ratio <= 3), details(first_s, plain_first_s, first_mem)),
        Figure("merge_resync_ratio", "merge of a re-sync with 5 % changed / DuckDB plain load",
               round(resync_ratio, 2), "x", "<= 3", judge(resync_ratio <= 3),
               {**details(resync_s, plain_resync_s, resync_mem), "events": events}),
    ]
