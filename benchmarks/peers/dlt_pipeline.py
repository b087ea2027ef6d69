"""dlt's `rest_api` source into DuckDB, as a data engineer would set it up for this service.

Runs inside the benchmark's own environment (`benchmarks/.venv-dlt`), never scanwatch's: it imports dlt
and the standard library only. `run BASE_URL WORKDIR` loads once (issues with `merge` + `scd2` history,
projects and scans with `merge` on id, the account replaced); `history WORKDIR IDS_JSON` answers which of
the given changes the scd2 history shows. Both print one JSON line. The key comes from SCANWATCH_API_KEY.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")  # no traffic but to the simulator
os.environ.setdefault("RUNTIME__LOG_LEVEL", "WARNING")

import dlt
from dlt.sources.helpers.rest_client.paginators import BasePaginator
from dlt.sources.rest_api import rest_api_source

DATASET = "secscan"


class StartingAfterPaginator(BasePaginator):
    """The service's cursor: `starting_after` = the last id of the page, while `has_more` is true."""

    def __init__(self) -> None:
        super().__init__()
        self.cursor: str | None = None

    def update_state(self, response: Any, data: list[Any] | None = None) -> None:
        body = response.json()
        items = body.get("data") or []
        if body.get("has_more") and items:
            self.cursor = items[-1]["id"]
        else:
            self._has_next_page = False

    def update_request(self, request: Any) -> None:
        request.params = {**(request.params or {}), "starting_after": self.cursor}


def source(base_url: str, api_key: str) -> Any:
    per_project = {"project_id": {"type": "resolve", "resource": "projects", "field": "id"}}
    return rest_api_source({
        "client": {"base_url": base_url.rstrip("/") + "/", "auth": {"type": "bearer", "token": api_key},
                   "paginator": StartingAfterPaginator()},
        "resource_defaults": {"endpoint": {"params": {"limit": 100}, "data_selector": "data"}},
        "resources": [
            {"name": "account", "write_disposition": "replace",
             "endpoint": {"path": "account", "data_selector": "$", "paginator": "single_page", "params": {}}},
            {"name": "projects", "write_disposition": "merge", "primary_key": "id", "endpoint": {"path": "projects"}},
            {"name": "scans", "write_disposition": "merge", "primary_key": "id",
             "endpoint": {"path": "projects/{project_id}/scans", "params": per_project}},
            {"name": "issues", "write_disposition": {"disposition": "merge", "strategy": "scd2"},
             "endpoint": {"path": "projects/{project_id}/issues", "params": per_project}},
        ],
    })


def _pipeline(workdir: str) -> Any:
    return dlt.pipeline(pipeline_name="secscan_bench", pipelines_dir=os.path.join(workdir, "pipelines"),
                        destination=dlt.destinations.duckdb(os.path.join(workdir, "dlt.duckdb")),
                        dataset_name=DATASET)


def run(base_url: str, workdir: str) -> dict[str, Any]:
    pipeline = _pipeline(workdir)
    info = pipeline.run(source(base_url, os.environ["SCANWATCH_API_KEY"]))
    with pipeline.sql_client() as client:
        versions = client.execute_sql(f"SELECT count(*) FROM {DATASET}.issues")[0][0]
    return {"loads": len(info.loads_ids), "issue_versions": versions}


def history(workdir: str, ids: dict[str, list[str]]) -> dict[str, Any]:
    """For each kind of change, how many of the ids the scd2 history shows as that change."""
    import duckdb

    conn = duckdb.connect(os.path.join(workdir, "dlt.duckdb"), read_only=True)
    try:
        t = f"{DATASET}.issues"
        live = "(_dlt_valid_to IS NULL OR _dlt_valid_to >= TIMESTAMP '9999-01-01')"
        c_live, o_old = live.replace("_dlt", "c._dlt"), "NOT " + live.replace("_dlt", "o._dlt")
        loads = [r[0] for r in conn.execute(f"SELECT DISTINCT _dlt_valid_from FROM {t} ORDER BY 1").fetchall()]
        last = loads[-1]
        # A change shows as the live version, written by the last load, against a retired older version.
        pair = (f"SELECT count(DISTINCT c.id) FROM {t} c JOIN {t} o ON o.id = c.id AND {o_old} WHERE {c_live} "
                "AND c._dlt_valid_from = ? AND c.id IN (SELECT unnest(?)) AND ")
        checks = {
            "new": f"SELECT count(*) FROM {t} c WHERE {live} AND NOT EXISTS (SELECT 1 FROM {t} o WHERE o.id = c.id "
                   "AND o._dlt_valid_from < ?) AND c.id IN (SELECT unnest(?))",
            "fixed": pair + "c.status = 'fixed' AND o.status <> 'fixed'",
            "reopened": pair + "c.status <> 'fixed' AND o.status = 'fixed'",
            "severity_changed": pair + "c.severity <> o.severity",
        }
        found = {k: conn.execute(sql, [last, ids.get(k, [])]).fetchall()[0][0] for k, sql in checks.items()}
        new_versions = conn.execute(f"SELECT count(*) FROM {t} WHERE _dlt_valid_from = ?", [last]).fetchall()[0][0]
        live_rows = conn.execute(f"SELECT count(*) FROM {t} WHERE {live}").fetchall()[0][0]
        return {"found": found, "versions_written_by_last_load": new_versions, "live_issues": live_rows,
                "loads": len(loads)}
    finally:
        conn.close()


if __name__ == "__main__":
    if sys.argv[1] == "run":
        print(json.dumps(run(sys.argv[2], sys.argv[3])))
    else:
        print(json.dumps(history(sys.argv[2], json.loads(sys.argv[3]))))
