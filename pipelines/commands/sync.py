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
    from pipelines.commands.materialize import ErrorChain
    from pipelines.core.settings import Settings
    from pipelines.storage.destinations.impl.postgres.deadline import Deadline


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--full-reconcile", action="store_true",
                        help="read every project's issue and scan lists, not only the projects that moved")
    parser.add_argument("--quiet", action="store_true", help="print only the summary line")
    parser.add_argument("--workspace", metavar="NAME", default=None,
                        help="sync only this workspace of SCANWATCH_WORKSPACES_FILE (default: every one, at once)")


def root_cause(error: ErrorChain | None) -> str:
    """The innermost message of a Dagster error chain: the user's exception, not Dagster's wrapper; the line a
    failed sync prints.

    scanwatch's own errors are written for people, so the Python class path Dagster puts in front of them
    ("pipelines.api.errors.PermissionDeniedError: ") is dropped; other exceptions keep their class name.
    """
    while error is not None and error.cause is not None:
        error = error.cause
    message = ((error.message if error is not None else None) or str(error)).strip().splitlines()
    line = message[0] if message else "unknown error"
    return re.sub(r"^pipelines(\.\w+)+: ", "", line)


INTERRUPTED = ("KeyboardInterrupt", "DagsterExecutionInterruptedError")
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
# Once the history's connections are cut at the deadline, the steps fail in moments; past this, something
# else holds the process and it ends with the deadline's line.
LAST_RESORT_SECONDS = 30.0
INTERRUPTED_LINE = ("scanwatch sync: interrupted; each table keeps its last complete version and the next sync "
                    "catches up")


def interrupted(error: ErrorChain | None) -> bool:
    """Dagster turns Ctrl-C inside a step into its own error; either form means the user stopped the sync."""
    while error is not None:
        if error.cls_name in INTERRUPTED or any(n in (error.message or "") for n in INTERRUPTED):
            return True
        error = error.cause
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
        _ = settings.sync_processes
        ownership = settings.ownership  # a bad map is one line per problem, before anything runs
    except ConfigError as exc:
        for line in str(exc).splitlines() or [str(exc)]:
            print(f"scanwatch sync: {printable(line)}", file=sys.stderr)
        return 2
    for warning in ownership.unaimed([n for n in (ws.name, ws.label) if n] for ws in settings.workspaces):
        print(f"scanwatch sync: warning: {printable(warning)}", file=sys.stderr)
    with _history_deadline(settings) as cut:
        return _run(args, settings, cut)


@contextlib.contextmanager
def _history_deadline(settings: Settings) -> Iterator[Deadline | None]:
    """The sync's deadline kept on the history's connections too, where the engine can cut them
    (`Engine.deadline`: PostgreSQL's), and, should even that not end it, the process ended with the same line
    shortly after."""
    import os
    import threading

    from pipelines.storage.destinations.impl import engine_for

    limit = settings.sync_deadline_seconds
    with engine_for(settings.history).deadline(limit, limit, settings.history.masked) as cut:
        if cut is None:
            yield None
            return

        def last_resort() -> None:
            print(f"scanwatch sync: {printable(cut.reason)}", file=sys.stderr, flush=True)
            os._exit(1)

        backstop = threading.Timer(cut.seconds + LAST_RESORT_SECONDS, last_resort)
        backstop.daemon = True
        backstop.start()
        try:
            yield cut
        finally:
            backstop.cancel()


def _run(args: argparse.Namespace, settings: Settings, cut: Deadline | None) -> int:
    from pipelines.storage import HistoryUnavailableError

    try:
        # Asked once before Dagster starts, so a wrong password, an unreachable host or a newer scanwatch's
        # history is one line, not one per asset and workspace.
        from pipelines.storage.db import check_before_sync

        check_before_sync(settings.history)
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
    if sigint[0] or (not outcome.success and interrupted(outcome.error)):
        print(INTERRUPTED_LINE, file=sys.stderr)
        return EXIT_INTERRUPTED
    # Several workspaces: each failed one is one line of its own, and the others' success is still told.
    failed = [p for p in (outcome.parts or [outcome]) if not p.success]
    for part in failed:
        who = f"workspace {part.workspace} " if outcome.parts else ""
        print(f"scanwatch sync: {who}failed in {part.failed_step}: {printable(root_cause(part.error))}",
              file=sys.stderr)
    synced = [p for p in outcome.parts if p.success] if outcome.parts else ([] if failed else [outcome])
    if not synced:
        return 1
    metadata = [m for p in synced for m in p.metadata.values()]
    total = sum(int(m.get("requests", 0)) for m in metadata)
    limited = sum(int(m.get("rate_limited_429s", 0)) for m in metadata)
    names = f" ({', '.join(str(p.workspace) for p in synced)})" if outcome.parts else ""
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
