"""Every knob of a simulator instance in one place, shared by the CLI, the test helper and the app."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCALES = ("small", "medium", "large", "200k", "xlarge")

# Where the contract is silent or loose, each reading a real service may take; the value is the simulator's
# default. A client must work under every combination (the product's tests run against each).
READINGS: dict[str, bool] = {
    "failed_scan_moves_last_scan": False,  # a failed scan sets its target's (and project's) last_scan_at
    "failed_scan_reused": False,  # a failed scan within the hour is returned (reused) instead of a new one
    "marks_switch_directly": True,  # false_positive <-> accepted_risk without going back to open first
    "replay_errors": False,  # an idempotent replay returns the first answer whatever its status (429, 503 aside)
}


def parse_readings(items: list[str] | dict[str, Any] | None) -> dict[str, bool]:
    """`["name", "name=false", ...]` or a mapping, checked against READINGS, over the defaults."""
    out = dict(READINGS)
    pairs = items.items() if isinstance(items, dict) else (
        (i.partition("=")[0], i.partition("=")[2] or "true") for i in (items or []))
    for name, value in pairs:
        name = str(name).strip()
        if name not in READINGS:
            raise ValueError(f"unknown reading {name!r}; known: {', '.join(READINGS)}")
        if isinstance(value, str):
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(f"reading {name}: {value!r} is not true or false")
            value = value.lower() in ("true", "1", "yes")
        out[name] = bool(value)
    return out


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
    pro_workspaces: int = 1  # independent Pro workspaces, each with its own key (pro, pro_2, ...) and world
    access_log: bool = False
    faults: dict[str, Any] = field(default_factory=dict)  # initial faults, see simulator.faults.Faults
    readings: dict[str, bool] = field(default_factory=dict)  # see READINGS; unnamed ones keep their default

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {self.scale!r}")
        if self.clock not in ("real", "driven"):
            raise ValueError(f"clock must be 'real' or 'driven', got {self.clock!r}")
        if self.rate_limit < 1 or self.rate_window <= 0:
            raise ValueError("rate_limit must be >= 1 and rate_window > 0")
        if self.pro_workspaces < 1:
            raise ValueError("pro_workspaces must be >= 1")
        if self.scan_seconds < 0:
            raise ValueError("scan_seconds must be >= 0")
        self.readings = parse_readings(self.readings)
