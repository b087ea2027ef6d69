"""Switchable misbehaviour, all off by default.

Every draw comes from one RNG seeded by the world seed (re-seeded whenever faults are set), so a fault
scenario replays identically when requests arrive in the same order. `scope="lists"` confines faults to
GET list routes, which is where pagination code needs hardening most.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, fields
from typing import Any

FUTURE_VALUES = {"family": "supplyChain", "status": "in_review", "severity": "unknown"}


@dataclass
class Faults:
    latency_ms: float = 0.0  # added to every response in scope
    jitter_ms: float = 0.0  # uniform extra 0..jitter
    error_rate: float = 0.0  # 500 internal_error
    unavailable_rate: float = 0.0  # 503 service_unavailable
    busy_rate: float = 0.0  # 503 platform_busy (scan starts only, as the contract says)
    rate_limit_rate: float = 0.0  # 429 rate_limited bursts regardless of the real budget
    rate_limit_burst: int = 3  # consecutive 429s once a burst starts
    malformed_rate: float = 0.0  # 200 with a body that is not JSON
    truncated_rate: float = 0.0  # 200 with JSON cut in the middle (framing intact)
    drop_rate: float = 0.0  # connection closed without any response
    list_mutation_rate: float = 0.0  # after a page with more to come, change the list
    list_mutation: str = "both"  # "insert" (new item), "remove" (drop the cursor item), "both"
    future_enum_rate: float = 0.0  # share of issues showing a value a newer version might send
    repository_host_down: bool = False  # repository analyses answer 409 repository_host_unavailable
    scope: str = "all"  # "all" routes or "lists" (GET list routes only)

    @classmethod
    def keys(cls) -> set[str]:
        return {f.name for f in fields(cls)}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class FaultEngine:
    def __init__(self, seed: int, initial: dict[str, Any] | None = None) -> None:
        self.seed = seed
        self.faults = Faults()
        self._burst_left = 0
        self.rng = random.Random(f"{seed}:faults")
        if initial:
            self.set(**initial)

    def set(self, **kw: Any) -> Faults:
        unknown = set(kw) - Faults.keys()
        if unknown:
            raise ValueError(f"unknown fault(s): {', '.join(sorted(unknown))}")
        if "scope" in kw and kw["scope"] not in ("all", "lists"):
            raise ValueError("scope must be 'all' or 'lists'")
        if "list_mutation" in kw and kw["list_mutation"] not in ("insert", "remove", "both"):
            raise ValueError("list_mutation must be 'insert', 'remove' or 'both'")
        current = self.faults.as_dict()
        current.update(kw)
        self.faults = Faults(**current)
        self.rng = random.Random(f"{self.seed}:faults")
        self._burst_left = 0
        return self.faults

    def clear(self) -> None:
        self.faults = Faults()
        self._burst_left = 0

    def applies(self, is_list: bool) -> bool:
        return self.faults.scope == "all" or is_list

    def draw(self, rate: float) -> bool:
        return rate > 0 and self.rng.random() < rate

    def delay(self) -> float:
        f = self.faults
        if f.latency_ms <= 0 and f.jitter_ms <= 0:
            return 0.0
        return (f.latency_ms + (self.rng.uniform(0, f.jitter_ms) if f.jitter_ms > 0 else 0.0)) / 1000.0

    def rate_limited(self) -> bool:
        if self._burst_left > 0:
            self._burst_left -= 1
            return True
        if self.draw(self.faults.rate_limit_rate):
            self._burst_left = max(0, self.faults.rate_limit_burst - 1)
            return True
        return False

    def future_enum(self, issue: dict[str, Any]) -> dict[str, Any]:
        """Deterministic per issue id: the same issue always shows the same future value while on."""
        rate = self.faults.future_enum_rate
        if rate <= 0:
            return issue
        h = random.Random(f"{self.seed}:enum:{issue['id']}").random()
        if h < rate:
            field = ("family", "status", "severity")[int(h / rate * 3) % 3]
            issue = dict(issue, **{field: FUTURE_VALUES[field]})
        return issue
