"""Every database connection has a deadline: a sync whose PostgreSQL history goes silent mid-statement (a peer
frozen in place: its kernel still ACKs, so neither TCP keepalives nor a server-side timeout end the wait) ends
within SCANWATCH_SYNC_DEADLINE_SECONDS, with one line. Real parts: the simulator over HTTP, a real PostgreSQL
server behind a proxy that stops forwarding (tests/exporter/frozen_proxy.py), the `scanwatch sync` command."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from simulator.testing import SimConfig, serve_simulator
from tests.exporter.frozen_proxy import FrozenProxy

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 25.0


def test_a_sync_whose_history_goes_silent_ends_within_its_deadline_with_one_line(
        pg_database: str, tmp_path: Path) -> None:
    with serve_simulator(SimConfig(seed=5, scale="small", clock="driven", control=True, rate_limit=100000)) as sim:
        # Held at the first statement of the first step's connection (the first connection is the command's own
        # check of the server): a statement sent on an open connection, acknowledged and never answered.
        proxy, through = FrozenProxy.before(pg_database, freeze_on=b"SET TimeZone", nth=2)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_", "PG"))}
        env.update({"SCANWATCH_BASE_URL": sim.base_url, "SCANWATCH_API_KEY": sim.api_key, "SCANWATCH_DB": through,
                    "SCANWATCH_SYNC_DEADLINE_SECONDS": str(DEADLINE), "PYTHONPATH": str(ROOT)})
        try:
            started = time.monotonic()
            proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "sync", "--quiet"], cwd=tmp_path,
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                out, err = proc.communicate(timeout=DEADLINE + 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                raise AssertionError(f"the sync was still running {DEADLINE + 60:.0f} s after it started: "
                                     f"{err[-2000:]}") from None
            took = time.monotonic() - started
        finally:
            proxy.close()
    assert proxy.froze_at is not None, "the history never went silent: the sync did not reach its first step"
    assert proc.returncode == 1, (proc.returncode, out, err)
    assert took < DEADLINE + 15, f"the sync ended {took:.0f} s after it started, deadline {DEADLINE:.0f} s"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "SCANWATCH_SYNC_DEADLINE_SECONDS" in lines[0] and "did not answer" in lines[0], err
    assert "postgres:***@" in lines[0] and pg_database.split("@")[0].split(":")[-1] not in err


def test_every_connection_has_its_deadlines(pg_database: str) -> None:
    """The writer's and the exporter's sessions, as the server and libpq hold them: connect timeout, keepalives,
    tcp_user_timeout, and the statement and lock timeouts of each session."""
    from pipelines.core.history_location import HistoryLocation
    from pipelines.storage import connect
    from pipelines.storage.destinations.impl.postgres.snapshot_store import connect_reader

    def held(raw) -> dict[str, str]:
        params = raw.info.get_parameters()
        shown = {name: raw.execute(f"SHOW {name}").fetchone()[0]
                 for name in ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout",
                              "default_transaction_read_only")}
        return {**{k: params.get(k, "") for k in ("connect_timeout", "keepalives", "keepalives_idle",
                                                   "keepalives_interval", "keepalives_count", "tcp_user_timeout")},
                **shown}

    with connect(pg_database) as writer:
        assert held(writer.raw) == {
            "connect_timeout": "10", "keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "3",
            "keepalives_count": "3", "tcp_user_timeout": "30000", "statement_timeout": "1h", "lock_timeout": "1h",
            "idle_in_transaction_session_timeout": "10min", "default_transaction_read_only": "off"}
    exporter = connect_reader(HistoryLocation.parse(pg_database))
    try:
        assert held(exporter) == {
            "connect_timeout": "3", "keepalives": "1", "keepalives_idle": "5", "keepalives_interval": "2",
            "keepalives_count": "3", "tcp_user_timeout": "10000", "statement_timeout": "2s", "lock_timeout": "1s",
            "idle_in_transaction_session_timeout": "0", "default_transaction_read_only": "on"}
    finally:
        exporter.close()
    # What the URL says itself wins.
    with connect(f"{pg_database}?keepalives_idle=42&connect_timeout=7") as writer:
        params = writer.raw.info.get_parameters()
        assert (params["keepalives_idle"], params["connect_timeout"]) == ("42", "7")
