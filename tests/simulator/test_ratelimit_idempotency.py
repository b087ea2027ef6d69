"""The rate limiter (wall time, per credential) and Idempotency-Key replay, conflict and in-progress."""

from __future__ import annotations

import math
import threading
import time

import httpx

from simulator.testing import Simulator

from .conftest import code


def test_rate_limit_small_window(sim: Simulator, client: httpx.Client) -> None:
    sim.set_rate_limit(limit=5, window=1.0)
    time.sleep(1.0 - (time.time() % 1.0) + 0.02)  # start at the beginning of a window
    answers = [client.get("/account") for _ in range(6)]
    assert [r.status_code for r in answers] == [200] * 5 + [429]
    assert [int(r.headers["X-RateLimit-Remaining"]) for r in answers[:5]] == [4, 3, 2, 1, 0]
    assert all(r.headers["X-RateLimit-Limit"] == "5" for r in answers[:5])
    reset = int(answers[0].headers["X-RateLimit-Reset"])
    assert reset == math.ceil(time.time()) or reset == math.ceil(time.time()) + 1
    limited = answers[-1]
    assert code(limited) == "rate_limited" and int(limited.headers["Retry-After"]) >= 1
    assert "X-RateLimit-Limit" not in limited.headers
    # another credential has its own budget; the driven clock does not refill it
    assert httpx.get(sim.base_url + "/account", headers=sim.headers("pro_fr")).status_code == 200
    sim.advance(86400)
    assert client.get("/account").status_code == 429
    time.sleep(float(limited.headers["Retry-After"]))
    assert client.get("/account").status_code == 200


def test_idempotent_replay_and_conflict(sim: Simulator, client: httpx.Client) -> None:
    h = {"Idempotency-Key": "create-project-1"}
    first = client.post("/projects", json={"name": "Once"}, headers=h)
    assert first.status_code == 201 and "Idempotent-Replayed" not in first.headers
    again = client.post("/projects", json={"name": "Once"}, headers=h)
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert again.headers["Request-Id"] != first.headers["Request-Id"]
    assert client.get("/account").json()["projects"]["used"] == 4
    r = client.post("/projects", json={"name": "Other"}, headers=h)
    assert (r.status_code, code(r)) == (409, "idempotency_conflict")
    pid = first.json()["id"]
    r = client.post(f"/projects/{pid}/targets", json={"url": "x.example.com"}, headers=h)
    assert code(r) == "idempotency_conflict"
    # keys belong to a credential
    assert httpx.post(sim.base_url + "/projects", json={"name": "Theirs"}, headers={**sim.headers("pro_fr"), **h}) \
        .status_code == 201
    # replayed for 24 hours, then the key is free again
    sim.advance(24 * 3600 + 1)
    r = client.post("/projects", json={"name": "Once"}, headers=h)
    assert code(r) == "project_limit_reached"


def test_errors_are_not_stored(sim: Simulator, client: httpx.Client) -> None:
    h = {"Idempotency-Key": "scan-retry"}
    tid = sim.target_ids(kind="domain", verified=True)[0]
    sim.set_faults(busy_rate=1.0)
    assert code(client.post(f"/targets/{tid}/scans", json={}, headers=h)) == "platform_busy"
    sim.clear_faults()
    r = client.post(f"/targets/{tid}/scans", json={}, headers=h)
    assert r.status_code in (200, 201) and "Idempotent-Replayed" not in r.headers
    assert client.post(f"/targets/{tid}/scans", json={}, headers=h).headers["Idempotent-Replayed"] == "true"


def test_idempotency_key_invalid(sim: Simulator, client: httpx.Client) -> None:
    for key in ("", "x" * 256, "has space"):
        r = client.post("/projects", json={"name": "k"}, headers={"Idempotency-Key": key})
        assert (r.status_code, code(r)) == (400, "idempotency_key_invalid"), key
    assert client.post("/projects", json={"name": "k"}, headers={"Idempotency-Key": "x" * 255}).status_code == 201


def test_idempotency_in_progress(sim: Simulator) -> None:
    sim.set_faults(latency_ms=600)
    h = {**sim.headers(), "Idempotency-Key": "slow-one"}
    results: list[httpx.Response] = []
    first = threading.Thread(target=lambda: results.append(
        httpx.post(sim.base_url + "/projects", json={"name": "Slow"}, headers=h, timeout=10)))
    first.start()
    time.sleep(0.25)
    second = httpx.post(sim.base_url + "/projects", json={"name": "Slow"}, headers=h, timeout=10)
    first.join()
    assert results[0].status_code == 201
    assert (second.status_code, code(second)) == (409, "idempotency_in_progress")
