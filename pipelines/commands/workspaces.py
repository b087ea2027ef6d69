"""`scanwatch workspaces`: every workspace scanwatch follows or has followed, and its state.

The workspaces file (or the two variables) says which workspaces are followed now; the history says which
were followed before and how their last syncs went. A workspace removed from the file keeps its history
and is no longer polled: it shows as `removed`. A key is never shown, only where it is read from, and
whether it is usable (one line saying what to fix when it is not).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pipelines.core.settings import DEFAULT_WORKSPACE
from pipelines.core.text import printable

if TYPE_CHECKING:
    from pipelines.core.settings import Settings

HISTORY_WAIT_SECONDS = 5.0  # a DuckDB file a sync holds is waited for this long, then shown as unreadable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("table", "tsv"), default="table",
                        help="an aligned table (default) or tab-separated lines for scripts")


def _followed(settings: Settings) -> list[tuple[str, str, str]]:
    """(name, where its key is read from, its state) for each workspace the file lists, each entry checked
    alone, so one broken entry is its own line rather than hiding the others."""
    from pipelines.core.credentials import ConfigError

    rows = []
    for name in settings.workspace_names:
        try:
            ws = settings.workspace(name)
        except ConfigError as exc:
            rows.append((name, "-", f"not usable: {exc}"))
            continue
        rows.append((name, ws.key_variable, "followed"))
    return rows


def _history(settings: Settings) -> tuple[dict[str, tuple[Any, ...]], str | None]:
    """Each name the history holds, with its bound workspace and last sync; or why the history was not read."""
    from pipelines.core.sqlfiles import read_sql
    from pipelines.storage import HistoryLockedError, HistoryUnavailableError, reader
    from pipelines.storage.destinations.impl import engine_for

    location = settings.history
    if not engine_for(location).exists(location):
        return {}, None
    try:
        with reader(location, wait_seconds=HISTORY_WAIT_SECONDS) as conn:
            rows = conn.execute(read_sql("read/workspaces_state.sql"),
                                {"default_workspace": DEFAULT_WORKSPACE}).fetchall()
    except (HistoryLockedError, HistoryUnavailableError) as exc:
        return {}, f"history not read: {exc}"
    except Exception as exc:  # a history of an older scanwatch, before its first sync of a workspace
        return {}, f"history not read: {type(exc).__name__}"
    return {row[0]: tuple(row[1:]) for row in rows}, None


def _when(value: object) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return "-" if value is None else printable(value)


def run(args: argparse.Namespace) -> int:
    from pipelines.core.settings import ConfigError, Settings

    settings = Settings.load()
    try:
        followed = _followed(settings)
    except ConfigError as exc:  # the file itself (not one entry) cannot be read
        print(f"scanwatch workspaces: {printable(exc)}", file=sys.stderr)
        return 2
    known, problem = _history(settings)
    rows = []
    for name, key_from, state in followed:
        _, service_name, last_success, last_status = known.get(name, (None, None, None, None))
        rows.append((name, state, key_from, printable(service_name or "-")[:40], _when(last_success),
                     last_status or "never synced"))
    listed = {name for name, _, _ in followed}
    for name, (_, service_name, last_success, last_status) in known.items():
        if name not in listed:
            rows.append((name, "removed: history kept, not polled", "-", printable(service_name or "-")[:40],
                         _when(last_success), last_status or "-"))
    header = ("workspace", "state", "key from", "service name", "last success", "last run")
    if args.format == "tsv":
        for row in (header, *rows):
            print("\t".join(str(c).replace("\t", " ") for c in row))
    else:
        widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
        for row in (header, *rows):
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if problem:
        print(f"scanwatch workspaces: {printable(problem)}", file=sys.stderr)
    return 1 if any(state.startswith("not usable") for _, state, _ in followed) else 0
