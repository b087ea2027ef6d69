"""The `scanwatch` command.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``.
Modules are imported only for the subcommand being run, so ``scanwatch --help`` and the exporter
never pay for importing Dagster.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "simulator": ("simulator.cli", "serve the bundled fake Scanning Service and print a working key"),
    "sync": ("pipelines.commands.sync", "run every ingestion asset and the metrics snapshot once"),
    "exporter": ("exporters.cli", "serve /metrics from the last metrics snapshot"),
    "demo": ("pipelines.commands.demo", "simulator + first sync + Dagster UI + exporter (+ Prometheus)"),
    "workspaces": ("pipelines.commands.workspaces", "list the workspaces followed now and before, with their state"),
    "sql": ("pipelines.commands.sql", "run read-only SQL or a cookbook query on the history"),
    "backfill": ("pipelines.commands.backfill", "rebuild the days before the first sync, marked as reconstructed"),
    "backfill-prometheus": ("pipelines.commands.backfill_prometheus",
                            "write the history as Prometheus TSDB blocks for a Prometheus data directory"),
    "roles": ("pipelines.commands.roles",
              "print (or --apply) the PostgreSQL roles of the history: writer, reader, Grafana's, one per workspace"),
    "backup": ("pipelines.commands.backup", "backup DEST: a consistent copy of the history, safe while a sync writes"),
    "restore": ("pipelines.commands.restore", "restore BACKUP: put back a history scanwatch backup wrote"),
    "prune": ("pipelines.commands.prune", "prune --before DATE: drop old samples and settled rows no metric reads"),
    "config": ("pipelines.commands.config_export",
               "config export DIR: write the installed rules, Alertmanager file, dashboards and Grafana provisioning"),
}


def _version() -> str:
    """The installed distribution's version: one home (pyproject.toml), read from the package metadata."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("scanwatch")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scanwatch", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"scanwatch {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        # Only the chosen subcommand's module is imported: its arguments are all we need.
        if name == wanted:
            module = importlib.import_module(module_name)
            module.add_arguments(sp)
            sp.set_defaults(_run=module.run)
    return parser


class _Scrubbed:
    """A text stream whose writes lose every secret of a history location this process has seen.

    The last filter before stderr: a command's own lines mask the URL already, but a driver's or a library's
    text (a host libpq resolved out of a misread password, a log record, a warning) passes here too.
    """

    def __init__(self, stream: TextIO, also: tuple[str, ...] = ()) -> None:
        self._stream = stream
        self._also = also

    def write(self, text: str) -> int:
        from pipelines.core.history_location import scrub_all

        self._stream.write(scrub_all(text, self._also))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _given_locations(argv: list[str]) -> tuple[str, ...]:
    """The `--db` values of the command line: their secrets are taken out of stderr as SCANWATCH_DB's are."""
    found = [value for flag, value in itertools.pairwise(argv) if flag == "--db"]
    return tuple(found + [a.split("=", 1)[1] for a in argv if a.startswith("--db=")])


def _one_line(command: str, exc: BaseException, *, unexpected: bool = True) -> str:
    """An error as one line, secrets out; one no command expected keeps its class and where it came from."""
    from pipelines.core.history_location import scrub_all

    text = " ".join(str(exc).split()) or type(exc).__name__
    if unexpected:
        frame = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" (at {Path(frame[0].filename).name}:{frame[0].lineno})" if frame else ""
        text = f"{type(exc).__name__}: {text[:500]}{where}"
    return scrub_all(f"scanwatch {command}: {text}")  # and `--db`'s, by stderr itself


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    stderr = sys.stderr
    sys.stderr = _Scrubbed(stderr._stream if isinstance(stderr, _Scrubbed) else stderr, _given_locations(argv))
    try:
        return _main(argv)
    finally:
        sys.stderr = stderr


def _main(argv: list[str]) -> int:
    args = build_parser(argv).parse_args(argv)
    from pipelines.core.credentials import ConfigError

    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print(f"scanwatch {args.command}: interrupted", file=sys.stderr)
        return 130
    except ConfigError as exc:
        print(_one_line(args.command, exc, unexpected=False), file=sys.stderr)
        return 2
    except Exception as exc:  # the last stop: one line, never a traceback with a secret in it
        print(_one_line(args.command, exc), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
