"""Figure 4: how much of the rate limit a long sync actually uses, and what it costs another client.

Time is compressed: the simulator's window is shortened (e.g. 120 requests per 12 s instead of per 60 s)
and the simulated latency is shortened by the same factor, so every ratio that matters (latency against
the gap between two requests, local work against a window) stays what it would be at the real limit.
Requests are counted by the service per rate window (sampled at each window boundary) and reported as
"requests a minute at the real limit": per-window count / limit x 120.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.figures import Figure, judge
from benchmarks.sim import SimProcess
from benchmarks.syncing import SyncRun, sync_in_process

REAL_LIMIT, REAL_WINDOW = 120, 60.0


@dataclass(frozen=True)
class PacingSetup:
    scale: str
    rate_limit: int
    rate_window: float
    latencies_ms: tuple[int, ...] = (0, 300, 1000)  # at the real limit; scaled by `time_factor`
    shared_latency_ms: int = 300

    @property
    def time_factor(self) -> float:
        """Seconds here per second at the real limit: the gap between two requests, here over there."""
        return (self.rate_window / self.rate_limit) / (REAL_WINDOW / REAL_LIMIT)


class WindowCounter(threading.Thread):
    """Reads the service's request count at every rate-window boundary until stopped."""

    def __init__(self, sim: SimProcess) -> None:
        super().__init__(daemon=True, name="bench-window-counter")
        self.sim = sim
        self.samples: list[tuple[int, int]] = []  # (window index starting here, total count at its start)
        self._halt = threading.Event()

    def run(self) -> None:
        w = self.sim.rate_window
        while not self._halt.is_set():
            index = int(time.time() // w) + 1
            if self._halt.wait(max(0.0, index * w - time.time())):
                break
            self.samples.append((index, self.sim.request_count()))
        # The window running when the sync ended, partial: it only closes the last full one.
        self.samples.append((int(time.time() // w) + 1, self.sim.request_count()))

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=self.sim.rate_window + 5)

    def per_window(self) -> dict[int, int]:
        return {a[0]: b[1] - a[1] for a, b in zip(self.samples, self.samples[1:], strict=False)}


class Hammer(threading.Thread):
    """Another client on the same key (the agent server's share): GET /account evenly at `per_window`."""

    def __init__(self, sim: SimProcess, per_window: int) -> None:
        super().__init__(daemon=True, name="bench-hammer")
        self.sim, self.interval = sim, sim.rate_window / per_window
        self.sent: dict[int, int] = {}  # window index -> requests sent in it
        self.rate_limited = 0
        self.errors = 0
        self._halt = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.sim.base_url + "/", timeout=30,
                          headers={"Authorization": f"Bearer {self.sim.api_key}"}) as http:
            next_at = time.time()
            while not self._halt.is_set():
                now = time.time()
                if now < next_at:
                    self._halt.wait(next_at - now)
                    continue
                index = int(now // self.sim.rate_window)
                self.sent[index] = self.sent.get(index, 0) + 1
                try:
                    status = http.get("account").status_code
                except httpx.HTTPError:
                    status = None
                self.rate_limited += status == 429
                self.errors += status is None or (status >= 400 and status != 429)
                next_at += self.interval

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=30)


@dataclass
class PacingRun:
    sync: SyncRun
    windows: dict[int, int]
    steady: list[int]  # requests of the windows wholly inside the sync (the first and last are partial)
    ours: list[int] = field(default_factory=list)  # scanwatch's share of those windows (shared runs)
    hammer: dict[str, Any] = field(default_factory=dict)


def _steady(windows: dict[int, int]) -> list[int]:
    active = sorted(i for i, n in windows.items() if n > 0)
    if len(active) < 3:
        return []
    return [windows[i] for i in range(active[0] + 1, active[-1])]


def run_one(setup: PacingSetup, seed: int, workdir: Path, latency_ms: int, share: float = 0.0) -> PacingRun:
    """One first sync of a fresh history at the given latency (real-limit terms), optionally with another
    client spending `share` of the budget on the same key."""
    db = str(Path(tempfile.mkdtemp(prefix="pacing-", dir=workdir)) / "history.duckdb")
    scaled = latency_ms * setup.time_factor
    with SimProcess(scale=setup.scale, seed=seed, rate_limit=setup.rate_limit, rate_window=setup.rate_window) as sim:
        if scaled > 0:
            sim.set_faults(latency_ms=scaled * 0.9, jitter_ms=scaled * 0.2)
        counter = WindowCounter(sim)
        hammer = Hammer(sim, max(1, round(setup.rate_limit * share))) if share > 0 else None
        sim.wait_for_window(0.0)
        counter.start()
        if hammer:
            hammer.start()
        try:
            sync = sync_in_process(sim, db)
        finally:
            if hammer:
                hammer.stop()
            time.sleep(0.05)
            counter.stop()
    windows = counter.per_window()
    run = PacingRun(sync=sync, windows=windows, steady=_steady(windows))
    if hammer:
        inner = sorted(windows)[1:-1]
        active = sorted(i for i, n in windows.items() if n - hammer.sent.get(i, 0) > 0)
        inner = [i for i in inner if active and active[0] < i < active[-1]]
        run.steady = [windows[i] for i in inner]
        run.ours = [windows[i] - hammer.sent.get(i, 0) for i in inner]
        run.hammer = {"per_window": max(1, round(setup.rate_limit * share)), "sent": sum(hammer.sent.values()),
                      "rate_limited": hammer.rate_limited, "errors": hammer.errors}
    return run


def _per_minute(count: float, setup: PacingSetup) -> float:
    return round(count / setup.rate_limit * REAL_LIMIT, 1)


def measure(setup: PacingSetup, seed: int, workdir: Path) -> list[Figure]:
    figures = []
    base = {"rate_limit": setup.rate_limit, "rate_window_s": setup.rate_window, "scale": setup.scale,
            "time_factor": round(setup.time_factor, 4),
            "normalised": "requests per window / limit x 120 = requests a minute at the real 120-per-60 s limit"}
    for latency in setup.latencies_ms:
        run = run_one(setup, seed, workdir, latency)
        mean = statistics.mean(run.steady) if run.steady else None
        value = _per_minute(mean, setup) if mean is not None else None
        ok = run.sync.success and run.sync.rate_limited == 0 and value is not None and value >= 108
        figures.append(Figure(
            f"pacing_{latency}ms", f"requests a minute sustained during a long sync, {latency} ms latency",
            value, "req/min", ">= 108 and zero 429s", judge(ok),
            {**base, "latency_ms_simulated": round(latency * setup.time_factor, 1),
             "min_per_minute": _per_minute(min(run.steady), setup) if run.steady else None,
             "steady_windows": run.steady, "all_windows": list(run.windows.values()),
             "rate_limited_429s": run.sync.rate_limited, "requests": run.sync.requests,
             "sync_success": run.sync.success, "sync_seconds": round(run.sync.seconds, 1), "error": run.sync.error}))
    run = run_one(setup, seed, workdir, setup.shared_latency_ms, share=0.5)
    windows_spanned = max(1, len([n for n in run.windows.values() if n > 0]))
    ours = statistics.mean(run.ours) if run.ours else None
    total = statistics.mean(run.steady) if run.steady else None
    ok = run.sync.success and run.sync.rate_limited <= windows_spanned
    figures.append(Figure(
        "pacing_shared_half", "long sync while another client spends half the budget (same key)",
        run.sync.rate_limited, "429s", f"no failed sync; 429s only when headers could not foresee them "
        f"(<= 1 per window, {windows_spanned} windows)", judge(ok),
        {**base, "latency_ms": setup.shared_latency_ms,
         "latency_ms_simulated": round(setup.shared_latency_ms * setup.time_factor, 1),
         "sync_success": run.sync.success, "error": run.sync.error, "requests": run.sync.requests,
         "ours_per_minute": _per_minute(ours, setup) if ours is not None else None,
         "total_per_minute": _per_minute(total, setup) if total is not None else None,
         "ours_windows": run.ours, "total_windows": run.steady, "other_client": run.hammer,
         "sync_seconds": round(run.sync.seconds, 1)}))
    return figures
