"""Child processes: the demo's, started in their own session, watched, and stopped as a group; and the fork
server that the commands' and batches' worker processes are forked from.

Each child gets its own session (process group) so that a Ctrl-C in the terminal reaches the demo alone and
the demo decides the order of shutdown, and so that stopping a child also stops whatever it spawned
(`dagster dev` runs a webserver, a daemon and a code server). Children are started through
`env --default-signal=INT,TERM` because a process started from a background job inherits ignored SIGINT
and SIGTERM, and `dagster dev` then cannot be stopped.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import multiprocessing
import multiprocessing.context
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import multiprocessing.util
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path


class ChildFailed(RuntimeError):
    """A child exited or never became ready; the message says which and where its log is."""


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 12) -> str:
        """The end of the child's log: the reason it died is nearly always in its last lines."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # dagster colours its log lines
        return "\n".join("    " + line for line in text.rstrip().splitlines()[-lines:])


def _default_signal_prefix() -> list[str]:
    env = shutil.which("env")
    if env is None:
        return []
    probe = subprocess.run([env, "--default-signal=INT,TERM", "true"], capture_output=True, check=False)
    return [env, "--default-signal=INT,TERM"] if probe.returncode == 0 else []


class Children:
    """Every process the demo started, in start order, so that shutdown can reverse it."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.items: list[Child] = []
        self._prefix: list[str] | None = None

    def start(self, name: str, argv: list[str], env: dict[str, str], cwd: Path | None = None) -> Child:
        if self._prefix is None:
            self._prefix = _default_signal_prefix()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [*self._prefix, *argv], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=env, cwd=cwd, start_new_session=True,
            )
        child = Child(name=name, proc=proc, log=log)
        self.items.append(child)
        return child

    def first_dead(self) -> Child | None:
        return next((c for c in self.items if not c.alive()), None)

    def stop_all(self, timeout: float = 15.0) -> list[str]:
        """SIGTERM every group, newest first, then SIGKILL what is left; returns the names that needed a kill."""
        for child in reversed(self.items):
            _signal_group(child.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in reversed(self.items):
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        # The leader may be gone while a grandchild still holds a port: kill by group, not by pid.
        killed = [c.name for c in self.items if _group_alive(c.proc.pid)]
        for child in self.items:
            _signal_group(child.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(timeout=2)
        return killed


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """Whether any process is still in the group (zombies of our own children count as gone)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return not Path("/proc").is_dir()


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """A listener holds the port. SO_REUSEADDR so that connections in TIME_WAIT do not count."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno in (errno.EADDRINUSE, errno.EACCES)
    return False


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """The HTTP status of a GET, or None when nothing answers. Any status means the server is up."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError, ValueError):
        return None


def wait_until(ready: Callable[[], bool], child: Child, what: str, timeout: float) -> None:
    """Poll until ready, failing fast when the child dies instead of waiting out the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        if ready():
            return
        if not child.alive():
            raise ChildFailed(f"{child.name} exited with code {child.proc.returncode} before {what}; "
                              f"log: {child.log}\n{child.tail()}")
        if time.monotonic() > deadline:
            raise ChildFailed(f"{child.name}: no {what} after {timeout:.0f} s; log: {child.log}\n{child.tail()}")
        time.sleep(0.25)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Terminate, wait up to `timeout` seconds, then kill: a child must never outlive the run that started it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def fork_server(preload: list[str]) -> Iterator[multiprocessing.context.ForkServerContext]:
    """Multiprocessing's fork server, started clean with `preload` imported once, and gone when the block ends.

    For a process that runs threads, which must never fork itself. Left to notice on its own that its parent
    exited, the fork server finalises Dagster's modules for a second or more after the command has returned:
    a process that outlives `scanwatch sync` for a cron job, a terminal, a unit's cgroup or the demo's
    "no process of the demo is left". Stopping it waits for that finalisation, here.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(preload)
    try:
        yield context
    finally:
        # The standard library's own stop (what its tests use): close the server's lifeline, wait for it.
        stop = getattr(multiprocessing.forkserver._forkserver, "_stop", None)
        if stop is not None:
            stop()
        atexit.unregister(_stop_resource_tracker)
        atexit.register(_stop_resource_tracker)


def _stop_resource_tracker() -> None:
    """The fork server starts multiprocessing's resource tracker, which exits only once it reads that this
    process closed its end: after the command has returned, like the fork server left alone. At exit, run
    multiprocessing's own exit handler first (it joins the queues' feeder threads and unregisters their
    semaphores; it runs once however often it is called), then stop the tracker and wait for it, the standard
    library's own stop. Stopped while a semaphore was still registered, it would unlink it under its owner."""
    exit_handler = getattr(multiprocessing.util, "_exit_function", None)
    stop = getattr(multiprocessing.resource_tracker._resource_tracker, "_stop", None)
    if exit_handler is not None and stop is not None:
        exit_handler()
        stop()
