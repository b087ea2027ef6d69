"""The client against the bundled simulator over real HTTP: minimum requests, error lines, faults survived."""

from __future__ import annotations

import pytest

from pipelines.api import (
    ApiConnectionError,
    AuthenticationError,
    NotFoundError,
    PermissionDeniedError,
    PlanRequiredError,
)
from simulator.testing import SimConfig, serve_simulator
from tests.client.writing import WritingClient

from .sim_helpers import SkipClock, full_walk, minimum_sync

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def sim():
    with serve_simulator(SimConfig(seed=7, scale="small", clock="driven", control=True, rate_limit=100000)) as s:
        yield s


def world_ids(sim, key: str = "pro") -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
    world = sim.world
    with world.lock:
        ws = world.credentials[world.keys[key]].workspace_id
        projects = world.projects_ordered(ws)
        return ([p.id for p in projects], {p.id: [s.id for s in world.scans_ordered(p)] for p in projects},
                {p.id: [i.id for i in world.issues_ordered(p)] for p in projects})


@pytest.mark.parametrize("scale", ["small", "medium"])
def test_every_list_walked_at_the_minimum(scale: str) -> None:
    with serve_simulator(SimConfig(seed=11, scale=scale, clock="driven", rate_limit=100000)) as sim, \
            WritingClient(sim.base_url, sim.api_key) as client:
        got = full_walk(client)
        projects, scans, issues = world_ids(sim)
        assert [p["id"] for p in got["projects"]] == projects
        assert {k: [s["id"] for s in v] for k, v in got["scans"].items()} == scans
        assert {k: [i["id"] for i in v] for k, v in got["issues"].items()} == issues
        assert client.stats.requests == minimum_sync(sim) == sim.request_count(key="pro")
        assert client.stats.service_version == "2026-10-13"
        assert client.stats.last_limit == 100000
        if scale == "medium":
            assert client.stats.requests > 1 + 1 + 2 * len(projects)  # some lists really span pages


def test_iter_scans_stops_paging_when_the_caller_stops(sim) -> None:
    with WritingClient(sim.base_url, sim.api_key) as client:
        project = max(world_ids(sim)[1].items(), key=lambda kv: len(kv[1]))[0]
        before = sim.request_count(key="pro")
        first = next(client.iter_scans(project))
        assert first["object"] == "scan"
        assert sim.request_count(key="pro") - before == 1


def test_filters_reach_the_service(sim) -> None:
    with WritingClient(sim.base_url, sim.api_key) as client:
        project = world_ids(sim)[0][0]
        open_high = client.list_issues(project, status="open", severity="high")
        assert open_high and all(i["status"] == "open" and i["severity"] == "high" for i in open_high)


def test_401_402_403_are_one_actionable_line(sim) -> None:
    def fail(key: str, call=lambda c: c.get_account()):
        with WritingClient(sim.base_url, sim.keys.get(key, key), max_attempts=1) as client, \
                pytest.raises(Exception) as info:
            call(client)
        text = str(info.value)
        assert "\n" not in text and text.rsplit("Request-Id: ", 1)[1].startswith("req_"), text
        return info.value, text

    err, text = fail("revoked")
    assert isinstance(err, AuthenticationError) and err.code == "invalid_api_key" and "SCANWATCH_API_KEY" in text
    err, text = fail("rst_not_a_real_key")
    assert err.code == "invalid_api_key"
    err, text = fail("")
    assert isinstance(err, AuthenticationError) and err.code == "authentication_required"
    assert "SCANWATCH_API_KEY" in text
    err, text = fail("free")
    assert isinstance(err, PlanRequiredError) and err.code == "api_plan_required" and "Free plan" in text
    err, text = fail("trial_ended")
    assert isinstance(err, PlanRequiredError) and err.code == "api_trial_ended" and "Pro" in text
    err, text = fail("token_none")
    assert isinstance(err, PermissionDeniedError) and "scans:read" in text and "rst_" in text
    issue = world_ids(sim)[2][world_ids(sim)[0][0]][0]
    err, text = fail("token_read", lambda c: c.mark_issue(issue, "open"))
    assert isinstance(err, PermissionDeniedError) and "issues:write" in text
    for key in ("revoked", "free", "token_none", "trial_ended"):
        assert sim.keys[key] not in fail(key)[1]


def test_another_workspace_object_is_not_found(sim) -> None:
    project = world_ids(sim)[0][0]
    with WritingClient(sim.base_url, sim.keys["other_workspace"], max_attempts=1) as client, \
            pytest.raises(NotFoundError):
        client.get_project(project)


def test_connection_refused_names_the_base_url() -> None:
    clock = SkipClock()
    with WritingClient("http://127.0.0.1:9/v1", "rst_x", sleep=clock.sleep, clock=clock.time,
                       max_attempts=2) as client, pytest.raises(ApiConnectionError) as info:
        client.get_account()
    assert "SCANWATCH_BASE_URL" in str(info.value) and "http://127.0.0.1:9/v1" in str(info.value)


def test_writes_are_idempotent_over_http(sim) -> None:
    clock = SkipClock()
    with WritingClient(sim.base_url, sim.api_key, sleep=clock.sleep, clock=clock.time) as client:
        target = sim.target_ids(kind="domain", verified=True)[0]
        first = client.start_scan(target, idempotency_key="test-scan-1")
        again = client.start_scan(target, idempotency_key="test-scan-1")
        assert again["id"] == first["id"]
        created = client.create_project("scanwatch test", idempotency_key="test-project-1")
        assert client.create_project("scanwatch test", idempotency_key="test-project-1")["id"] == created["id"]
        issue = next(i for i in client.list_issues(world_ids(sim)[0][0], status="open"))
        marked = client.mark_issue(issue["id"], "accepted_risk", "Accepted until the next release.")
        assert marked["status"] == "accepted_risk"
        assert client.mark_issue(issue["id"], "open")["status"] == "open"
        fix = client.unlock_fix(issue["id"], idempotency_key="test-fix-1")
        assert client.unlock_fix(issue["id"], idempotency_key="test-fix-1") == fix
        assert client.get_fix(issue["id"])["issue_id"] == issue["id"]
        assert client.recheck_issue(issue["id"], idempotency_key="test-recheck-1")["issue_id"] == issue["id"]
        assert client.get_issue(issue["id"])["id"] == issue["id"]


def test_the_key_never_shows_over_real_http(sim, caplog: pytest.LogCaptureFixture) -> None:
    """Every logger at DEBUG (ours, httpx, httpcore), every error text and repr: no trace of the credential."""
    import logging

    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    for key in ("pro", "revoked", "token_none", "free"):
        secret = sim.keys[key]
        with WritingClient(sim.base_url, secret, max_attempts=1) as client:
            texts.append(repr(client))
            try:
                full_walk(client)
            except Exception as exc:  # any failure text is checked below
                texts += [str(exc), repr(exc), str(vars(exc))]
            texts.append(str(client.stats.snapshot()))
    texts += [record.getMessage() for record in caplog.records]
    assert any("GET /projects" in t for t in texts)
    for key in ("pro", "revoked", "token_none", "free"):
        secret = sim.keys[key]
        assert not [t for t in texts if secret in t or secret[4:] in t], key
