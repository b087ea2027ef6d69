"""A scan status from a newer service (say `cancelled`) is stored and warned about like any unknown value,
and does not cost a request on every later sync: only the statuses this version knows to be unfinished
are re-read one by one. Otherwise every such scan would be fetched again by every sync, forever, out of
the key's 120-requests-a-minute budget."""

from __future__ import annotations

from typing import Any

from simulator.testing import SimConfig, serve_simulator
from tests.reliability.harness import query_rows, sync_env
from tests.reliability.proxy import rewriting_proxy


def test_a_scan_in_an_unknown_status_is_stored_warned_and_not_re_read_every_sync(tmp_path):
    db = tmp_path / "history.duckdb"
    changed: set[str] = set()

    def cancel_some(path: str, body: Any) -> Any:
        items = body.get("data") if path.endswith("/scans") else [body] if "/scans/" in path else []
        for scan in items or []:
            if scan.get("object") == "scan" and (not changed or scan["id"] in changed):
                changed.add(scan["id"])
                scan["status"] = "cancelled"
        return body

    with serve_simulator(SimConfig(seed=89, scale="small", clock="driven", control=True, rate_limit=100000)) as sim, \
            rewriting_proxy(sim.base_url, cancel_some) as proxied, sync_env(sim, db, SCANWATCH_BASE_URL=proxied):
        from pipelines.commands.materialize import materialize_all

        assert materialize_all().success
        assert changed
        first = sim.request_count(route="/v1/scans/{scan_id}")
        for _ in range(3):
            assert materialize_all().success
        rereads = sim.request_count(route="/v1/scans/{scan_id}") - first
    (scan_id,) = changed
    assert query_rows(db, "SELECT status FROM scans WHERE id = ?", [scan_id]) == [("cancelled",)]
    assert query_rows(db, "SELECT count(*) FROM ingest_warnings WHERE entity_id = ? AND field = 'status'",
                      [scan_id])[0][0] == 1
    assert rereads == 0, f"{rereads} GET /scans/{{id}} in 3 syncs for a scan in a status this version does not know"
