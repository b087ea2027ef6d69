"""Crashes: `scanwatch sync` SIGKILLed at named points (paging, mid-merge, while writing the snapshot) and at
random moments. After each kill the snapshot is the old or the new complete document, the next sync
completes, and the history equals that of a run that was never interrupted.

Each case starts from the same history (one clean sync of world `SEED`), advances the world by a round
of scans, and kills the second sync; the reference is that second sync run cleanly, itself checked against
what the service shows (tests/service_truth.py). In CI every named point is killed once, each in a sync
once by its crash image (the history's folder copied while one sync waits at the point: what a SIGKILL
there leaves on disk), a few are SIGKILLed for real in syncs forked from a warm process
(tests/reliability/forked.py), and one at a random moment; the soak SIGKILLs every point in a `python -m`
process of its own, and many random moments.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from exporters.source import SnapshotSource
from pipelines.core import milestones
from pipelines.snapshot.format import parse_snapshot
from simulator.testing import SimConfig, serve_simulator
from tests.helpers import served
from tests.reliability.forked import SyncForker
from tests.reliability.harness import ROOT, Dump, checked_sync, diff, dump, service_env, sync_in_process

SEED = 29
SNAPSHOT = "scanwatch-metrics.json"

# (point, passage) in the order a sync of this world passes them: merges run account (1), projects and
# targets (2), the issue groups (3), the issues' hidden rows and read marks (4), scans (5), one commit each;
# staging passes once per non-empty entity (account, projects, targets, issues, scans); step.recorded once
# per step (account, projects, issues, scans, snapshot).
POINTS = [
    ("merge.staged", 1), ("merge.before_commit", 1), ("merge.after_commit", 1), ("step.recorded", 1),
    ("merge.staged", 2), ("merge.staged", 3), ("merge.before_commit", 2), ("merge.after_commit", 2),
    ("issues.paging", 1), ("issues.paging", 3), ("merge.staged", 4), ("merge.before_commit", 3),
    ("merge.after_commit", 3), ("merge.before_commit", 4), ("merge.after_commit", 4), ("step.recorded", 3),
    ("scans.paging", 1), ("scans.paging", 3), ("scans.before_state", 1),
    ("step.recorded", 4), ("snapshot.built", 1), ("snapshot.mid_write", 1), ("snapshot.before_replace", 1),
    ("snapshot.replaced", 1),
]
# Killed for real in CI too (a forked sync each), one per kind of moment: mid-merge, mid-paging, mid-snapshot.
SIGKILLED = [("merge.before_commit", 4), ("scans.paging", 3), ("snapshot.mid_write", 1)]


def _config() -> SimConfig:
    return SimConfig(seed=SEED, scale="small", clock="driven", control=True, rate_limit=100000)


@dataclass
class World:
    """One simulator for the module, moved one round past `first` (the history of a clean first sync), and
    `want`, the history of a clean second sync of the moved world, checked against the service itself."""

    sim: Any
    first: Path
    want: Dump
    second_sync_seconds: float
    forker: SyncForker


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("crash-base")
    first, second = tmp / "first", tmp / "second"
    first.mkdir()
    with serve_simulator(_config()) as sim, SyncForker() as forker:
        truth = checked_sync(sim, first / "history.duckdb")
        shutil.copytree(first, second)
        sim.run_round()
        started = time.monotonic()
        checked_sync(sim, second / "history.duckdb", truth)
        yield World(sim, first, dump(second / "history.duckdb"), time.monotonic() - started, forker)


def _snapshot_bytes(work: Path) -> bytes:
    """Every part of the snapshot folder, each parsed: complete and valid, whichever it is."""
    parts = sorted((work / SNAPSHOT).glob("[!.]*.json"))
    assert parts, "no snapshot part"
    for part in parts:
        parse_snapshot(part.read_bytes())
    return b"\n".join(part.read_bytes() for part in parts)


def _work(world: World, tmp: Path) -> tuple[Path, bytes]:
    work = tmp / "work"
    shutil.copytree(world.first, work)
    return work, _snapshot_bytes(work)


def _check_after_kill(world: World, work: Path, old_snapshot: bytes, figures: Counter, label: str) -> None:
    snap = work / SNAPSHOT
    raw = _snapshot_bytes(work)
    state = SnapshotSource(snap).get()
    assert state.readable and served(state) is not None, f"{label}: the exporter would not serve the snapshot"
    figures["crashes: snapshot old after kill" if raw == old_snapshot else "crashes: snapshot new after kill"] += 1
    outcome = sync_in_process(world.sim, work / "history.duckdb")
    assert outcome.success, f"{label}: the sync after the kill failed: {outcome.error}"
    _snapshot_bytes(work)
    problems = diff(dump(work / "history.duckdb"), world.want)
    if problems:
        figures["crashes: inconsistencies"] += 1
    assert not problems, f"{label}: {problems}"
    leftovers = [p.name for p in [*work.iterdir(), *snap.iterdir()] if p.name.startswith(".")]
    figures["crashes: snapshot temp files left behind"] += len(leftovers)


@dataclass
class Image:
    """What the history's folder held at one point of a sync: exactly what a SIGKILL there leaves on disk."""

    folder: Path
    digest: str


@pytest.fixture(scope="module")
def images(world, tmp_path_factory) -> dict[tuple[str, int], Image]:
    """One second sync that stops at every named point while its folder is copied.

    A SIGKILL ends a process without a flush: what survives is what the files hold at that instant. The
    sync waits at each milestone while an observer copies the history's folder (history, write-ahead log,
    snapshot and its temp file), so one run yields the crash image of every point, each then recovered as
    after a real kill. Points whose images are byte for byte the same need one recovery between them."""
    tmp = tmp_path_factory.mktemp("crash-images")
    work, _ = _work(world, tmp)
    passages: Counter[str] = Counter()
    out: dict[tuple[str, int], Image] = {}

    def copy(name: str) -> None:
        passages[name] += 1
        point = (name, passages[name])
        if point in POINTS:
            folder = shutil.copytree(work, tmp / f"{name}-{point[1]}")
            digest = hashlib.sha256()
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
            out[point] = Image(folder, digest.hexdigest())

    stop = milestones.observe(copy)
    try:
        assert sync_in_process(world.sim, work / "history.duckdb").success
    finally:
        stop()
    assert diff(dump(work / "history.duckdb"), world.want) == {}  # watching changed nothing
    return out


_recovered: dict[str, str] = {}  # image digest -> the point whose recovery proved it


@pytest.mark.parametrize(("point", "nth"), POINTS)
def test_a_crash_at_each_named_point_loses_nothing(world, images, point, nth, tmp_path, figures):
    """The crash image of the point (see `images`) is a complete snapshot, and the next sync ends in the
    uninterrupted history."""
    image = images.get((point, nth))
    assert image, f"{point}:{nth} was never reached; reached: {sorted(images)}"
    figures["crashes: kill points tried"] += 1
    if image.digest in _recovered:
        figures["crashes: kill points with the image of another"] += 1
        return
    work = shutil.copytree(image.folder, tmp_path / "work")
    _check_after_kill(world, work, _snapshot_bytes(world.first), figures, f"{point}:{nth}")
    _recovered[image.digest] = f"{point}:{nth}"


def kill_at_point(world: World, point: str, nth: int, tmp: Path, figures: Counter) -> None:
    """A forked `scanwatch sync` (tests/reliability/forked.py) SIGKILLed at the named point."""
    work, old_snapshot = _work(world, tmp)
    child = world.forker.start(service_env(world.sim, work / "history.duckdb"), tmp / "child",
                               kill_at=f"{point}:{nth}")
    code = child.wait()
    assert code == -signal.SIGKILL, f"{point}:{nth} was never reached (exit {code}) {child.stderr()[-2000:]}"
    figures["crashes: kill points tried"] += 1
    figures["crashes: real SIGKILLs"] += 1
    _check_after_kill(world, work, old_snapshot, figures, f"{point}:{nth}")


@pytest.mark.parametrize(("point", "nth"), SIGKILLED)
def test_sigkill_at_a_named_point_loses_nothing(world, point, nth, tmp_path, figures):
    kill_at_point(world, point, nth, tmp_path, figures)


def _cli_sync(sim, work: Path, kill_at: str | None = None) -> subprocess.Popen:
    env = service_env(sim, work / "history.duckdb")
    command = ["-m", "tests.reliability.kill_at", kill_at] if kill_at else ["-m", "pipelines.cli"]
    return subprocess.Popen([sys.executable, *command, "sync", "--quiet"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.mark.slow
@pytest.mark.parametrize(("point", "nth"), POINTS)
def test_soak_sigkill_at_every_named_point_of_the_real_cli(world, point, nth, tmp_path, figures):
    """The same points, each in a `python -m` process of its own rather than a fork of a warm one."""
    work, old_snapshot = _work(world, tmp_path)
    proc = _cli_sync(world.sim, work, f"{point}:{nth}")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, f"{point}:{nth} was never reached (exit {proc.returncode}) {err}"
    figures["crashes: kill points tried"] += 1
    _check_after_kill(world, work, old_snapshot, figures, f"{point}:{nth}")


def _timed_kill(world: World, tmp: Path, figures: Counter, rng: random.Random, tries: int = 6) -> str:
    """SIGKILL a forked sync at a random moment between its first milestone and its end. A sync that ends
    before the kill is run again with the moment drawn earlier; a case that never kills a running sync fails,
    so "nothing lost" is never claimed of a sync that was not interrupted."""
    work, old_snapshot = _work(world, tmp)
    window = world.second_sync_seconds
    for attempt in range(tries):
        child = world.forker.start(service_env(world.sim, work / "history.duckdb"), tmp / f"child{attempt}")
        began = time.monotonic()
        while not child.milestones():  # the sync has started writing: the window opens
            assert child.running(), f"the sync ended before its first milestone: {child.stderr()[-2000:]}"
            assert time.monotonic() - began < 120, f"no milestone reached: {child.stderr()[-2000:]}"
            time.sleep(0.01)
        delay = rng.uniform(0, window)
        time.sleep(delay)
        passed = child.milestones()
        child.kill()
        if child.wait() == -signal.SIGKILL:
            figures["crashes: timed kills"] += 1
            label = f"timed kill {delay:.2f} s after the first milestone, after {passed[-1]} ({len(passed)} passed)"
            _check_after_kill(world, work, old_snapshot, figures, label)
            return label
        window = min(window, time.monotonic() - began) * 0.5  # it ended first: draw an earlier moment
        shutil.rmtree(work)
        work, old_snapshot = _work(world, tmp)
    raise AssertionError(f"no sync was still running at the drawn moment in {tries} tries: nothing was killed")


def test_sigkill_at_a_random_moment_loses_nothing(world, tmp_path, figures, notes):
    """Mutation that fails it (and passed the former form, which slept 1.5 to 9 s and killed only if the
    sync was still running): `scanwatch sync` returning 0 at once, before any work."""
    notes.append(_timed_kill(world, tmp_path, figures, random.Random(7)))


@pytest.mark.slow
def test_soak_sigkill_at_many_random_moments(world, tmp_path_factory, figures, notes):
    rng = random.Random(int(time.time()))
    for i in range(int(os.environ.get("SCANWATCH_SOAK_KILLS", "25"))):
        notes.append(_timed_kill(world, tmp_path_factory.mktemp(f"timed{i}"), figures, rng))


@pytest.mark.slow
def test_a_killed_sync_never_blocks_the_next_one_even_if_killed_twice(world, tmp_path, figures):
    """Two crashes in a row (mid-merge, then mid-snapshot) still end in the uninterrupted history."""
    work, old_snapshot = _work(world, tmp_path)
    for point in ("merge.before_commit:4", "snapshot.mid_write:1"):
        proc = _cli_sync(world.sim, work, point)
        proc.communicate(timeout=300)
        assert proc.returncode == -signal.SIGKILL
        figures["crashes: kill points tried"] += 1
    _check_after_kill(world, work, old_snapshot, figures, "killed twice")
