"""`scanwatch` started by fork from a process that has already imported it, so that a crash suite can kill
dozens of real syncs without paying the interpreter's and Dagster's start-up for each.

    with SyncForker() as forker:
        child = forker.start(env, kill_at="merge.staged:2")   # a fresh `scanwatch sync --quiet`
        assert child.wait() == -signal.SIGKILL
        child.milestones()                                     # the milestones it passed before dying

The server process imports scanwatch with no other thread running, then for each request forks a child that
becomes `scanwatch ARGS` under the given environment, in its own session, with stdout and stderr in files.
The child is a real process: SIGKILL ends it with no `finally`, no rollback and no flush, as with the OOM
killer or a power cut; `kill_at` (tests/reliability/kill_at.py) kills it at a named milestone. Every
milestone it passes is appended to a file first, so a test can tell how far a killed sync got.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ForkedSync:
    """One forked `scanwatch`; its exit is read from the server."""

    pid: int
    work: Path
    _forker: SyncForker
    _status: int | None = None

    def wait(self, timeout: float = 300) -> int:
        """Its exit code, or minus the signal that ended it (as subprocess.Popen.returncode)."""
        if self._status is None:
            self._status = self._forker._reap(self.pid, timeout)
        return self._status

    def running(self) -> bool:
        """Whether it has not ended yet (without waiting)."""
        if self._status is None:
            self._status = self._forker._poll(self.pid)
        return self._status is None

    def kill(self) -> None:
        """SIGKILL the child's whole session now (a no-op once it has ended)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)

    def milestones(self) -> list[str]:
        path = self.work / "milestones"
        return path.read_text().split() if path.exists() else []

    def stderr(self) -> str:
        path = self.work / "stderr"
        return path.read_text(errors="replace") if path.exists() else ""


class SyncForker:
    """The forking server (a child of the test process) and its requests, from one thread at a time.

    `libraries_only`: the server imports the libraries scanwatch uses (Dagster, DuckDB, httpx, psycopg,
    prometheus-client) and none of scanwatch itself, so that each child imports scanwatch under its own
    environment, as a process started from scratch does (the followed workspaces, for one, are read when
    `pipelines.defs.partitions` is imported)."""

    def __init__(self, *, libraries_only: bool = False) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.reliability.forked",
                                      *(["--libraries-only"] if libraries_only else [])], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
        ready = self.proc.stdout.readline()
        assert ready.strip() == "ready", ready
        self._exits: dict[int, int] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> SyncForker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)

    def start(self, env: dict[str, str], work: Path, *, kill_at: str | None = None,
              args: tuple[str, ...] = ("sync", "--quiet"), cwd: Path | None = None) -> ForkedSync:
        """Fork `scanwatch ARGS` with exactly `env`; `work` receives its stdout, stderr and milestones."""
        work.mkdir(parents=True, exist_ok=True)
        (work / "milestones").unlink(missing_ok=True)
        with self._lock:
            self._send({"env": env, "work": str(work), "kill_at": kill_at, "args": list(args),
                        "cwd": str(cwd or ROOT)})
            pid = int(self._read()["pid"])
        return ForkedSync(pid, work, self)

    def _send(self, message: dict[str, Any]) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def _read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()
        assert line, "the forking server ended"
        return json.loads(line)

    def _poll(self, pid: int) -> int | None:
        with self._lock:
            if pid in self._exits:
                return self._exits.pop(pid)
            self._send({"poll": pid})
            answer = self._read()
        return None if answer["status"] is None else int(answer["status"])

    def _reap(self, pid: int, timeout: float) -> int:
        """Polled, so that the server never blocks on one child while another thread starts or polls one."""
        deadline = time.monotonic() + timeout
        while (status := self._poll(pid)) is None:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(["scanwatch", f"pid {pid}"], timeout)
            time.sleep(0.05)
        return status


_shared: SyncForker | None = None
_shared_lock = threading.Lock()


def run(args: list[str], env: dict[str, str], *, timeout: float = 300,
        cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`scanwatch ARGS` as `subprocess.run(..., capture_output=True, text=True)` gives it, in a process forked
    from this test process's server (started once, libraries only): a real process, with its own environment,
    descriptors and exit, that imports scanwatch itself but not Dagster and the other libraries again (about
    2 CPU-seconds per command on a 2-core host that runs hundreds of them). The command is killed at the
    timeout, as subprocess.run does."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.proc.poll() is not None:
            _shared = SyncForker(libraries_only=True)
            atexit.register(_shared.close)
        forker = _shared
    work = Path(tempfile.mkdtemp(prefix="scanwatch-cli-"))
    try:
        child = forker.start(env, work, args=tuple(args), cwd=cwd)
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(60)
            raise subprocess.TimeoutExpired(["scanwatch", *args], timeout) from None
        out = (work / "stdout").read_text(errors="replace")
        return subprocess.CompletedProcess(["scanwatch", *args], code, out, child.stderr())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become `scanwatch ARGS` and never return."""
    code = 70
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        work = Path(request["work"])
        for fd, name in ((1, "stdout"), (2, "stderr")):
            target = os.open(work / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request.get("cwd") or ROOT)
        sys.argv = ["scanwatch", *request["args"]]
        from pipelines.cli import main
        from pipelines.core import milestones
        from tests.reliability.kill_at import kill_at

        log = os.open(work / "milestones", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        milestones.observe(lambda name: os.write(log, f"{name}\n".encode()))
        if request.get("kill_at"):
            kill_at(request["kill_at"])
        code = main(request["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # a child must never return into the server's loop
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _status(raw: int) -> int:
    return -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)


# What the server imports before any fork: everything a sync imports, or (`--libraries-only`) the libraries alone.
SCANWATCH = ("pipelines.cli", "pipelines.definitions", "pipelines.commands.materialize")
LIBRARIES = ("dagster", "duckdb", "httpx", "psycopg", "prometheus_client", "sqlalchemy")


def serve(modules: tuple[str, ...] = SCANWATCH) -> None:
    """Read requests on stdin (one JSON object a line), answer on stdout; end at EOF."""
    for module in modules:
        importlib.import_module(module)

    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "poll" in request:
            pid, raw = os.waitpid(int(request["poll"]), os.WNOHANG)
            print(json.dumps({"pid": pid, "status": _status(raw) if pid else None}), flush=True)
            continue
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(json.dumps({"pid": pid}), flush=True)


if __name__ == "__main__":
    serve(LIBRARIES if "--libraries-only" in sys.argv[1:] else SCANWATCH)
