"""`scanwatch sync`: one run of every ingestion asset and the metrics snapshot, through Dagster.

The same asset code the schedules run, executed in-process (a one-shot CLI does not want a process per
step). Failures end in one line naming what to fix, never a traceback to read.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import socket
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pipelines.core.text import printable

if TYPE_CHECKING:
    from pipelines.core.history_location import HistoryLocation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--full-reconcile", action="store_true",
                        help="read every project's issue and scan lists, not only the projects that moved")
    parser.add_argument("--quiet", action="store_true", help="print only the summary line")
    parser.add_argument("--workspace", metavar="NAME", default=None,
                        help="sync only this workspace of SCANWATCH_WORKSPACES_FILE (default: every one, at once)")


def _root_cause(error) -> str:
    """The innermost message of a Dagster error chain: the user's exception, not Dagster's wrapper.

    scanwatch's own errors are written for people, so the Python class path Dagster puts in front of them
    ("pipelines.api.errors.PermissionDeniedError: ") is dropped; other exceptions keep their class name.
    """
    while getattr(error, "cause", None) is not None:
        error = error.cause
    message = (getattr(error, "message", None) or str(error)).strip().splitlines()
    line = message[0] if message else "unknown error"
    return re.sub(r"^pipelines(\.\w+)+: ", "", line)


INTERRUPTED = ("KeyboardInterrupt", "DagsterExecutionInterruptedError")
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
# Once the history's connections are cut at the deadline, the steps fail in moments; past this, something
# else holds the process and it ends with the deadline's line.
LAST_RESORT_SECONDS = 30.0
INTERRUPTED_LINE = ("scanwatch sync: interrupted; each table keeps its last complete version and the next sync "
                    "catches up")


def _interrupted(error) -> bool:
    """Dagster turns Ctrl-C inside a step into its own error; either form means the user stopped the sync."""
    while error is not None:
        if getattr(error, "cls_name", None) in INTERRUPTED or any(n in str(getattr(error, "message", ""))
                                                                   for n in INTERRUPTED):
            return True
        error = getattr(error, "cause", None)
    return False


@contextlib.contextmanager
def _sigint_watch() -> Iterator[list[bool]]:
    """Whether Ctrl-C was pressed during the block, whoever handled it.

    Dagster swaps the SIGINT handler while a run executes and may drop an interrupt that lands between its
    steps; the C-level wakeup fd sees every signal whatever Python handler runs.
    """
    seen = [False]
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:  # not the main thread: nothing to watch
        previous = None
    try:
        yield seen
    finally:
        if previous is not None:
            signal.set_wakeup_fd(previous)
        with contextlib.suppress(BlockingIOError):
            seen[0] = signal.SIGINT in reader.recv(4096)
        reader.close()
        writer.close()


def _refuse_newer_file(history: HistoryLocation) -> None:
    """A DuckDB history a newer scanwatch wrote is one line before any step; read without waiting (a file
    another sync writes is left to the steps, which wait their turn and check it then)."""
    from pipelines.storage import HistoryLockedError, reader, schema_version
    from pipelines.storage.db import refuse_newer

    with contextlib.suppress(HistoryLockedError), reader(history) as conn:
        refuse_newer(conn, schema_version(conn))


def run(args: argparse.Namespace) -> int:
    from pipelines.core.settings import ConfigError, Settings

    try:
        settings = Settings.load()
        _ = settings.workspaces  # every workspace checked before any request is sent
        if args.workspace is not None:
            settings.workspace(args.workspace)
        settings.dagster_home()
        settings.writable_db()
        _ = settings.sync_deadline_seconds
        _ = settings.sla_days
        _ = settings.scan_targets
        ownership = settings.ownership  # a bad map is one line per problem, before anything runs
    except ConfigError as exc:
        for line in str(exc).splitlines() or [str(exc)]:
            print(f"scanwatch sync: {printable(line)}", file=sys.stderr)
        return 2
    for warning in ownership.unaimed((ws.name, ws.label) for ws in settings.workspaces):
        print(f"scanwatch sync: warning: {printable(warning)}", file=sys.stderr)
    with _history_deadline(settings) as cut:
        return _run(args, settings, cut)


@contextlib.contextmanager
def _history_deadline(settings) -> Iterator:
    """The sync's deadline kept on its PostgreSQL connections too (pipelines/storage/engines/deadline.py), and,
    should even that not end it, the process ended with the same line shortly after."""
    if not settings.history.is_postgres:
        yield None
        return
    import os
    import threading

    from pipelines.storage.engines import deadline

    limit = settings.sync_deadline_seconds
    reason = deadline.sync_reason(limit, settings.history.masked)

    def last_resort() -> None:
        print(f"scanwatch sync: {printable(reason)}", file=sys.stderr, flush=True)
        os._exit(1)

    backstop = threading.Timer(limit + deadline.GRACE_SECONDS + LAST_RESORT_SECONDS, last_resort)
    backstop.daemon = True
    with deadline.armed(limit + deadline.GRACE_SECONDS, reason) as cut:
        backstop.start()
        try:
            yield cut
        finally:
            backstop.cancel()


def _run(args: argparse.Namespace, settings, cut) -> int:
    from pipelines.storage import HistoryUnavailableError

    try:
        if settings.history.is_postgres:
            # The server is asked once before Dagster starts (and the schema carried forward), so a wrong
            # password or an unreachable host is one line, not one per asset and workspace.
            from pipelines.storage import connect

            connect(settings.history).close()
        elif settings.history.path.is_file():
            _refuse_newer_file(settings.history)
    except HistoryUnavailableError as exc:
        if cut is not None and cut.expired:
            print(f"scanwatch sync: {printable(cut.reason)}", file=sys.stderr)
            return 1
        print(f"scanwatch sync: {printable(exc)}", file=sys.stderr)
        return 2

    from pipelines.commands.materialize import materialize_all, show_progress

    if not args.quiet:
        show_progress()
    started = time.monotonic()
    try:
        with _sigint_watch() as sigint:

            outcome = materialize_all(workspace=args.workspace, full_reconcile=args.full_reconcile,
                                      console_level="CRITICAL")
    except KeyboardInterrupt:
        print(INTERRUPTED_LINE, file=sys.stderr)
        return EXIT_INTERRUPTED
    elapsed = time.monotonic() - started
    if cut is not None and cut.expired:  # every step's failure has this one cause: said once
        print(f"scanwatch sync: {printable(cut.reason)}", file=sys.stderr)
        return 1
    if not args.quiet:
        for warning in outcome.warnings:
            print(f"  warning: {printable(warning)}", file=sys.stderr)
    if sigint[0] or (not outcome.success and _interrupted(outcome.error)):
        print(INTERRUPTED_LINE, file=sys.stderr)
        return EXIT_INTERRUPTED
    # Several workspaces: each failed one is one line of its own, and the others' success is still told.
    failed = [p for p in (outcome.parts or [outcome]) if not p.success]
    for part in failed:
        who = f"workspace {part.workspace} " if outcome.parts else ""
        print(f"scanwatch sync: {who}failed in {part.failed_step}: {printable(_root_cause(part.error))}",
              file=sys.stderr)
    synced = [p for p in outcome.parts if p.success] if outcome.parts else ([] if failed else [outcome])
    if not synced:
        return 1
    metadata = [m for p in synced for m in p.metadata.values()]
    total = sum(int(m.get("requests", 0)) for m in metadata)
    limited = sum(int(m.get("rate_limited_429s", 0)) for m in metadata)
    names = f" ({', '.join(p.workspace for p in synced)})" if outcome.parts else ""
    print(f"scanwatch sync: ok{names} in {elapsed:.1f} s, {total} requests, {limited} rate-limited answers")
    if not args.quiet:
        for asset, meta in outcome.metadata.items():
            if asset.split("/")[0] in {p.workspace for p in failed} and outcome.parts:
                continue
            print(f"  {asset:<17} {int(meta.get('requests', 0)):>5} requests {int(meta.get('rows_written', 0)):>7} rows"
                  f" {float(meta.get('duration_seconds', 0)):>7.2f} s")
        if outcome.failed_checks:
            print(f"  asset checks failed: {', '.join(outcome.failed_checks)}")
    return 1 if failed else 0
