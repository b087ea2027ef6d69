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
    "workspaces": ("pipelines.commands.workspaces", "list the workspaces followed now and before, with their state"),
    "sql": ("pipelines.commands.sql", "run read-only SQL or a cookbook query on the history"),
    "backfill": ("pipelines.commands.backfill", "rebuild the days before the first sync, marked as reconstructed"),
    "backfill-prometheus": ("pipelines.commands.backfill_prometheus",
                            "write the history as Prometheus TSDB blocks for a Prometheus data directory"),
    "config": ("pipelines.commands.config_export",
               "config export DIR: write the installed rules, Alertmanager file, dashboards and Grafana provisioning"),
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scanwatch", description=__doc__.splitlines()[0])
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
