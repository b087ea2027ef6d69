"""Each misbehaviour of a hostile service ends the sync within a stated bound, in bounded requests and
memory, with one clear line and no traceback, and leaves the earlier history intact.

The service is the simulator behind `tests/hostile/service.py`. Every case starts from the same history
(one clean sync of a world that does not move), so "intact" is an exact comparison of whole tables.

The cases whose outcome is in the history (a failed sync keeps every table; a bad record is stored replaced,
quarantined or escaped) run on both engines (`on_history`): the same service, seen from a DuckDB file and from
a PostgreSQL database of the session's server, each synced clean once. Two of them run on PostgreSQL in the
soak only (`on_history_soak`): a refusal at the first request (CI has a failed step on PostgreSQL in the
cursor cycle) and the terminal escapes (three commands; text stored as sent on both engines is checked in
tests/ingest/test_engines.py, and the escaping on the way out is no engine's). The cases about the client's
own bounds (requests, memory, deadlines, skipped lists) hold whatever the history is, and run on DuckDB alone.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from benchmarks.syncing import measured_child
from pipelines.api import DeadlineExceededError, ScanningClient
from pipelines.api.bounds import MIB, Bounds
from pipelines.commands.sync import root_cause
from simulator.testing import SimConfig, serve_simulator
from tests.backends import ENGINES
from tests.history_dump import SNAPSHOT_TABLES
from tests.hostile.service import ESCAPES, gzip_bomb, serve_hostile
from tests.reliability.harness import (
    ROOT,
    added,
    assert_intact,
    assert_one_line,
    cli,
    diff,
    dump,
    query_rows,
    service_env,
    sync_in_process,
)

BOMB_BYTES = 200 * 1024 * 1024  # unpacked; the cap is 64 MiB


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    with serve_simulator(SimConfig(seed=71, scale="small", clock="driven", control=True, rate_limit=100000)) as sim, \
            serve_hostile(sim.base_url) as svc:
        svc.sim = sim
        svc.target = SimpleNamespace(base_url=svc.base_url, api_key=sim.api_key)
        svc.db = tmp_path_factory.mktemp("hostile") / "history.duckdb"
        # The clean first sync, as the CLI runs it, measured: the memory a sync needs without a bomb.
        code, svc.clean_seconds, svc.clean_peak_mb, out = measured_child(
            [sys.executable, "-m", "pipelines.cli", "sync", "--quiet"],
            env={**service_env(svc.target, svc.db), "PYTHONPATH": str(ROOT)}, timeout=300)
        assert code == 0, out
        svc.clean_requests = svc.requests
        svc.before = dump(svc.db)
        svc.projects = len(svc.before["projects"])
        yield svc
        svc.set("clean")


class OnHistory:
    """The module's hostile service seen from another history: its own `db`, `before` and `projects`; every
    other attribute (the case, the counters, the victim, the sizes) is the one service's."""

    OWN = ("db", "before", "projects")

    def __init__(self, svc, db: str) -> None:
        object.__setattr__(self, "svc", svc)
        self.db, self.before = db, dump(db)
        self.projects = len(self.before["projects"])

    def __getattr__(self, name: str):
        return getattr(self.svc, name)

    def __setattr__(self, name: str, value) -> None:
        if name in self.OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.svc, name, value)


@pytest.fixture(scope="module")
def hostile_postgres(hostile, pg_server):
    """The same service, a PostgreSQL history synced clean once."""
    name = pg_server.create_database()
    hostile.set("clean")
    assert sync_in_process(hostile.target, pg_server.url(name)).success
    yield OnHistory(hostile, pg_server.url(name))
    pg_server.drop_database(name)


@pytest.fixture(scope="module")
def hostile_duckdb(hostile):
    """The service and its own DuckDB history, synced clean once (`hostile`)."""
    return hostile


@pytest.fixture(params=ENGINES)
def on_history(request):
    """The hostile service and a history it synced clean, on each engine (`hostile_<engine>`)."""
    return request.getfixturevalue(f"hostile_{request.param}")


@pytest.fixture(params=[ENGINES[0], pytest.param(ENGINES[1], marks=pytest.mark.slow)])
def on_history_soak(request):
    """`on_history`, PostgreSQL in the soak only: for the cases whose PostgreSQL side CI has elsewhere."""
    return request.getfixturevalue(f"hostile_{request.param}")


def _sync(svc, **kw):
    return sync_in_process(svc.target, svc.db, **kw)


def _warnings(outcome, needle: str) -> list[str]:
    return [w for w in outcome.warnings if needle in w]


def test_a_list_that_serves_the_same_page_forever_is_skipped_in_two_requests_each(hostile):
    hostile.set("same_page", "issues")
    outcome = _sync(hostile, full_reconcile=True)
    assert outcome.success
    skipped = _warnings(outcome, "already given")
    assert len(skipped) == hostile.projects, outcome.warnings
    assert all("\n" not in w for w in skipped)
    # Two issue pages and a scan list per project, plus the account and the project list.
    assert hostile.requests <= 3 * hostile.projects + 4, hostile.requests
    assert_intact(hostile.db, hostile.before)


def test_a_cursor_cycle_in_the_project_list_fails_the_step_in_one_line(on_history):
    hostile = on_history
    hostile.set("cycle", "projects")
    done = cli(["sync"], service_env(hostile.target, hostile.db), timeout=300)
    assert done.returncode == 1
    line = assert_one_line(done.stderr, must_contain="cycle")
    assert "GET /projects" in line
    assert hostile.requests <= 5, hostile.requests
    assert_intact(hostile.db, hostile.before)


def test_a_cursor_cycle_in_scan_lists_skips_those_lists(hostile, tmp_path):
    # A first sync: an incremental one stops at the first known scan, before any second page.
    hostile.set("cycle", "scans")
    db = tmp_path / "first.duckdb"
    outcome = sync_in_process(hostile.target, db)
    assert outcome.success
    assert len(_warnings(outcome, "cycle")) == hostile.projects, outcome.warnings
    assert hostile.requests <= hostile.clean_requests + 2 * hostile.projects, hostile.requests
    got = dump(db)
    assert got["scans"] == []  # nothing of a cycling list is merged
    # The rest is the clean first sync, but for the marks that say the scan lists were read, and the past's
    # scores, which the reconstruction reads from the scans.
    assert diff(got, hostile.before, ignore=("scans", "project_sync_state", "reconstructed_score_runs",
                                             "reconstruction_runs")) == {}


def test_an_endless_list_of_new_ids_stops_far_past_the_counts_but_bounded(hostile):
    hostile.set("endless", "issues")
    outcome = _sync(hostile, full_reconcile=True)
    assert outcome.success
    assert len(_warnings(outcome, "far beyond")) == hostile.projects, outcome.warnings
    issues = max(len(hostile.before["issues"]), 1)
    bound = Bounds().list_bound(issues)  # no project expects more than all the issues there are
    assert hostile.requests <= hostile.projects * (bound // 100 + 2) + 4, hostile.requests
    assert_intact(hostile.db, hostile.before)


def test_a_gzip_bomb_is_cut_at_the_cap_in_bounded_memory(hostile, tmp_path):
    """Mutation that fails it (and passed the former bound of 1024 MB): `read_capped` inflating each chunk
    whole (`decode(chunk, 0)`) and checking the cap once the body is complete; it peaked at 1007 MB.

    One answer carries the bomb, so the bound is one request's and holds however the requests overlap: the
    former form bombed every issues request and allowed for four at once, and the mutation was caught only
    when four bombs happened to be inflating together."""
    hostile.bomb = hostile.bomb or gzip_bomb(BOMB_BYTES)
    hostile.set("bomb", "issues")
    hostile.bombs = 1
    env = service_env(hostile.target, hostile.db)
    try:
        code, _, peak_mb, out = measured_child([sys.executable, "-m", "pipelines.cli", "sync", "--full-reconcile"],
                                               env={**env, "PYTHONPATH": str(ROOT)}, timeout=300)
    finally:
        hostile.bombs = None
    assert code == 1, out
    assert_one_line(out, must_contain="64 MiB")
    # The request with the bomb holds at most the cap, twice while the body is assembled: a bounded client
    # stays within that, and 40 MiB for what a full reconcile reads beyond a first sync, over a clean sync's own
    # peak. One that inflates the whole body first holds the bomb's 200 MB (it peaked at 8.6 GB on a 2 GB bomb
    # bombing every request).
    bound = hostile.clean_peak_mb + 2 * Bounds().max_body_bytes / MIB + 40
    assert 2 * Bounds().max_body_bytes + 40 * MIB < BOMB_BYTES  # the bomb is well past what the bound allows
    assert peak_mb < bound, (peak_mb, hostile.clean_peak_mb, bound)
    assert hostile.requests <= 3 * hostile.projects + 4
    assert_intact(hostile.db, hostile.before)


def test_a_rate_limit_reset_days_away_fails_fast_in_one_line(on_history_soak):
    hostile = on_history_soak
    hostile.set("far_reset")
    done = cli(["sync"], service_env(hostile.target, hostile.db), timeout=300)
    assert done.returncode == 1
    assert_one_line(done.stderr, must_contain="days from now")
    assert hostile.requests <= 2, hostile.requests  # no wait for the reset, no retry: it stops at once
    assert_intact(hostile.db, hostile.before)


def test_a_trickling_body_is_cut_at_the_request_deadline(hostile):
    hostile.set("trickle", "projects")
    hostile.trickle_gap = 0.5
    client = ScanningClient(hostile.base_url, hostile.sim.api_key, bounds=Bounds(request_deadline=2.0),
                            share_pacer=False)
    with client, pytest.raises(DeadlineExceededError) as err:
        client.list_projects()
    assert "still sending its answer after 2 s" in str(err.value)
    assert hostile.requests == 1  # not retried: a trickle would trickle again


def test_every_client_a_sync_builds_has_the_60_s_request_deadline_and_the_64_mib_cap(hostile, monkeypatch):
    """The CI form of the default deadline (the soak waits the 60 s out): the bounds the README promises are
    the ones every client of a real sync carries, and the case above shows a deadline cutting a stalled body.

    Mutation that fails it (no former CI test names the default; its case ran in the soak only):
    `request_deadline` defaulting to 600 s in
    `pipelines/api/bounds.py`."""
    built: list[Bounds] = []
    real_init = ScanningClient.__init__

    def recording(self, *args, **kw):
        real_init(self, *args, **kw)
        built.append(self.bounds)

    monkeypatch.setattr(ScanningClient, "__init__", recording)
    hostile.set("clean")
    assert _sync(hostile).success
    assert built, "the sync built no client"
    assert {(b.request_deadline, b.max_body_bytes) for b in built} == {(60.0, 64 * MIB)}


def test_the_sync_deadline_ends_a_trickling_sync(hostile):
    """The deadline must reach the trickling issue lists: it is the time this machine took for a whole clean
    sync (6 s at least), so a loaded machine does not end the sync in an earlier step (a fixed 6 s did, in
    projects_and_targets), and stays under the request's own 60 s."""
    hostile.set("trickle", "issues")
    hostile.trickle_gap = 0.5
    deadline = min(45, max(6, round(hostile.clean_seconds)))
    done = cli(["sync", "--full-reconcile"],
               service_env(hostile.target, hostile.db, SCANWATCH_SYNC_DEADLINE_SECONDS=str(deadline)), timeout=300)
    assert done.returncode == 1
    # Ended by the sync deadline, not by a request's own 60 s one, and the line says which.
    assert_one_line(done.stderr, must_contain="SCANWATCH_SYNC_DEADLINE_SECONDS")
    assert "issues" in done.stderr and "after 60 s" not in done.stderr
    assert_intact(hostile.db, hostile.before)


@pytest.mark.slow
def test_a_trickling_body_ends_the_sync_within_the_default_deadline(hostile):
    hostile.set("trickle", "issues")
    hostile.trickle_gap = 2.0
    done = cli(["sync", "--full-reconcile"], service_env(hostile.target, hostile.db), timeout=600)
    assert done.returncode == 1
    assert_one_line(done.stderr, must_contain="60 s")
    assert_intact(hostile.db, hostile.before)


@pytest.mark.slow
def test_a_two_gigabyte_gzip_bomb_stays_under_the_cap(hostile):
    hostile.bomb = gzip_bomb(2 * 1024 * 1024 * 1024)
    hostile.set("bomb", "issues")
    env = service_env(hostile.target, hostile.db)
    code, _, peak_mb, out = measured_child([sys.executable, "-m", "pipelines.cli", "sync", "--full-reconcile"],
                                           env={**env, "PYTHONPATH": str(ROOT)}, timeout=600)
    hostile.bomb = b""
    assert code == 1
    assert_one_line(out, must_contain="64 MiB")
    assert peak_mb < 1024, peak_mb


def test_the_failed_line_names_no_temp_file(hostile):
    hostile.set("far_reset")
    outcome = _sync(hostile)
    assert not outcome.success
    line = root_cause(outcome.error)
    assert "/tmp" not in line and "\n" not in line
    assert ESCAPES not in line


def _victim_rows(db, victim: str) -> list[tuple]:
    return query_rows(db, "SELECT title, detail FROM issues WHERE id = ?", [victim])


def _others(dumped: dict, victim: str) -> dict:
    """The history's rows that are not about the victim (the snapshot, rebuilt by every run, aside)."""
    return {t: [r for r in rows if victim not in r] for t, rows in dumped.items() if t not in SNAPSHOT_TABLES}


def _intact_but_the_victims_warnings(hostile, victim: str) -> None:
    """Nothing lost or changed, and new stored warnings only about the victim; those warnings are history
    from now on, which every later case must keep too."""
    after = assert_intact(hostile.db, hostile.before, may_add=("ingest_warnings",))
    gained = added(after, hostile.before).get("ingest_warnings", [])
    assert gained and all(victim in row for row in gained), gained
    hostile.before = after


def test_one_issue_with_a_lone_surrogate_is_stored_with_a_replacement_and_one_warning(on_history):
    hostile = on_history
    # The cases before may have failed runs on purpose: each added its failure record, and only that.
    hostile.before = assert_intact(hostile.db, hostile.before)
    hostile.set("surrogate", "issues")
    outcome = _sync(hostile, full_reconcile=True)
    assert outcome.success, root_cause(outcome.error)
    victim = hostile.victim
    assert len(_warnings(outcome, "lone surrogate")) == 1, outcome.warnings
    assert _victim_rows(hostile.db, victim)[0][0] == "broken \ufffd title"
    assert query_rows(hostile.db, "SELECT count(*) FROM ingest_warnings WHERE entity_id = ? AND field = 'title'",
                      [victim]) == [(1,)]
    assert _others(dump(hostile.db), victim) == _others(hostile.before, victim)
    # Back to clean: the victim's title comes back, nothing else moved.
    hostile.set("clean")
    assert _sync(hostile, full_reconcile=True).success
    _intact_but_the_victims_warnings(hostile, victim)


def test_one_oversized_issue_is_quarantined_and_the_rest_lands(on_history):
    hostile = on_history
    hostile.set("huge", "issues")
    hostile.huge_bytes = 5 * 1024 * 1024
    outcome = _sync(hostile, full_reconcile=True)
    assert outcome.success, root_cause(outcome.error)
    victim = hostile.victim
    assert len(_warnings(outcome, "quarantined") + _warnings(outcome, "left out")) == 1, outcome.warnings
    rows = query_rows(hostile.db, "SELECT value FROM ingest_warnings WHERE entity_id = ? AND field = '(record)'",
                      [victim])
    assert len(rows) == 1 and rows[0][0].startswith("quarantined"), rows
    # The history keeps the quarantined issue as it was; everything else is as a clean sync leaves it.
    _intact_but_the_victims_warnings(hostile, victim)


@pytest.mark.slow
def test_a_forty_megabyte_field_is_quarantined(hostile):
    hostile.set("huge", "issues")
    hostile.huge_bytes = 40 * 1000 * 1000
    outcome = _sync(hostile, full_reconcile=True)
    assert outcome.success, root_cause(outcome.error)
    assert len(_warnings(outcome, "quarantined") + _warnings(outcome, "left out")) == 1, outcome.warnings
    # The issue keeps its earlier state; its quarantine is the one warning stored, about it alone.
    _intact_but_the_victims_warnings(hostile, hostile.victim)


def test_terminal_escapes_from_the_service_reach_the_terminal_escaped(on_history_soak):
    hostile = on_history_soak
    hostile.set("escapes", "issues")
    env = service_env(hostile.target, hostile.db)
    done = cli(["sync", "--full-reconcile"], env, timeout=300)
    assert "\x1b" not in done.stderr + done.stdout
    assert done.returncode == 0, done.stderr[-2000:]  # the warning below is this sync's
    hostile.set("clean")
    # The history's one URL is its writer's (the superuser's, on PostgreSQL): read as it, on purpose.
    shown = cli(["sql", "SELECT name FROM projects UNION ALL SELECT value FROM ingest_warnings", "--as-writer"], env)
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "\\x1b]0;owned\\x07" in shown.stdout
    assert cli(["sync", "--full-reconcile", "--quiet"], env).returncode == 0
