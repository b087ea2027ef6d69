"""Every knob of a simulator instance in one place, shared by the CLI, the test helper and the app."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCALES = ("small", "medium", "large")


@dataclass
class SimConfig:
    """Settings of one simulator; the defaults are those of the contract (120 requests a minute...)."""

    seed: int = 1
    scale: str = "small"
    clock: str = "driven"  # "real" for the demo, "driven" for tests and benchmarks
    control: bool = False  # expose /_sim/ (clock, rounds, faults); never on unless asked
    host: str = "127.0.0.1"
    port: int = 0  # 0 = a free port chosen by the OS
    rate_limit: int = 120  # requests per window per credential
    rate_window: float = 60.0  # seconds of wall time; benchmarks shorten it to compress time
    scan_seconds: float = 30.0  # simulator-clock time from queued to done/failed
    scan_failure_rate: float = 0.05  # share of scans that end `failed`
    running_status: str = "queued"  # status shown while a scan runs; the contract does not name one
    repository_analyses_per_day: int = 20  # the contract does not give the ceiling's value
    recheck_limit: int = 60  # per project and per UTC day of the simulator clock
    idempotency_ttl: float = 24 * 3600.0
    autopilot: float = 0.0  # real clock only: start a round of scans every N seconds (0 = off)
    access_log: bool = False
    faults: dict[str, Any] = field(default_factory=dict)  # initial faults, see simulator.faults.Faults

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {self.scale!r}")
        if self.clock not in ("real", "driven"):
            raise ValueError(f"clock must be 'real' or 'driven', got {self.clock!r}")
        if self.rate_limit < 1 or self.rate_window <= 0:
            raise ValueError("rate_limit must be >= 1 and rate_window > 0")
        if self.scan_seconds < 0:
            raise ValueError("scan_seconds must be >= 0")
