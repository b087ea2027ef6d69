"""Shared pieces of the deployment suite: the simulator the image's steps and the Dagster instance sync
against, and the environment a child process (the CLI, Dagster's daemon) runs with."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.testing import SimConfig, serve_simulator

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture
def sim() -> Iterator:
    with serve_simulator(SimConfig(seed=5, scale="small", control=True, rate_limit=100000)) as s:
        yield s


def child_env(sim, **extra: str) -> dict[str, str]:
    """The environment of a scanwatch process pointed at the simulator, with none of the caller's
    scanwatch or Dagster settings leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    env.update(SCANWATCH_BASE_URL=sim.base_url, SCANWATCH_API_KEY=sim.api_key, PYTHONUNBUFFERED="1")
    env.update(extra)
    return env
