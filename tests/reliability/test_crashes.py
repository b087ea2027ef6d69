"""Crashes: `scanwatch sync` SIGKILLed at named points (paging, mid-merge, while writing the snapshot) and at
random moments. After each kill the snapshot is the old or the new complete document, the next sync
completes, and the history equals that of a run that was never interrupted.

Each case starts from the same history (one clean sync of world `SEED`), advances the world by a round
of scans, and kills the second sync; the reference is that second sync run cleanly.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from exporters.snapshot_format import parse_snapshot
from exporters.source import SnapshotSource
from simulator.testing import SimConfig, serve_simulator
from tests.reliability.harness import ROOT, Dump, diff, dump, service_env, sync_in_process

SEED = 29
SNAPSHOT = "scanwatch-metrics.json"

# (point, passage): merges run account, projects, scans, issues in that order, one commit each; staging
# passes once per non-empty entity (account, projects, targets, scans, issues).
CI_POINTS = [
    ("merge.before_commit", 2),  # projects and targets merged, not committed
    ("scans.paging", 3),  # in the middle of a project's scan pages
    ("merge.before_commit", 4),  # issues and their events merged, not committed
    ("snapshot.mid_write", 1),  # half of the new snapshot written to its temp file
    ("snapshot.before_replace", 1),  # temp file complete, not yet renamed over the old one
]
SOAK_POINTS = [
    ("merge.staged", 1), ("merge.before_commit", 1), ("merge.after_commit", 1), ("merge.staged", 2),
    ("merge.staged", 3), ("merge.after_commit", 2), ("scans.paging", 1), ("merge.staged", 4),
    ("merge.before_commit", 3), ("merge.after_commit", 3), ("scans.before_state", 1), ("issues.paging", 1),
    ("issues.paging", 3), ("merge.staged", 5), ("step.recorded", 1), ("step.recorded", 3), ("step.recorded", 4),
    ("snapshot.built", 1), ("snapshot.replaced", 1), ("merge.after_commit", 4),
]


def _config() -> SimConfig:
    return SimConfig(seed=SEED, scale="small", clock="driven", control=True, rate_limit=100000)


_base: dict[str, object] = {}


def base(tmp: Path) -> tuple[Path, Dump]:
    """The history after one clean sync (copied for each case) and the dump after the clean second sync."""
    if not _base:
        first = tmp / "first"
        first.mkdir()
        with serve_simulator(_config()) as sim:
            assert sync_in_process(sim, first / "history.duckdb").success
            shutil.copytree(first, tmp / "second")
            sim.run_round()
            assert sync_in_process(sim, tmp / "second" / "history.duckdb").success
        _base.update(dir=first, want=dump(tmp / "second" / "history.duckdb"))
    return _base["dir"], _base["want"]  # type: ignore[return-value]


def _sync_process(sim, work: Path, kill_at: str | None = None) -> subprocess.Popen:
    env = service_env(sim, work / "history.duckdb")
    command = ["-m", "tests.reliability.kill_at", kill_at] if kill_at else ["-m", "pipelines.cli"]
    return subprocess.Popen([sys.executable, *command, "sync", "--quiet"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _snapshot_bytes(work: Path) -> bytes:
    """Every part of the snapshot folder, each parsed: complete and valid, whichever it is."""
    parts = sorted((work / SNAPSHOT).glob("[!.]*.json"))
    assert parts, "no snapshot part"
    for part in parts:
        parse_snapshot(part.read_bytes())
    return b"\n".join(part.read_bytes() for part in parts)


def _check_after_kill(sim, work: Path, old_snapshot: bytes, want: Dump, figures: Counter, label: str) -> None:
    snap = work / SNAPSHOT
    raw = _snapshot_bytes(work)
    state = SnapshotSource(snap).get()
    assert state.readable and state.doc is not None, f"{label}: the exporter would not serve the snapshot"
    figures["crashes: snapshot old after kill" if raw == old_snapshot else "crashes: snapshot new after kill"] += 1
    outcome = sync_in_process(sim, work / "history.duckdb")
    assert outcome.success, f"{label}: the sync after the kill failed: {outcome.error}"
    _snapshot_bytes(work)
    problems = diff(dump(work / "history.duckdb"), want)
    if problems:
        figures["crashes: inconsistencies"] += 1
    assert not problems, f"{label}: {problems}"
    leftovers = [p.name for p in [*work.iterdir(), *snap.iterdir()] if p.name.startswith(".")]
    figures["crashes: snapshot temp files left behind"] += len(leftovers)


def kill_at_point(point: str, nth: int, tmp: Path, figures: Counter) -> None:
    first, want = base(tmp.parent)
    work = tmp / "work"
    shutil.copytree(first, work)
    old_snapshot = _snapshot_bytes(work)
    with serve_simulator(_config()) as sim:
        sim.run_round()
        proc = _sync_process(sim, work, f"{point}:{nth}")
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == -signal.SIGKILL, f"{point}:{nth} was never reached (exit {proc.returncode}) {err}"
        figures["crashes: kill points tried"] += 1
        _check_after_kill(sim, work, old_snapshot, want, figures, f"{point}:{nth}")


@pytest.mark.parametrize(("point", "nth"), CI_POINTS)
def test_sigkill_at_a_named_point_loses_nothing(point, nth, tmp_path_factory, figures):
    kill_at_point(point, nth, tmp_path_factory.mktemp("kill"), figures)


@pytest.mark.slow
@pytest.mark.parametrize(("point", "nth"), SOAK_POINTS)
def test_soak_sigkill_at_every_named_point(point, nth, tmp_path_factory, figures):
    kill_at_point(point, nth, tmp_path_factory.mktemp("kill"), figures)


def _timed_kills(count: int, tmp: Path, figures: Counter, rng: random.Random) -> None:
    first, want = base(tmp.parent)
    for i in range(count):
        work = tmp / f"work{i}"
        shutil.copytree(first, work)
        old_snapshot = _snapshot_bytes(work)
        with serve_simulator(_config()) as sim:
            sim.run_round()
            proc = _sync_process(sim, work)
            delay = rng.uniform(1.5, 9.0)
            time.sleep(delay)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                figures["crashes: timed kills"] += 1
            proc.communicate(timeout=60)
            _check_after_kill(sim, work, old_snapshot, want, figures, f"timed kill after {delay:.2f} s")


def test_sigkill_at_random_moments_loses_nothing(tmp_path_factory, figures):
    _timed_kills(1, tmp_path_factory.mktemp("timed"), figures, random.Random(7))


@pytest.mark.slow
def test_soak_sigkill_at_many_random_moments(tmp_path_factory, figures):
    _timed_kills(int(os.environ.get("SCANWATCH_SOAK_KILLS", "25")), tmp_path_factory.mktemp("timed"), figures,
                 random.Random(int(time.time())))


@pytest.mark.slow
def test_a_killed_sync_never_blocks_the_next_one_even_if_killed_twice(tmp_path_factory, figures):
    """Two crashes in a row (mid-merge, then mid-snapshot) still end in the uninterrupted history."""
    first, want = base(tmp_path_factory.getbasetemp())
    work = tmp_path_factory.mktemp("twice") / "work"
    shutil.copytree(first, work)
    old_snapshot = (work / SNAPSHOT).read_bytes()
    with serve_simulator(_config()) as sim:
        sim.run_round()
        for point in ("merge.before_commit:4", "snapshot.mid_write:1"):
            proc = _sync_process(sim, work, point)
            proc.communicate(timeout=300)
            assert proc.returncode == -signal.SIGKILL
            figures["crashes: kill points tried"] += 1
        _check_after_kill(sim, work, old_snapshot, want, figures, "killed twice")

