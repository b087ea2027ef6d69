"""The one switch between CI and the soak: `slow` long forms run only with SCANWATCH_SOAK=1 (`make soak`).

Every suite keeps a short form of what its long forms check in the default run (`make test`), so marking a
test `slow` moves only extra rounds, seeds and scales out of CI, never a behaviour.
"""

from __future__ import annotations

import os
import signal

import pytest

from tests.figures import FIGURES, NOTES

SOAK = os.environ.get("SCANWATCH_SOAK") == "1"

# A suite started as a background job (`make test &`, nohup) inherits SIGINT ignored, and so would every
# command it starts: a Ctrl-C test would then see its signal dropped, and `dagster api grpc` (which maps SIGTERM
# to SIGINT's handler) would ignore SIGTERM too. The commands under test run as a terminal's foreground would
# run them: with Python's own handler here, every child starts with SIGINT's default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# The files whose tests take minutes in all, longest first (`pytest --durations=0`, summed per file). `make test`
# hands whole files to its workers in collection order (--dist loadfile --no-loadscope-reorder): these go first,
# so the run ends on short files instead of one worker left alone with a long one while the others idle.
LONG_FILES = (
    "reliability/test_faults.py", "reliability/test_crashes.py", "hostile/test_service_cases.py",
    "hostile/test_workspace_isolation.py", "demo/test_demo.py", "reliability/test_bad_input.py",
    "e2e/test_new_critical.py", "ingest/test_failed_scans.py", "workspaces/test_several_workspaces.py",
    "reliability/test_concurrency.py", "deploy/test_dagster_instance.py", "ingest/test_readings.py",
    "ingest/test_errors.py", "postgres/test_writers.py", "ingest/test_sync.py", "ingest/test_vanishing.py",
    "deploy/test_image_steps.py",
)


def _start_rank(item: pytest.Item) -> int:
    path = item.path.as_posix()
    return next((n for n, name in enumerate(LONG_FILES) if path.endswith("tests/" + name)), len(LONG_FILES))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_start_rank)  # stable: within a file, and among the short files, the order stays
    if SOAK:
        return
    skip = pytest.mark.skip(reason="soak only: set SCANWATCH_SOAK=1 (make soak)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its figures to the controller, which prints the one report."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["scanwatch_figures"] = dict(FIGURES)
        output["scanwatch_notes"] = NOTES[-30:]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    output = getattr(node, "workeroutput", {})
    FIGURES.update(output.get("scanwatch_figures", {}))
    NOTES.extend(output.get("scanwatch_notes", []))


def pytest_terminal_summary(terminalreporter) -> None:
    if not FIGURES:
        return
    terminalreporter.section("scanwatch reliability figures")
    for key in sorted(FIGURES):
        terminalreporter.write_line(f"{key:<48} {FIGURES[key]}")
    for note in NOTES[-30:]:
        terminalreporter.write_line(f"  {note}")


@pytest.fixture(scope="session")
def pg_server():
    """One real PostgreSQL server for the session (tests/pg_server.py); never skipped: a machine without
    the server binaries fails here with the line that says how to install them."""
    from tests.pg_server import PgServer

    server = PgServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_database(pg_server):
    """A fresh, empty database of the session's server; its `postgresql://` URL (with the password)."""
    name = pg_server.create_database()
    try:
        yield pg_server.url(name)
    finally:
        pg_server.drop_database(name)


@pytest.fixture(params=["duckdb", "postgres"])
def new_history(request, tmp_path_factory):
    """Makes fresh, empty histories on one engine, then the other, as `SCANWATCH_DB` names them: a DuckDB
    file's path, or a PostgreSQL database's URL (tests/backends.py reads either). For the tests that prove
    engine behaviour; the rest keep DuckDB alone."""
    from tests.backends import BACKENDS

    backend, made = BACKENDS[request.param], []

    def make() -> str:
        made.append(backend.fresh(request, tmp_path_factory.mktemp("history") / "history.duckdb"))
        return made[-1]

    yield make
    for db in made:
        backend.drop(request, db)


@pytest.fixture
def engine_db(new_history) -> str:
    """One fresh, empty history on each engine (`new_history`)."""
    return new_history()
