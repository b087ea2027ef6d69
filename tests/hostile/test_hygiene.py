"""Bad environments end in one line before any lock is taken or any request sent; the base URL's
password is never shown; Ctrl-C is one line, exit 130, and leaves every table whole (on PostgreSQL too, in
the soak; the refusals before anything is opened and the history folder's checks concern one engine only)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.core import credentials
from simulator.testing import SimConfig, serve_simulator
from tests.backends import ENGINES
from tests.reliability.harness import ROOT, assert_intact, assert_one_line, cli, dump, service_env, sync_in_process

SECRET = "s3cr3t-pa55"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A simulator slow enough (a tight rate limit) that a full sync is still paging seconds after it starts."""
    with serve_simulator(SimConfig(seed=61, scale="small", clock="driven", control=True, rate_limit=8,
                                   rate_window=1.0)) as sim:
        db = tmp_path_factory.mktemp("hyg") / "history.duckdb"
        assert sync_in_process(sim, db).success
        sim.db = db  # type: ignore[attr-defined]
        yield sim


@pytest.mark.parametrize("url", [
    f"http://user:{SECRET}@127.0.0.1:8400/v1",
    f"https://{SECRET}@api.example.com/v1",
    f"https://user:{SECRET}@api.example.com/",  # wrong shape too: the shape message must mask it as well
])
def test_userinfo_in_the_base_url_is_refused_without_showing_it(world, url):
    env = service_env(world, world.db, SCANWATCH_BASE_URL=url)
    before = dump(world.db)
    done = cli(["sync"], env)
    assert done.returncode == 2
    line = assert_one_line(done.stderr, must_contain="SCANWATCH_BASE_URL")
    assert SECRET not in done.stderr + done.stdout
    assert "***@" in line
    assert_intact(world.db, before)


def test_mask_url_keeps_the_host_and_drops_the_userinfo():
    assert credentials.mask_url(f"https://u:{SECRET}@h.example/v1") == "https://***@h.example/v1"
    assert credentials.mask_url("https://h.example/v1") == "https://h.example/v1"


@pytest.mark.parametrize(("value", "expected"), [
    ("/nonexistent/scanwatch-dagster-home", "DAGSTER_HOME=/nonexistent/scanwatch-dagster-home is not an existing"),
    ("relative/home", "DAGSTER_HOME must be an absolute path"),
])
def test_a_bad_dagster_home_is_one_line(world, value, expected):
    env = service_env(world, world.db, DAGSTER_HOME=value)
    done = cli(["sync"], env)
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain=expected)


def _read_only_mount() -> Path | None:
    """A folder on a file system mounted read-only (/proc/sys in most containers), which no one can write."""
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines() if len(line.split()) > 3]
    candidates = ["/proc/sys", *(m[1] for m in mounts if "ro" in m[3].split(","))]
    return next((Path(c) for c in candidates if os.path.isdir(c) and not os.access(c, os.W_OK)), None)


@pytest.fixture
def unwritable_folder(tmp_path):
    """A folder this user cannot write: one without write permission; for root, who writes through any
    permission, a read-only mount. Never a skip: a root without any read-only mount fails here."""
    if os.geteuid() == 0:
        folder = _read_only_mount()
        assert folder, "running as root with no read-only mount: run the suite as another user"
        yield folder
        return
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        yield folder
    finally:
        folder.chmod(0o700)


def test_an_unwritable_history_folder_is_one_line(world, unwritable_folder):
    done = cli(["sync"], service_env(world, unwritable_folder / "scanwatch-sub" / "history.duckdb"))
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain=f"({unwritable_folder}) is not writable")


def test_a_history_folder_that_cannot_be_made_is_one_line(world, tmp_path):
    (tmp_path / "a-file").write_text("")
    done = cli(["sync"], service_env(world, tmp_path / "a-file" / "sub" / "history.duckdb"))
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain="is not writable")


def test_a_history_path_that_is_a_folder_is_one_line(world, tmp_path):
    done = cli(["sync"], service_env(world, tmp_path))
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain="is not a writable file")


@pytest.fixture
def world_history_duckdb(world):
    """The world's own DuckDB file, synced already."""
    return world.db


@pytest.fixture
def world_history_postgres(world, pg_server):
    """A PostgreSQL database synced once here (in the soak: two commands behind a tight rate limit; CI kills
    syncs mid-merge on PostgreSQL in tests/reliability/test_crashes_postgres.py)."""
    name = pg_server.create_database()
    assert sync_in_process(world, pg_server.url(name)).success
    yield pg_server.url(name)
    pg_server.drop_database(name)


@pytest.fixture(params=[ENGINES[0], pytest.param(ENGINES[1], marks=pytest.mark.slow)])
def world_history(request):
    """The world's history on each engine (`world_history_<engine>`)."""
    return request.getfixturevalue(f"world_history_{request.param}")


def test_ctrl_c_mid_sync_is_one_line_exit_130_and_every_table_whole(world, world_history):
    before = dump(world_history)
    env = service_env(world, world_history)
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "sync", "--full-reconcile"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    deadline = time.monotonic() + 240
    assert proc.stderr is not None
    # Interrupt while the issue lists are being paged (the tight rate limit keeps it there for seconds).
    for line in proc.stderr:
        lines.append(line)
        if line.strip().startswith("issues:") or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    _, rest_err = proc.communicate(timeout=120)
    stderr = "".join(lines) + rest_err
    assert proc.returncode == 130, stderr[-2000:]
    assert_one_line(stderr, must_contain="interrupted")
    assert_intact(world_history, before)
    # The history opens and the next sync works.
    assert cli(["sync", "--quiet"], env).returncode == 0


def test_interrupt_reasons_are_recognised_in_dagster_error_chains():
    from pipelines.commands.sync import interrupted

    class Err:
        def __init__(self, cls_name, cause=None):
            self.cls_name, self.cause, self.message = cls_name, cause, cls_name

    assert interrupted(Err("DagsterExecutionStepExecutionError", Err("DagsterExecutionInterruptedError")))
    assert not interrupted(Err("DagsterExecutionStepExecutionError", Err("ApiTimeoutError")))
