"""The snapshot kept in a PostgreSQL history: runs write their part into `snapshot_parts`, the exporter reads
the parts with its own read-only connection, on a real server (never a mock).

A scrape never touches the database (a thread of the exporter looks every poll and the scrape serves what it
fetched), so it waits neither for a sync's transaction nor for a server that is down; meanwhile the exporter
serves the last good parts with `secscan_snapshot_readable 0` and recovers by itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import psycopg
import pytest

from exporters.server import serve
from pipelines.core import milestones
from pipelines.core.history_location import HistoryLocation
from pipelines.core.settings import Settings
from pipelines.snapshot.format import Limits, encode_snapshot, parse_snapshot
from pipelines.storage import connect
from pipelines.storage.destinations.impl.postgres.snapshot_store import DatabaseStore, PolledStore, connect_reader
from pipelines.sync.snapshot import build_part, refresh_snapshot, store_at
from tests.backends import point_at
from tests.exporter.history import NOW, load_history
from tests.pg_server import PgServer

ROOT = Path(__file__).resolve().parents[2]
POLL = 0.1


def wait_for(check: Callable[[], object], what: str, timeout: float = 60.0) -> object:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return result


def scraped(get: Callable[[], str], check: Callable[[str], bool], what: str) -> str:
    """The first body `get` answers that passes `check`."""
    found: list[str] = []
    wait_for(lambda: check(text := get()) and not found.append(text), what)
    return found[0]


def readable(text: str, workspace: str) -> float | None:
    found = re.search(rf'^secscan_snapshot_readable\{{workspace="{workspace}"\}} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else None


def score(text: str, project_id: str) -> float | None:
    found = re.search(rf'^secscan_project_score\{{[^}}]*project_id="{project_id}"[^}}]*\}} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else None


@pytest.fixture
def in_history(monkeypatch: pytest.MonkeyPatch, pg_database: str) -> Iterator[str]:
    """A PostgreSQL history holding the known history (tests/exporter/history.py), named by SCANWATCH_DB as
    a run sees it, with no SCANWATCH_SNAPSHOT: the snapshot lives in the history."""
    monkeypatch.setenv("SCANWATCH_DB", pg_database)
    monkeypatch.delenv("SCANWATCH_SNAPSHOT", raising=False)
    with connect(pg_database) as conn:
        load_history(conn)
    yield pg_database


def parts(url: str) -> dict[str, tuple[int, dict]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {name: (generation, parse_snapshot(document.encode())) for name, generation, document in
                conn.execute("SELECT name, generation, document FROM snapshot_parts").fetchall()}


class Exporter:
    """A real exporter (uvicorn, the library's exposition) over a PolledStore of `url`."""

    def __init__(self, url: str, poll_seconds: float = POLL, **kw: object) -> None:
        self.store = PolledStore(HistoryLocation.parse(url), poll_seconds=poll_seconds, **kw)
        self.server, _ = serve(self.store, address="127.0.0.1", port=0)
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.server.server_port}", timeout=20)

    def metrics(self) -> str:
        return self.http.get("/metrics").text

    def close(self) -> None:
        self.http.close()
        self.server.shutdown()
        self.store.close()


@pytest.fixture
def exporter_of() -> Iterator[Callable[[str], Exporter]]:
    started: list[Exporter] = []

    def start(url: str, **kw: object) -> Exporter:
        started.append(Exporter(url, **kw))
        return started[-1]

    yield start
    for running in started:
        running.close()


def test_a_run_writes_its_part_into_the_history_and_replaces_it_alone(in_history: str) -> None:
    with connect(in_history) as conn:
        first = refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
        held = parts(in_history)
        assert first.parts == 2 and sorted(held) == ["ws-1", "ws-2"]  # the first write holds every part
        assert "snapshot_parts" in first.location and HistoryLocation(in_history).masked in first.location
        assert HistoryLocation(in_history).secrets[0] not in first.location
        later = NOW + timedelta(minutes=15)
        again = refresh_snapshot(conn, workspace_id="ws-1", label=None, now=later)
        want = build_part(conn, workspace_id="ws-1", label=None, now=later)
    now = parts(in_history)
    assert again.parts == 1 and now["ws-2"] == held["ws-2"]  # the other workspace's part is untouched
    assert now["ws-1"][0] > held["ws-1"][0] and now["ws-1"][1] == parse_snapshot(encode_snapshot(want))


def test_a_part_that_cannot_be_written_keeps_its_last_good_row(in_history: str) -> None:
    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
        held = parts(in_history)

        def fail(name: str) -> None:
            if name == "snapshot.before_replace":  # the new row written, its transaction not yet committed
                raise OSError("killed")

        stop = milestones.observe(fail)
        try:
            with pytest.raises(OSError):
                refresh_snapshot(conn, workspace_id="ws-2", label=None, now=NOW + timedelta(hours=1))
        finally:
            stop()
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW + timedelta(hours=2))  # still usable
    now = parts(in_history)
    assert now["ws-2"] == held["ws-2"] and now["ws-1"][0] > held["ws-1"][0]


def test_ready_only_once_a_part_loads_then_every_part_is_served(in_history: str, exporter_of) -> None:
    exporter = exporter_of(in_history)
    assert exporter.http.get("/-/healthy").status_code == 200
    assert exporter.http.get("/-/ready").status_code == 503  # a history with no part yet
    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    wait_for(lambda: exporter.http.get("/-/ready").status_code == 200, "ready")
    text = scraped(exporter.metrics, lambda t: readable(t, "Beta") == 1, "both parts")
    assert readable(text, "Acme") == 1 and score(text, "p1") == 72


def test_the_exporter_serves_the_last_good_parts_while_the_server_is_down_and_recovers(
        exporter_of, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture) -> None:
    server = PgServer.start()  # a server of its own: this test stops it
    try:
        url = server.url(server.create_database("history"))
        monkeypatch.setenv("SCANWATCH_DB", url)
        monkeypatch.delenv("SCANWATCH_SNAPSHOT", raising=False)
        with connect(url) as conn:
            load_history(conn)
            refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
        exporter = exporter_of(url)
        wait_for(lambda: readable(exporter.metrics(), "Acme") == 1, "the parts served")

        restart = threading.Thread(target=server.restart, kwargs={"down_seconds": 5})
        restart.start()  # stopped at once (the exporter's connection breaks), started again 5 s later
        down = scraped(exporter.metrics, lambda t: readable(t, "Acme") == 0, "readable 0")
        assert readable(down, "Beta") == 0 and score(down, "p1") == 72  # the last good parts, still served
        assert exporter.http.get("/-/ready").status_code == 200  # a loaded pod stays in its Service
        restart.join()
        with connect(url) as conn:  # a sync after the restart: the new part is served, readable again
            conn.execute("UPDATE projects SET score = 80 WHERE id = 'p1'")
            refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW + timedelta(minutes=5))
        back = scraped(exporter.metrics, lambda t: score(t, "p1") == 80, "the new part")
        assert readable(back, "Acme") == 1 and readable(back, "Beta") == 1
        said = capfd.readouterr()
        assert f"the PostgreSQL history at {HistoryLocation(url).masked}" in caplog.text, caplog.text
        assert server.password not in caplog.text + said.err + said.out + down + back
    finally:
        server.stop()


def test_a_scrape_does_not_wait_for_a_sync_holding_its_transaction(in_history: str, exporter_of) -> None:
    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    exporter = exporter_of(in_history)
    wait_for(lambda: readable(exporter.metrics(), "Acme") == 1, "the parts served")
    with connect(in_history) as sync:
        sync.execute("BEGIN")  # a merge that has written its rows and a new part, and not yet committed
        sync.engine.lock_workspace(sync, "ws-1")
        sync.execute("UPDATE projects SET score = 10 WHERE id = 'p1'")
        DatabaseStore(sync.raw, sync.location).conn.execute(
            "UPDATE snapshot_parts SET document = document, generation = nextval('snapshot_part_generations')")
        looks = exporter.store.looks
        wait_for(lambda: exporter.store.looks >= looks + 3, "the exporter's looks while the sync holds its locks")
        started = time.monotonic()
        text = exporter.metrics()
        assert time.monotonic() - started < 2.0, "a scrape waited"
        assert readable(text, "Acme") == 1 and score(text, "p1") == 72  # the committed part
        sync.execute("ROLLBACK")


def test_the_exporter_command_reads_the_history_with_the_password_from_pgpassword(
        in_history: str, tmp_path: Path) -> None:
    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    location = HistoryLocation(in_history)
    password = location.secrets[0]
    without = in_history.replace(f":{password}@", "@")
    env = {**os.environ, "SCANWATCH_DB": without, "PGPASSWORD": password, "PYTHONUNBUFFERED": "1"}
    env.pop("SCANWATCH_SNAPSHOT", None)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "exporter", "--listen-address", "127.0.0.1",
                             "--port", str(port)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        banner = proc.stdout.readline()
        assert "snapshot_parts" in banner and location.masked.replace(":***", "") in banner, banner
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            text = scraped(lambda: http.get("/metrics").text, lambda t: readable(t, "Beta") == 1,
                           "the command's parts")
        assert score(text, "p1") == 72 and password not in text
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert password not in banner + out


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_sync_of_a_postgresql_history_writes_its_part_there_and_no_folder(
        pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelines.commands.materialize import materialize_all
    from simulator.testing import SimConfig, serve_simulator

    monkeypatch.chdir(tmp_path)  # where a folder of parts would land by default (data/ beside no DuckDB file)
    with serve_simulator(SimConfig(seed=5, scale="small", clock="driven", control=True, rate_limit=100000)) as sim:
        point_at(monkeypatch, sim, pg_database)
        outcome = materialize_all()
        workspace = sim.workspace_id
    assert outcome.success, (outcome.failed_step, outcome.error)
    held = parts(pg_database)
    assert list(held) == [workspace], held.keys()
    doc = held[workspace][1]
    assert doc["workspace_id"] == workspace and doc["tables"]["issue_severity"]
    assert {r["asset"] for r in doc["tables"]["pipeline"]} >= {"account", "projects", "scans", "issues"}
    assert not list(tmp_path.rglob("*.json")), "a folder of parts was written beside a PostgreSQL history"


def test_a_part_over_the_size_cap_is_unreadable_and_the_others_are_served(
        in_history: str, caplog: pytest.LogCaptureFixture) -> None:
    from exporters.source import SnapshotSource

    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    with psycopg.connect(in_history, autocommit=True) as raw:
        sizes = dict(raw.execute("SELECT name, octet_length(document) FROM snapshot_parts").fetchall())
    small, large = sorted(sizes, key=sizes.get)
    cap = sizes[small]  # Beta's part fits exactly; Acme's is over (--max-part-bytes)
    store = PolledStore(HistoryLocation.parse(in_history), poll_seconds=60, limits=Limits(part_bytes=cap))
    try:
        state = SnapshotSource(store).get()
    finally:
        store.close()
    assert state.listed and state.parts[small].readable and not state.parts[large].readable
    assert f"over the exporter's {cap:,}-byte cap" in caplog.text



def test_a_part_over_the_size_cap_is_never_fetched_from_the_server(in_history: str) -> None:
    """The cap bounds what the exporter holds, not only what it serves: a part over it is never fetched, by
    the poll nor by a direct read, so one huge row cannot take the exporter's memory."""
    from pipelines.snapshot.format import SnapshotError

    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    with psycopg.connect(in_history, autocommit=True) as raw:
        sizes = dict(raw.execute("SELECT name, octet_length(document) FROM snapshot_parts").fetchall())
    small, large = sorted(sizes, key=sizes.get)
    cap = sizes[small]
    store = PolledStore(HistoryLocation.parse(in_history), poll_seconds=60, limits=Limits(part_bytes=cap))
    try:
        store.look()
        assert store.read(small)[1] is not None
        with pytest.raises(SnapshotError, match=f"over the exporter's {cap:,}-byte cap"):
            store.read(large)
    finally:
        store.close()
    with psycopg.connect(in_history, autocommit=True) as raw:
        direct = DatabaseStore(raw, HistoryLocation.parse(in_history), limits=Limits(part_bytes=cap))
        assert set(direct.read_many([small, large])) == {small}
        with pytest.raises(SnapshotError, match="cap"):
            direct.read(large)

def test_parts_past_the_exporters_total_cap_are_unreadable_and_served_once_there_is_room(
        in_history: str, caplog: pytest.LogCaptureFixture) -> None:
    from exporters.source import SnapshotSource

    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    with psycopg.connect(in_history, autocommit=True) as raw:
        sizes = dict(raw.execute("SELECT name, octet_length(document) FROM snapshot_parts").fetchall())
    total = max(sizes.values())  # room for one part, not both (--max-total-bytes)
    store = PolledStore(HistoryLocation.parse(in_history), poll_seconds=60, limits=Limits(total, total))
    try:
        source = SnapshotSource(store)
        state = source.get()
        assert state.listed and sorted(p.readable for p in state.parts.values()) == [False, True], state.parts
        refused = next(n for n, p in state.parts.items() if not p.readable)
        assert f"{total:,}-byte total" in caplog.text and repr(refused) in caplog.text
        kept = next(n for n in sizes if n != refused)
        with psycopg.connect(in_history, autocommit=True) as raw:
            raw.execute("DELETE FROM snapshot_parts WHERE name = %s", (kept,))
        store.look()
        state = source.get()
        assert list(state.parts) == [refused] and state.parts[refused].readable
    finally:
        store.close()


def test_a_failed_sync_of_a_postgresql_history_still_shows_its_failure_there(
        pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelines.commands.materialize import materialize_all
    from simulator.testing import SimConfig, serve_simulator

    monkeypatch.chdir(tmp_path)
    with serve_simulator(SimConfig(seed=5, scale="small", clock="driven", control=True, rate_limit=100000)) as sim:
        point_at(monkeypatch, sim, pg_database)
        materialize_all()
        before = parts(pg_database)[sim.workspace_id]
        monkeypatch.setenv("SCANWATCH_API_KEY", "rst_" + "0" * 32)  # the key revoked: the account step fails
        outcome = materialize_all()
        after = parts(pg_database)[sim.workspace_id]
    assert not outcome.success and outcome.failed_step == "account"

    def account(doc: dict) -> dict:
        (row,) = [r for r in doc["tables"]["pipeline"] if r["asset"] == "account"]
        return row

    assert after[0] > before[0]  # the part rewritten after the failed run, in the history
    assert account(before[1])["last_run_ok"] == 1 and account(after[1])["last_run_ok"] == 0
    assert account(after[1])["runs_failure"] == account(before[1])["runs_failure"] + 1
    assert not list(tmp_path.rglob("*.json"))


# --- One part can take the exporter down (issue: a bounded, honest exporter), on the kept snapshot

DEEP = '{"schema":2,"tables":' + "[" * 200_000 + "]" * 200_000 + "}"


def _set_document(url: str, name: str, document: str) -> None:
    with psycopg.connect(url, autocommit=True) as raw:
        raw.execute("INSERT INTO snapshot_parts (name, generation, written_at, document) "
                    "VALUES (%(name)s, nextval('snapshot_part_generations'), now(), %(document)s) "
                    "ON CONFLICT (name) DO UPDATE SET generation = excluded.generation, document = excluded.document",
                    {"name": name, "document": document})


def _said(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_a_part_nested_200000_deep_is_unreadable_alone_and_later_generations_are_still_served(
        in_history: str, exporter_of, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING")
    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    exporter = exporter_of(in_history)
    scraped(exporter.metrics, lambda t: readable(t, "Beta") == 1 and readable(t, "Acme") == 1, "both parts")
    _set_document(in_history, "ws-2", DEEP)
    text = scraped(exporter.metrics, lambda t: readable(t, "Beta") == 0, "Beta's part unreadable")
    assert readable(text, "Acme") == 1
    with connect(in_history) as conn:  # a later generation of another part is still picked up
        conn.execute("UPDATE projects SET score = 80 WHERE id = 'p1'")
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW + timedelta(minutes=5))
    scraped(exporter.metrics, lambda t: score(t, "p1") == 80, "Acme's new part")
    with psycopg.connect(in_history, autocommit=True) as raw:  # a deleted part goes away
        raw.execute("DELETE FROM snapshot_parts WHERE name = 'ws-2'")
    gone = scraped(exporter.metrics, lambda t: readable(t, "Beta") is None, "Beta's part gone")
    assert readable(gone, "Acme") == 1
    lines = _said(caplog, "'ws-2'")
    assert len(lines) == 1 and "nest" in lines[0], lines


def test_an_exporter_started_over_a_deep_part_is_ready_and_serves_the_others(
        in_history: str, exporter_of, caplog: pytest.LogCaptureFixture) -> None:
    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    _set_document(in_history, "ws-2", DEEP)
    exporter = exporter_of(in_history)
    wait_for(lambda: exporter.http.get("/-/ready").status_code == 200, "ready")
    answer = exporter.http.get("/metrics")
    assert answer.status_code == 200 and readable(answer.text, "Acme") == 1 and readable(answer.text, "ws-2") == 0
    assert exporter.http.get("/-/healthy").status_code == 200


def test_a_part_claiming_another_workspaces_label_is_unreadable_and_makes_no_duplicate_series(
        in_history: str, exporter_of, caplog: pytest.LogCaptureFixture) -> None:
    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    acme = parts(in_history)["ws-1"][1]
    exporter = exporter_of(in_history)
    scraped(exporter.metrics, lambda t: readable(t, "Acme") == 1, "Acme served")
    _set_document(in_history, "ws-evil", encode_snapshot(acme).decode())  # Acme's part under another row
    forged = dict(acme, workspace_id="ws-other")  # a part whose labels name a workspace other than its row
    _set_document(in_history, "ws-other", encode_snapshot(forged).decode())
    text = scraped(exporter.metrics, lambda t: readable(t, "ws-evil") == 0 and readable(t, "ws-other") == 0,
                   "the forged parts unreadable")
    assert readable(text, "Acme") == 1
    assert len(re.findall(r'^secscan_project_score\{[^}]*project_id="p1"', text, re.MULTILINE)) == 1, text
    assert len(_said(caplog, "'ws-evil'")) == 1 and len(_said(caplog, "'ws-other'")) == 1, caplog.text


def test_the_exporters_session_cannot_write(in_history: str) -> None:
    """Every connection of the exporter's poll is `connect_reader`'s: the one it reads with refuses writes."""
    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    own = connect_reader(HistoryLocation.parse(in_history))
    try:
        assert DatabaseStore(own, HistoryLocation.parse(in_history)).keys()
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            own.execute("DELETE FROM snapshot_parts")
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            own.execute("CREATE TABLE scribble (x int)")
    finally:
        own.close()
    assert set(parts(in_history)) == {"ws-1", "ws-2"}


def test_a_new_part_is_served_on_the_first_scrape_after_it_is_written(in_history: str, exporter_of) -> None:
    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    exporter = exporter_of(in_history, poll_seconds=2.0)  # the exporter's default look
    scraped(exporter.metrics, lambda t: score(t, "p1") == 72, "the first part")
    with connect(in_history) as conn:
        conn.execute("UPDATE projects SET score = 80 WHERE id = 'p1'")
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW + timedelta(minutes=5))
    time.sleep(2.0 + 1.0 + 2.0)  # idle: no scrape for one look, one watch and the render (docs/postgres.md)
    assert score(exporter.metrics(), "p1") == 80


def test_a_silent_network_path_turns_the_parts_unreadable_within_the_bound_and_recovers(
        in_history: str, exporter_of, caplog: pytest.LogCaptureFixture) -> None:
    from tests.exporter.frozen_proxy import FrozenProxy

    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    proxy, through = FrozenProxy.before(in_history)
    try:
        exporter = exporter_of(through, stall_seconds=3.0)
        scraped(exporter.metrics, lambda t: readable(t, "Acme") == 1, "the parts through the proxy")
        proxy.freeze()
        frozen = time.monotonic()
        down = scraped(exporter.metrics, lambda t: readable(t, "Acme") == 0, "readable 0")
        assert time.monotonic() - frozen < 3.0 + 6.0, "the silence was not noticed within its bound"
        assert readable(down, "Beta") == 0 and score(down, "p1") == 72  # the last good parts, still served
        assert _said(caplog, "no answer"), caplog.text
        proxy.thaw()
        scraped(exporter.metrics, lambda t: readable(t, "Acme") == 1 and readable(t, "Beta") == 1, "recovered")
    finally:
        proxy.close()


def test_healthy_says_when_the_poll_loop_has_stopped(in_history: str, exporter_of) -> None:
    with connect(in_history) as conn:
        refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    exporter = exporter_of(in_history)
    wait_for(lambda: exporter.http.get("/-/ready").status_code == 200, "ready")
    assert exporter.http.get("/-/healthy").status_code == 200
    exporter.store.close()  # the loop ends: nothing will ever look at the history again
    answer = exporter.http.get("/-/healthy")
    assert answer.status_code == 503 and "poll" in answer.text, answer.text
    assert exporter.http.get("/-/ready").status_code == 503


def test_a_part_another_run_wrote_during_the_first_build_is_kept(in_history: str) -> None:
    """Two workspaces' first runs at once: the first build reads every part, then another run, its owners
    recorded since, writes its own part before the build's rows go in, and a part of a workspace the build did
    not read arrives. The build fills only the rows that are not there and removes none. Mutations that fail
    it: the first build overwriting every part; the rows it did not build removed."""
    later = NOW + timedelta(minutes=5)
    written: list[str] = []

    def meanwhile(name: str) -> None:
        if name == "snapshot.built" and not written:
            written.append("ws-2")
            with connect(in_history) as other:
                refresh_snapshot(other, workspace_id="ws-2", label=None, now=later)
                store = store_at(None, other, Settings.load())  # the history's own snapshot_parts
                store.write("ws-9", encode_snapshot(build_part(other, workspace_id="ws-2", label=None, now=later)))

    stop = milestones.observe(meanwhile)
    try:
        with connect(in_history) as conn:
            first = refresh_snapshot(conn, workspace_id="ws-1", label=None, now=NOW)
    finally:
        stop()
    held = parts(in_history)
    assert written and first.parts == 2
    assert {name: doc["generated_at_seconds"] for name, (_, doc) in held.items()} == {
        "ws-1": NOW.timestamp(), "ws-2": later.timestamp(), "ws-9": later.timestamp()}
