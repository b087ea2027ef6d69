"""The `scanwatch` command.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``.
Modules are imported only for the subcommand being run, so ``scanwatch --help`` and the exporter
never pay for importing Dagster.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "simulator": ("simulator.cli", "serve the bundled fake Scanning Service and print a working key"),
    "sync": ("pipelines.commands.sync", "run every ingestion asset and the metrics snapshot once"),
    "exporter": ("exporters.cli", "serve /metrics from the last metrics snapshot"),
    "demo": ("pipelines.commands.demo", "simulator + first sync + Dagster UI + exporter (+ Prometheus)"),
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


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print(f"scanwatch {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
