"""Pacing math: spend the shared budget down to a tiny reserve, count requests in flight, sleep to the reset."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from pipelines.api import Pacer, ScanningClient
from tests.client.writing import WritingClient

from .fakes import FakeClock, WindowLimiter, client_for, ok

T = 1_800_000_000.0


def headers(limit: int, remaining: int, reset: float) -> dict[str, str]:
    return {"x-ratelimit-limit": str(limit), "x-ratelimit-remaining": str(remaining), "x-ratelimit-reset": str(reset)}


def test_first_request_is_a_single_probe() -> None:
    pacer = Pacer(clock=FakeClock().time)
    assert pacer.wait_needed(0) == (0.0, False)
    pacer.in_flight = 1
    assert pacer.wait_needed(0)[1] is True  # wait for the first answer's headers


def test_remaining_minus_in_flight_above_reserve() -> None:
    clock = FakeClock(T)
    pacer = Pacer(clock=clock.time, sleep=clock.sleep, reserve=1, burst=1.0)
    pacer.acquire()
    pacer.release(headers(120, 4, T + 30))
    pacer.acquire()
    pacer.acquire()  # 4 - 1 in flight = 3 > 1
    assert pacer.in_flight == 2
    assert pacer.wait_needed(clock.time()) == (0.0, False)  # 4 - 2 = 2 > 1
    pacer.in_flight = 3
    assert pacer.wait_needed(clock.time())[1] is True  # 4 - 3 = 1: wait for an answer, not for the reset


def test_spent_budget_sleeps_until_reset_plus_margin() -> None:
    clock = FakeClock(T)
    pacer = Pacer(clock=clock.time, sleep=clock.sleep, reserve=1, margin=0.2)
    pacer.acquire()
    pacer.release(headers(120, 1, T + 12.5))
    pacer.acquire()
    assert clock.sleeps == [pytest.approx(12.7)]
    assert pacer.remaining == 120  # rolled over: the whole limit presumed back


def test_first_half_in_a_burst_then_spread_to_the_reset() -> None:
    clock = FakeClock(T)
    pacer = Pacer(clock=clock.time, sleep=clock.sleep, reserve=1, burst=0.5)
    pacer.acquire()
    pacer.release(headers(100, 80, T + 60))
    assert pacer.wait_needed(clock.time()) == (0.0, False)  # 80 left of 100: still in the burst share
    pacer.release(headers(100, 50, T + 60))
    pacer.acquire()  # past the burst share: spaced by time left / (usable + 1) since the last send
    assert clock.sleeps == [pytest.approx(60 / 50)]
    pacer.release(headers(100, 49, T + 60))
    wait, for_answer = pacer.wait_needed(clock.time())
    assert not for_answer and wait == pytest.approx((T + 60 - clock.time()) / 49)


def test_out_of_order_answers_keep_the_lowest_count_of_a_window() -> None:
    pacer = Pacer(clock=FakeClock(T).time)
    pacer.release(headers(120, 50, T + 30))
    pacer.release(headers(120, 55, T + 30))  # an earlier request answered late
    assert pacer.remaining == 50
    pacer.release(headers(120, 110, T + 90))  # the next window
    assert (pacer.remaining, pacer.reset) == (110, T + 90)
    pacer.release(headers(120, 3, T + 30))  # a straggler from the old window
    assert (pacer.remaining, pacer.reset) == (110, T + 90)


def test_error_answers_without_headers_still_count() -> None:
    pacer = Pacer(clock=FakeClock(T).time)
    pacer.release(headers(120, 50, T + 30))
    pacer.release({"request-id": "r"})
    assert pacer.remaining == 49
    pacer.release(None)  # no answer at all: unknown whether it was counted
    assert pacer.remaining == 49


def test_retry_after_blocks_every_thread() -> None:
    clock = FakeClock(T)
    pacer = Pacer(clock=clock.time, sleep=clock.sleep)
    pacer.release(headers(120, 50, T + 30))
    pacer.block_for(5)
    pacer.acquire()
    assert clock.sleeps == [5]


def test_spent_without_reset_probes_again_after_a_pause() -> None:
    clock = FakeClock(T)
    pacer = Pacer(clock=clock.time, sleep=clock.sleep)
    pacer.release({"x-ratelimit-remaining": "0"})
    pacer.acquire()
    assert clock.sleeps == [1.0]


@pytest.mark.parametrize("other", [0, 10])
def test_sustained_rate_with_zero_429_on_a_fixed_window(other: int) -> None:
    clock = FakeClock(T)
    limiter = WindowLimiter(lambda r: ok({"object": "project", "id": "p"}), clock.time, limit=20, window=10.0,
                            other_per_window=other, latency=0.05, sleep=clock.sleep)
    client = client_for(limiter, clock)
    start = clock.time()
    for _ in range(200):
        client.get_project("p")
    elapsed = clock.time() - start
    assert limiter.refused == 0 and client.stats.rate_limited == 0
    rate = 200 / elapsed
    budget = (20 - other) / 10.0
    assert rate >= 0.9 * budget, (rate, budget)


def test_threads_share_one_budget_over_real_time() -> None:
    """Four threads against a 0.5 s window of 15 requests: overlap, yet no 429."""
    limiter = WindowLimiter(lambda r: ok({"object": "project", "id": "p"}), time.time, limit=15, window=0.5,
                            latency=0.01, sleep=time.sleep)
    client = WritingClient("http://x/v1", "rst_k", transport=httpx.MockTransport(limiter), concurrency=4,
                           share_pacer=False)
    client.pacer.margin = 0.02
    seen_threads: set[str] = set()

    def one(i: int) -> int:
        seen_threads.add(threading.current_thread().name)
        client.get_project(f"p{i}")
        return i

    assert client.map(one, range(40)) == list(range(40))
    assert limiter.refused == 0, client.stats.snapshot()
    assert len(seen_threads) > 1  # the rate it reaches is asserted on a fake clock above


def test_reset_read_on_the_service_clock_when_clocks_disagree() -> None:
    clock = FakeClock(T)
    pacer = Pacer(clock=clock.time, sleep=clock.sleep, margin=0.2)
    server_ahead = {**headers(120, 1, T + 30 + 100), "date": "Fri, 15 Jan 2027 08:01:40 GMT"}  # T + 100 s
    pacer.release(server_ahead)
    pacer.acquire()
    assert clock.sleeps == [pytest.approx(30 + 0.2 - 0.5)]


def test_reset_given_as_seconds_until_is_understood() -> None:
    clock = FakeClock(T)
    pacer = Pacer(clock=clock.time, sleep=clock.sleep, margin=0.2)
    pacer.release(headers(120, 0, 12))
    pacer.acquire()
    assert clock.sleeps == [pytest.approx(12.2)]


def test_another_clients_spending_is_measured_and_left_room() -> None:
    clock = FakeClock(T)
    pacer = Pacer(clock=clock.time, sleep=clock.sleep, reserve=1, burst=0.5)
    first = pacer.acquire()
    pacer.release(headers(100, 40, T + 10), first)  # window's first answer: 40 left, 10 s to go
    clock.now += 2
    second = pacer.acquire()
    pacer.release(headers(100, 19, T + 10), second)  # 21 gone in 2 s, one of them ours: 10 a second elsewhere
    assert pacer.foreign_rate == pytest.approx(10.0)
    wait, for_answer = pacer.wait_needed(clock.time())
    assert not for_answer and wait == pytest.approx(8 + pacer.margin)  # the rest of the window is theirs


def test_alone_no_foreign_rate_is_imagined() -> None:
    clock = FakeClock(T)
    pacer = Pacer(clock=clock.time, sleep=clock.sleep, burst=1.0)
    pacer.release(headers(100, 100, T + 60), pacer.acquire())
    tickets = [pacer.acquire() for _ in range(4)]  # four in flight, answered out of order
    for ticket, remaining in zip(reversed(tickets), (96, 97, 98, 99), strict=True):
        clock.now += 0.2
        pacer.release(headers(100, remaining, T + 60), ticket)
    assert pacer.foreign_rate == 0


def test_alone_an_earlier_request_counted_after_the_first_answer_is_not_another_client() -> None:
    """Threads take tickets in one order and reach the service in another: the window's first answer may be
    for a request sent after one still in flight, which the service then counts behind it. Taken for another
    client's spending (one request in a quarter second, four a second), it gave the rest of every window away:
    a sync alone on its key took 69 s instead of 41."""
    clock = FakeClock(T)
    pacer = Pacer(clock=clock.time, sleep=clock.sleep, burst=0.5)
    pacer.release(headers(20, 19, T + 10), pacer.acquire())
    clock.now += 10.5  # the next window
    early, late = pacer.acquire(), pacer.acquire()
    pacer.release(headers(20, 19, T + 20), late)  # the window's first answer: counted first, answered first
    clock.now += 0.3
    pacer.release(headers(20, 18, T + 20), early)  # sent first, counted second
    after = pacer.acquire()
    clock.now += 0.3
    pacer.release(headers(20, 17, T + 20), after)
    assert pacer.foreign_rate == 0
    assert pacer.wait_needed(clock.time())[0] < 1.0  # the window's budget is still ours to spread


def test_a_service_without_rate_headers_is_not_throttled_to_one_request() -> None:
    pacer = Pacer(clock=FakeClock(T).time)
    pacer.release({"request-id": "r"}, pacer.acquire(), success=True)
    pacer.acquire()
    assert pacer.wait_needed(T) == (0.0, False) and pacer.headerless
    pacer.release(headers(100, 50, T + 60), pacer.acquire(), success=True)
    assert not pacer.headerless


def test_clients_of_one_key_share_one_pacer() -> None:
    a = ScanningClient("http://svc.test/v1", "rst_shared_1", transport=httpx.MockTransport(lambda r: ok({})))
    b = ScanningClient("http://svc.test/v1/", "rst_shared_1", transport=httpx.MockTransport(lambda r: ok({})))
    c = ScanningClient("http://svc.test/v1", "rst_shared_2", transport=httpx.MockTransport(lambda r: ok({})))
    d = ScanningClient("http://svc.test/v1", "rst_shared_1", share_pacer=False)
    assert a.pacer is b.pacer and a.pacer is not c.pacer and d.pacer is not a.pacer
    a.pacer.release(headers(120, 0, time.time() + 30), success=True)
    assert b.pacer.remaining == 0  # what one client learnt, the next one knows
    for client in (a, b, c, d):
        client.close()
