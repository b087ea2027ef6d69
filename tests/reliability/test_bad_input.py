"""Bad input and configuration: each case ends in one line naming what to fix, or the data is stored with a
warning; never a traceback the user has to read, never a loss of what the history already held."""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Any

import pytest

from pipelines.commands.sync import root_cause
from simulator.testing import SimConfig, serve_simulator
from tests.reliability.harness import (
    ROOT,
    assert_intact,
    assert_one_line,
    cli,
    diff,
    dump,
    query_rows,
    service_env,
    sync_env,
    sync_in_process,
)
from tests.reliability.proxy import rewriting_proxy


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Any:
    """One simulator and a history holding one clean sync, shared by the cases (none may change it)."""
    with serve_simulator(SimConfig(seed=53, scale="small", clock="driven", control=True, rate_limit=100000)) as sim:
        db = tmp_path_factory.mktemp("bad") / "history.duckdb"
        assert sync_in_process(sim, db).success
        sim.db = db  # type: ignore[attr-defined]
        yield sim


@pytest.mark.parametrize(("variable", "value", "expected"), [
    ("SCANWATCH_BASE_URL", None, "SCANWATCH_BASE_URL is not set"),
    ("SCANWATCH_BASE_URL", "api.example.com/v1", "SCANWATCH_BASE_URL must be"),
    ("SCANWATCH_BASE_URL", "ftp://api.example.com/v1", "SCANWATCH_BASE_URL must be"),
    ("SCANWATCH_BASE_URL", "http://127.0.0.1:1/", "SCANWATCH_BASE_URL must be"),
    ("SCANWATCH_API_KEY", None, "SCANWATCH_API_KEY is not set"),
    ("SCANWATCH_API_KEY", "   ", "SCANWATCH_API_KEY is not set"),
    ("SCANWATCH_API_KEY", "sk_live_0123456789abcdef", "does not look like an API key"),
])
def test_missing_or_malformed_settings_are_one_line_before_any_request(world, variable, value, expected):
    env = service_env(world, world.db)
    if value is None:
        env.pop(variable)
    else:
        env[variable] = value
    before = dump(world.db)
    done = cli(["sync"], env)
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain=expected)
    assert_intact(world.db, before)


REFUSED_SETTINGS = [
    ("SCANWATCH_API_KEY", "rst_0000000000000000000000000000000", "SCANWATCH_API_KEY"),  # refused by the service
    ("SCANWATCH_API_KEY", "rst_abc\ndef", "SCANWATCH_API_KEY"),  # cannot be a header
    ("SCANWATCH_API_KEY", "rst_clé-accentuée", "SCANWATCH_API_KEY"),  # not ASCII
]
# Each of these waits through the client's retries (seconds of backoff): run at once, through the CLI, below.
UNREACHABLE = [
    ("http://127.0.0.1:1/v1", "SCANWATCH_BASE_URL"),  # nothing listens there
    ("http://no-such-host.invalid/v1", "SCANWATCH_BASE_URL"),  # a name that never resolves (RFC 2606)
    ("http://127.0.0.1:99999/v1", "SCANWATCH_BASE_URL"),  # no such port
]
# The plan gate: the service answers 402 and the line names the plan to move to.
PLAN_GATE = [("free", "Free plan"), ("trial_ended", "trial")]


@pytest.mark.parametrize(("variable", "value", "expected"), REFUSED_SETTINGS)
def test_settings_the_service_or_the_network_refuse_are_one_line(world, variable, value, expected):
    before = dump(world.db)
    with sync_env(world, world.db, **{variable: value}):
        from pipelines.commands.materialize import materialize_all

        outcome = materialize_all()
    assert not outcome.success
    line = root_cause(outcome.error)
    assert expected in line and "\n" not in line and "Traceback" not in line, line
    assert value.strip() not in line or variable == "SCANWATCH_BASE_URL"
    assert_intact(world.db, before)


@pytest.mark.parametrize(("key_name", "expected"), [
    ("token_none", "scans:read"),  # an OAuth token without the scope
])
def test_credential_kind_scope_and_plan_refusals_through_the_cli(world, key_name, expected):
    before = dump(world.db)
    done = cli(["sync"], service_env(world, world.db, SCANWATCH_API_KEY=world.keys[key_name]))
    assert done.returncode == 1
    line = assert_one_line(done.stderr, must_contain=expected)
    assert world.keys[key_name] not in done.stdout + done.stderr
    assert line.startswith("scanwatch sync: failed in ") and "pipelines." not in line
    assert_intact(world.db, before)


def test_the_cli_refuses_free_and_ended_trial_plans_and_unreachable_hosts_in_one_line_each(world, tmp_path):
    """The README's refusals as a user meets them, `scanwatch sync` each, all at once (the unreachable hosts
    spend their seconds in the client's backoff, side by side): one line naming the plan or the variable,
    exit 1, no key in the output, and the history as it was. The plan gate also records that the API no
    longer answers the workspace (`accounts.api_access_allowed` false), and nothing else.

    Mutation that fails it (the former form of this file passed it: these cases ran only in the soak):
    `error_class` no longer mapping the plan gate's 402 codes to `PlanRequiredError`, so the line is the
    service's generic 402 message and the history does not record the lost access."""
    before = dump(world.db)
    cases = [(f"plan-{name}", {"SCANWATCH_API_KEY": world.keys[name]}, expected, world.keys[name])
             for name, expected in PLAN_GATE]
    cases += [(f"host-{n}", {"SCANWATCH_BASE_URL": url}, expected, world.api_key)
              for n, (url, expected) in enumerate(UNREACHABLE)]
    running = []
    for name, extra, expected, key in cases:
        db = tmp_path / name / "history.duckdb"
        db.parent.mkdir()
        shutil.copyfile(world.db, db)
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "sync"], cwd=ROOT,
                                env=service_env(world, db, **extra), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        running.append((name, proc, db, expected, key))
    for name, proc, db, expected, key in running:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 1, (name, err[-2000:])
        line = assert_one_line(err, must_contain=expected)
        assert line.startswith("scanwatch sync: failed in account: ") and "pipelines." not in line, line
        assert key not in out + err, name
        if name.startswith("plan-"):  # recorded: the API no longer answers; the rest as it was
            after = dump(db)
            assert {r["api_access_allowed"] for r in after.records("accounts")} == {False}, name
            assert diff(after, before, ignore=("accounts", "sync_runs")) == {}, name
            assert [{**r, "api_access_allowed": True} for r in after.records("accounts")] == \
                before.records("accounts")
        else:
            assert_intact(db, before)


def test_a_project_that_vanishes_mid_sync_is_skipped_with_a_warning_and_nothing_is_lost(tmp_path, monkeypatch,
                                                                                        capfd):
    from pipelines.api.client import ScanningClient

    db = tmp_path / "history.duckdb"
    with serve_simulator(SimConfig(seed=59, scale="small", clock="driven", control=True, rate_limit=100000)) as sim:
        assert sync_in_process(sim, db).success
        victim = sim.project_ids()[0]
        kept = query_rows(db, "SELECT * EXCLUDE (last_observed_at, hidden_reason, hidden_at) FROM issues "
                              "WHERE project_id = ?", [victim])
        assert kept
        sim.run_round()
        real = ScanningClient.iter_issues

        def vanish_then_read(self, project_id, **kw):  # deleted just as its issues are about to be read
            if project_id == victim and victim in sim.project_ids():
                sim.delete_project(victim)
            return real(self, project_id, **kw)

        monkeypatch.setattr(ScanningClient, "iter_issues", vanish_then_read)
        outcome = sync_in_process(sim, db)
        monkeypatch.undo()
        assert outcome.success, root_cause(outcome.error)
        assert victim not in sim.project_ids()
        assert f"project {victim} vanished" in capfd.readouterr().err
        assert sync_in_process(sim, db).success
    assert query_rows(db, "SELECT removed_at IS NOT NULL FROM projects WHERE id = ?", [victim]) == [(True,)]
    # Its issues stay in the history as they were last seen, set aside as no longer shown.
    assert query_rows(db, "SELECT * EXCLUDE (last_observed_at, hidden_reason, hidden_at) FROM issues "
                          "WHERE project_id = ?", [victim]) == kept
    assert query_rows(db, "SELECT DISTINCT hidden_reason FROM issues WHERE project_id = ?", [victim]) == [
        ("project_removed",)]


def _wrong_types(path: str, body: Any) -> Any:
    if path.endswith("/issues") and body.get("data"):
        first, second, third = (body["data"] + [{}, {}, {}])[:3]
        first.update(line="forty-two", severity=5, first_seen_at="yesterday", fix_unlocked="perhaps")
        second.pop("title", None)
        second.pop("severity", None)
        third.pop("project_id", None)  # cannot be stored: listed as a warning instead
    if path.endswith("/projects") and body.get("data"):
        body["data"][0].update(score="high", open_issues=None, paused="sometimes")
    return body


def test_a_page_with_wrong_types_or_missing_fields_is_stored_with_warnings(tmp_path):
    db = tmp_path / "history.duckdb"
    with serve_simulator(SimConfig(seed=61, scale="small", clock="driven", control=True, rate_limit=100000)) as sim, \
            rewriting_proxy(sim.base_url, _wrong_types) as proxied, sync_env(sim, db, SCANWATCH_BASE_URL=proxied):
        from pipelines.commands.materialize import materialize_all

        outcome = materialize_all()
    assert outcome.success, root_cause(outcome.error)
    warned = {(e, f) for e, f in query_rows(db, "SELECT DISTINCT entity, field FROM ingest_warnings")}
    assert {("issues", "line"), ("issues", "severity"), ("issues", "first_seen_at"), ("issues", "fix_unlocked"),
            ("issues", "project_id"), ("projects", "score"), ("projects", "paused")} <= warned, warned
    assert query_rows(db, "SELECT count(*) FROM issues WHERE line IS NULL AND severity = '5'")[0][0] >= 1
    assert query_rows(db, "SELECT count(*) FROM issues WHERE title IS NULL AND severity IS NULL")[0][0] >= 1
    assert outcome.metadata["issues"]["warnings"] > 0


def test_a_page_the_client_cannot_use_fails_in_one_line_and_keeps_the_history(world):
    def no_ids(path: str, body: Any) -> Any:
        if path.endswith("/projects"):
            for item in body.get("data", []):
                item.pop("id", None)
        return body

    before = dump(world.db)
    with rewriting_proxy(world.base_url, no_ids) as proxied, sync_env(world, world.db, SCANWATCH_BASE_URL=proxied):
        from pipelines.commands.materialize import materialize_all

        outcome = materialize_all()
    assert not outcome.success
    line = root_cause(outcome.error)
    assert "GET /projects" in line and "\n" not in line, line
    assert_intact(world.db, before)


def test_a_huge_page_is_stored_whole(tmp_path):
    big = "x" * 300_000

    def huge(path: str, body: Any) -> Any:
        if path.endswith("/issues"):
            for item in body.get("data", []):
                item["evidence"] = big
                item["explanation"] = big
        return body

    db = tmp_path / "history.duckdb"
    with serve_simulator(SimConfig(seed=67, scale="small", clock="driven", control=True, rate_limit=100000)) as sim, \
            rewriting_proxy(sim.base_url, huge) as proxied, sync_env(sim, db, SCANWATCH_BASE_URL=proxied):
        from pipelines.commands.materialize import materialize_all

        outcome = materialize_all()
    assert outcome.success, root_cause(outcome.error)
    n, shortest = query_rows(db, "SELECT count(*), min(length(evidence) + length(explanation)) FROM issues")[0]
    assert n > 50 and shortest == 2 * len(big)


