"""Fixtures: one small driven simulator per module (cheap), fresh ones where a test changes the world."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from simulator.testing import SimConfig, Simulator, serve_simulator


def sim_config(**kw: object) -> SimConfig:
    base = {"seed": 7, "scale": "small", "clock": "driven", "control": True, "rate_limit": 100000,
            "rate_window": 60.0, "scan_seconds": 30}
    base.update(kw)
    return SimConfig(**base)  # type: ignore[arg-type]


@pytest.fixture
def sim() -> Iterator[Simulator]:
    """A fresh simulator for a test that changes the world."""
    with serve_simulator(sim_config()) as s:
        yield s


@pytest.fixture(scope="module")
def shared_sim() -> Iterator[Simulator]:
    """A simulator shared by a module's read-only tests."""
    with serve_simulator(sim_config()) as s:
        yield s


@pytest.fixture
def client(sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.base_url, headers=sim.headers(), timeout=10) as c:
        yield c


@pytest.fixture
def make_client(sim: Simulator) -> Iterator:
    clients: list[httpx.Client] = []

    def make(key: str = "pro") -> httpx.Client:
        c = httpx.Client(base_url=sim.base_url, headers=sim.headers(key), timeout=10)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


def code(r: httpx.Response) -> str:
    """The error code of an answer, after checking the envelope every error must have."""
    body = r.json()
    err = body["error"]
    assert set(err) >= {"type", "code", "message", "doc_url"}, body
    assert err["doc_url"].endswith(err["code"])
    assert r.headers["Service-Version"] == "2026-10-13" and r.headers["Request-Id"]
    return err["code"]

