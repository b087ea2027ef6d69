"""Faults of the simulator survived over real HTTP: 5xx, 429 bursts, malformed and truncated JSON, dropped
connections, lists changing while paged. Backoff runs in virtual time (``SkipClock``) to keep the suite fast."""

from __future__ import annotations

import pytest

from pipelines.api import InvalidRequestError, ScanningClient
from simulator.testing import SimConfig, serve_simulator

from .sim_helpers import SkipClock, full_walk, minimum_sync
from .test_simulator import world_ids

pytestmark = pytest.mark.timeout(60)


def test_every_transient_fault_is_survived() -> None:
    with serve_simulator(SimConfig(seed=3, scale="small", clock="driven", control=True, rate_limit=100000)) as sim:
        expected = world_ids(sim)
        sim.set_faults(error_rate=0.1, unavailable_rate=0.05, rate_limit_rate=0.03, malformed_rate=0.05,
                       truncated_rate=0.05, drop_rate=0.05)
        clock = SkipClock()
        with ScanningClient(sim.base_url, sim.api_key, sleep=clock.sleep, clock=clock.time, max_attempts=10) as c:
            got = full_walk(c)
        assert [p["id"] for p in got["projects"]] == expected[0]
        assert {k: [s["id"] for s in v] for k, v in got["scans"].items()} == expected[1]
        assert {k: [i["id"] for i in v] for k, v in got["issues"].items()} == expected[2]
        stats = c.stats.snapshot()
        assert stats["retries"] > 0 and stats["server_errors"] > 0 and stats["transport_errors"] > 0
        assert stats["requests"] == sim.request_count(key="pro") == minimum_sync(sim) + stats["retries"]
        assert 0 < sum(clock.sleeps) == pytest.approx(stats["waited_seconds"], abs=0.01)


def test_429_bursts_honour_retry_after() -> None:
    with serve_simulator(SimConfig(seed=3, scale="small", clock="driven", control=True, rate_limit=100000)) as sim:
        sim.set_faults(rate_limit_rate=0.2, rate_limit_burst=3)
        clock = SkipClock()
        with ScanningClient(sim.base_url, sim.api_key, sleep=clock.sleep, clock=clock.time, max_attempts=10) as c:
            full_walk(c)
        assert c.stats.rate_limited > 0
        assert clock.sleeps.count(1.0) == c.stats.rate_limited  # the simulator's Retry-After: 1


def test_lists_changing_while_paged_miss_nothing_and_double_nothing() -> None:
    with serve_simulator(SimConfig(seed=5, scale="medium", clock="driven", control=True, rate_limit=100000)) as sim:
        before = world_ids(sim)
        sim.set_faults(list_mutation_rate=0.3, scope="lists")
        with ScanningClient(sim.base_url, sim.api_key, max_restarts=20) as c:
            got = full_walk(c)
        sim.clear_faults()
        after = world_ids(sim)
        assert c.stats.restarts > 0, c.stats.snapshot()
        for pid in before[0]:
            for kind, index in (("scans", 1), ("issues", 2)):
                ids = [x["id"] for x in got[kind][pid]]
                assert len(ids) == len(set(ids)), f"duplicates in {kind}"
                kept = set(before[index][pid]) & set(after[index][pid])
                assert kept <= set(ids), f"missed {kind}"
            # A collected list is one clean pass: nothing the service no longer has.
            assert {i["id"] for i in got["issues"][pid]} <= set(after[2][pid])


def test_restarts_are_bounded_over_http() -> None:
    with serve_simulator(SimConfig(seed=5, scale="small", clock="driven", control=True, rate_limit=100000)) as sim:
        pid = max(world_ids(sim)[2].items(), key=lambda kv: len(kv[1]))[0]
        sim.set_faults(list_mutation_rate=1.0, list_mutation="remove", scope="lists")
        with ScanningClient(sim.base_url, sim.api_key, max_restarts=2) as c, \
                pytest.raises(InvalidRequestError) as info:
            c.list_issues(pid)
        assert info.value.code == "cursor_invalid" and c.stats.restarts == 2


def test_platform_busy_is_raised_at_once_with_its_wait() -> None:
    from pipelines.api import ServiceUnavailableError

    with serve_simulator(SimConfig(seed=3, scale="small", clock="driven", control=True, rate_limit=100000)) as sim:
        sim.set_faults(busy_rate=1.0)
        target = sim.target_ids(kind="domain", verified=True)[0]
        with ScanningClient(sim.base_url, sim.api_key) as c, pytest.raises(ServiceUnavailableError) as info:
            c.start_scan(target, idempotency_key="busy-1")
        assert info.value.code == "platform_busy" and info.value.retry_after == 120
        assert c.stats.requests == 1 and "nothing was charged" in str(info.value)
